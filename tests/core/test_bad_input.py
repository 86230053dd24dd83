"""Bad input across the UI and the commands: each case gets a clear error and writes nothing.

"Nothing written" is checked where it can be: no agent row, no collection, the agent's census
(store + archive) unchanged, no pass. Real Chroma (in-process), a real down port for outages and
a real local LLM stub server (``tests/llm_stub.py``) for the timing-out endpoint.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from django.core.management import CommandError, call_command
from django.test import Client
from django.urls import reverse

from consolidation import MAX_DOCUMENT_CHARS, Policy
from memoryadmin.agents.models import Agent
from memoryadmin.agents.selectors.agents import agent_census
from memoryadmin.agents.services.agents import agent_create, agent_update
from memoryadmin.core import stores
from memoryadmin.core.errors import StoreUnavailable
from memoryadmin.proposals.models import Pass
from memoryadmin.proposals.services.passes import pass_request
from tests.conftest import DISTINCT_FACTS as F
from tests.conftest import XSS_MIXED as XSS

pytest_plugins = ["tests.llm_stub"]
pytestmark = pytest.mark.django_db

ONE_MB = "x" * (1024 * 1024)


def create_data(unique_name: Any, **over: str) -> dict[str, str]:
    data = {
        "name": "New bot",
        "slug": unique_name("new"),
        "collection_name": unique_name("coll"),
        "schedule_cron": "0 3 * * *",
        "schedule_enabled": "on",
        **{
            f"policy_{k}": ("on" if v is True else "" if v is False or v is None else v)
            for k, v in Policy().to_dict().items()
        },
    }
    data.update(over)
    return {k: v for k, v in data.items() if v != ""}


# ----- agent form: thresholds, cron, collection names -------------------------------------

AGENT_FORM_CASES = [
    ("policy_max_loss_fraction", "NaN"),
    ("policy_max_loss_fraction", "inf"),
    ("policy_max_loss_fraction", "-inf"),
    ("policy_max_loss_fraction", "-1"),
    ("policy_max_loss_fraction", "2"),
    ("policy_max_loss_fraction", "abc"),
    ("policy_max_loss_fraction", "True"),
    ("policy_link_threshold", "nan"),
    ("policy_link_threshold", "2"),
    ("policy_link_threshold", "-1"),
    ("policy_prune_threshold", "inf"),
    ("policy_prune_threshold", "-0.5"),
    ("policy_contradiction_threshold", "2"),
    ("policy_max_group_size", "1"),
    ("schedule_cron", ""),
    ("schedule_cron", "* * * *"),
    ("schedule_cron", "0 3 * * * *"),
    ("schedule_cron", "61 * * * *"),
    ("schedule_cron", "* 25 * * *"),
    ("schedule_cron", "0 3 32 * *"),
    ("schedule_cron", "0 3 * 13 *"),
    ("schedule_cron", "every day at 3"),
    ("collection_name", "ab"),
    ("collection_name", "-abc"),
    ("collection_name", "abc-"),
    ("collection_name", "a..b"),
    ("collection_name", "192.168.0.1"),
    ("collection_name", "has space"),
    ("collection_name", "x" * 513),
    ("collection_name", "ümlaut-name"),
]


@pytest.mark.parametrize(
    ("field", "value"), AGENT_FORM_CASES, ids=[f"{f}={v[:20]!r}" for f, v in AGENT_FORM_CASES]
)
def test_the_agent_form_refuses(client: Client, alice, unique_name, field: str, value: str) -> None:
    client.force_login(alice)
    data = create_data(unique_name, **{field: value})
    r = client.post(reverse("agent_create"), data)
    assert r.status_code == 200
    errors = r.context["form"].errors
    assert errors.get(field) or errors.get("__all__"), errors
    assert all(str(e).strip() for e in errors.get(field, errors.get("__all__", [])))  # a sentence
    assert not Agent.objects.filter(slug=data["slug"]).exists()
    if field != "collection_name":
        assert not stores.collection_exists(data["collection_name"])


SERVICE_POLICIES = [
    {"max_loss_fraction": True},
    {"max_loss_fraction": "abc"},
    {"max_loss_fraction": math.nan},
    {"max_loss_fraction": math.inf},
    {"max_loss_fraction": -1},
    {"max_loss_fraction": 2},
    {"link_threshold": False},
]


@pytest.mark.parametrize("policy", SERVICE_POLICIES, ids=[repr(p) for p in SERVICE_POLICIES])
def test_the_create_service_refuses_a_bad_policy(unique_name, policy: dict) -> None:
    slug, coll = unique_name("svc"), unique_name("coll")
    with pytest.raises(ValueError, match=next(iter(policy))):
        agent_create(name="Svc", slug=slug, collection_name=coll, policy=policy)
    assert not Agent.objects.filter(slug=slug).exists() and not stores.collection_exists(coll)


@pytest.mark.parametrize(
    "policy",
    [
        {"max_loss_fraction": 2},
        {"max_loss_fraction": True},
        {"max_loss_fraction": "abc"},
        {"link_threshold": -1},
    ],
)
def test_consolidate_refuses_an_agent_whose_stored_policy_is_bad(
    agent_with_memories, policy: dict
) -> None:
    agent = agent_with_memories(F[:3] + [F[0]])
    Agent.objects.filter(pk=agent.pk).update(policy=policy)  # corrupted behind the form's back
    before = agent_census(agent=agent)
    with pytest.raises(CommandError, match="invalid policy") as info:
        call_command("consolidate", agent.slug, "--apply")
    assert info.value.returncode == 2
    assert agent_census(agent=agent) == before and not Pass.objects.filter(agent=agent).exists()


def test_consolidate_refuses_an_unknown_named_policy(agent_with_memories) -> None:
    agent = agent_with_memories(3)
    with pytest.raises(CommandError, match="Unknown policy 'abc'"):
        call_command("consolidate", agent.slug, "--policy", "abc")
    assert not Pass.objects.filter(agent=agent).exists()


@pytest.mark.parametrize("cron", ["61 * * * *", "* * *", "", "0 3 * * MON-XYZ"])
def test_agent_update_refuses_a_bad_cron(agent_with_memories, alice, cron: str) -> None:
    agent = agent_with_memories(1)
    with pytest.raises(ValueError, match="cron"):
        agent_update(agent=agent, user=alice, schedule_cron=cron)
    assert Agent.objects.get(pk=agent.pk).schedule_cron == "0 3 * * *"


# ----- unknown agent for every command -----------------------------------------------------

UNKNOWN_AGENT_COMMANDS = [
    ("census", ["nobody"]),
    ("census", ["nobody", "--json"]),
    ("consolidate", ["nobody", "--apply"]),
    ("evaluate_recall", ["nobody"]),
    ("export_memories", ["nobody", "-"]),
    ("import_memories", ["nobody", "FILE"]),
]


@pytest.mark.parametrize(
    ("command", "args"),
    UNKNOWN_AGENT_COMMANDS,
    ids=[" ".join([c, *a]) for c, a in UNKNOWN_AGENT_COMMANDS],
)
def test_every_command_names_an_unknown_agent(
    tmp_path: Path, command: str, args: list[str]
) -> None:
    path = tmp_path / "in.jsonl"
    path.write_text(json.dumps({"id": "a", "document": "hello", "metadata": {}}) + "\n")
    args = [str(path) if a == "FILE" else a for a in args]
    with pytest.raises(CommandError, match=r"(?i)(unknown agent|no agent).*nobody") as err:
        call_command(command, *args)
    assert err.value.returncode == 2  # bad input exits 2 for every command
    assert not Agent.objects.exists()


# ----- documents: empty, 1 MB, non-UTF-8 -----------------------------------------------------


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ("", "required"),
        ("   \n\t ", "required"),
        (ONE_MB, f"the limit is {MAX_DOCUMENT_CHARS:,}"),
    ],
)
def test_the_memory_edit_form_refuses(
    client: Client, alice, agent_with_memories, document: str, message: str
) -> None:
    agent = agent_with_memories(3)
    before = agent_census(agent=agent)
    client.force_login(alice)
    r = client.post(
        reverse("memory_edit", args=[agent.slug]), {"memory_id": "mem-000", "document": document}
    )
    assert r.status_code == 200
    assert message in " ".join(r.context["edit_form"].errors["document"])
    assert agent_census(agent=agent) == before


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (json.dumps({"id": "a", "document": "", "metadata": {}}).encode() + b"\n", "document"),
        (json.dumps({"id": "a", "document": ONE_MB, "metadata": {}}).encode() + b"\n", "document"),
        (b'{"id": "a", "document": "caf\xe9", "metadata": {}}\n', "UTF-8"),
        (b"\xff\xfe\x00garbage\n", "UTF-8"),
    ],
)
def test_jsonl_import_refuses_the_whole_file(
    agent_with_memories, tmp_path: Path, content: bytes, message: str
) -> None:
    agent = agent_with_memories(3)
    before = agent_census(agent=agent)
    path = tmp_path / "bad.jsonl"
    path.write_bytes(content)
    with pytest.raises(CommandError) as info:
        call_command("import_memories", agent.slug, str(path))
    assert info.value.returncode == 2 and str(info.value).strip()
    assert message.lower() in str(info.value).lower() or message.lower() in repr(info.value).lower()
    assert agent_census(agent=agent) == before


# ----- HTML/JS in memory text; SQL-ish search -------------------------------------------------


@pytest.mark.parametrize("page", ["memory_list", "memory_detail"])
def test_memory_text_with_html_is_shown_escaped(
    client: Client, carol, agent_with_memories, page: str
) -> None:
    agent = agent_with_memories([XSS, F[1]])
    client.force_login(carol)
    url = reverse(page, args=[agent.slug]) + ("?id=mem-000" if page == "memory_detail" else "")
    body = client.get(url).content.decode()
    assert XSS not in body and "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in body


@pytest.mark.parametrize(
    ("contains", "expected"),
    [
        ("' OR 1=1 --", []),
        ("%", ["mem-000"]),
        ("_", ["mem-001"]),
        ('"; DROP TABLE console_pass; --', []),
    ],
)
def test_sql_ish_search_is_plain_text(
    client: Client, carol, agent_with_memories, contains: str, expected: list
) -> None:
    agent = agent_with_memories(["The discount was 100% off.", "Use snake_case for names.", F[2]])
    client.force_login(carol)
    r = client.get(reverse("memory_list", args=[agent.slug]), {"contains": contains})
    assert r.status_code == 200
    shown = [m.id for m in r.context["page"]]
    assert shown == expected
    assert (
        Pass.objects.model._meta.db_table == "console_pass" and Pass.objects.count() == 0
    )  # table intact


# ----- Chroma down; LLM endpoint timing out ---------------------------------------------------


@pytest.fixture
def chroma_down(settings: Any) -> Any:
    def down() -> None:
        settings.CHROMA_MODE, settings.CHROMA_HOST, settings.CHROMA_PORT = "http", "127.0.0.1", 9
        stores.reset_client_cache()

    def up() -> None:
        settings.CHROMA_MODE = "ephemeral"
        stores.reset_client_cache()

    yield down, up
    up()


def test_run_now_with_chroma_down_fails_the_pass_with_the_reason(
    client: Client, alice, agent_with_memories, chroma_down, django_capture_on_commit_callbacks
) -> None:
    agent = agent_with_memories(F[:4] + [F[0]])
    before = agent_census(agent=agent)
    down, up = chroma_down
    down()
    client.force_login(alice)
    with django_capture_on_commit_callbacks(execute=True):
        client.post(reverse("agent_run", args=[agent.slug]))
    run = Pass.objects.get(agent=agent)
    assert (
        run.status == "failed"
        and "Cannot reach the Chroma server at http://127.0.0.1:9" in run.error
    )
    page = client.get(reverse("pass_detail", args=[run.pk])).content.decode()
    assert "Cannot reach the Chroma server" in page
    up()
    assert agent_census(agent=agent) == before


def test_pages_say_the_store_is_down(
    client: Client, carol, agent_with_memories, chroma_down
) -> None:
    agent = agent_with_memories(2)
    down, _ = chroma_down
    down()
    client.force_login(carol)
    r = client.get(reverse("memory_list", args=[agent.slug]))
    assert r.status_code == 200 and "Store unavailable" in r.content.decode()
    r = client.get(reverse("agent_detail", args=[agent.slug]))
    assert r.status_code == 200 and "unavailable" in r.content.decode()


def test_creating_an_agent_with_chroma_down_writes_nothing(
    client: Client, alice, unique_name, chroma_down
) -> None:
    down, _ = chroma_down
    down()
    client.force_login(alice)
    data = create_data(unique_name)
    r = client.post(reverse("agent_create"), data)
    assert r.status_code == 200 and "Cannot reach" in r.content.decode()
    assert not Agent.objects.filter(slug=data["slug"]).exists()


def test_an_llm_endpoint_that_times_out_costs_the_distillation_only_and_writes_nothing(
    agent_with_memories, llm_stub, settings, django_capture_on_commit_callbacks
) -> None:
    metas = [{"session": "s1"}, {"session": "s1"}, {"session": "s1"}]
    agent = agent_with_memories(F[:3], metas)
    before = agent_census(agent=agent)
    settings.MEMORYADMIN_LLM_MODEL = "stub-model"
    settings.OPENAI_BASE_URL = llm_stub.base_url
    settings.OPENAI_API_KEY = "test-key"
    settings.MEMORYADMIN_LLM_TIMEOUT = "1"
    for _ in range(5):  # every attempt (and retry) is slower than the timeout
        llm_stub.push_slow(10)
    with django_capture_on_commit_callbacks(execute=True):
        run = pass_request(agent=agent, trigger="operator")
    run.refresh_from_db()
    assert llm_stub.requests, "the pass never called the LLM"
    assert run.status != "failed", run.error  # the offline pass never depends on the LLM
    reason = run.telemetry["llm"]["distill"]["group_log"][0]["reason"]
    assert reason == "timeout"
    assert agent_census(agent=agent) == before


# ----- time zones, dates and ids that used to answer 500 -------------------------

LONG_ZONE = "Europe/" + "a" * 300
BAD_ZONES = [LONG_ZONE, "a" * 256, "../../etc/passwd", "Not/AZone", "UTC\\x"]


@pytest.mark.parametrize(
    "zone", BAD_ZONES, ids=["long-key", "256-chars", "path", "unknown", "backslash"]
)
@pytest.mark.parametrize("how", ["query", "cookie"])
def test_a_bad_time_zone_falls_back_to_the_default(
    client: Client, carol, agent_with_memories, settings, zone: str, how: str
) -> None:
    agent = agent_with_memories(1)
    client.force_login(carol)
    if how == "cookie":
        client.cookies["tz"] = zone
    params = {"tz": zone} if how == "query" else {}
    for url in (
        reverse("dashboard"),
        reverse("agent_list"),
        reverse("agent_detail", args=[agent.slug]),
        reverse("audit"),
        reverse("audit_csv"),
        reverse("schedule_preview") + "?schedule_cron=0+3+*+*+*",
    ):
        r = client.get(url, params)
        assert r.status_code == 200, url
    page = client.get(reverse("agent_list"), params).content.decode()
    assert f'title="times are shown in this zone">{settings.TIME_ZONE}<' in page


@pytest.mark.parametrize(
    "params",
    [
        {"until": "9999-12-31"},
        {"since": "9999-12-31"},
        {"since": "2020-01-01", "until": "9999-12-31"},
    ],
)
def test_audit_dates_past_the_calendar_are_a_form_error(
    client: Client, carol, params: dict
) -> None:
    client.force_login(carol)
    r = client.get(reverse("audit"), params)
    assert r.status_code == 200 and "Choose a date before 9999-12-31." in r.content.decode()
    r = client.get(reverse("audit_csv"), params)
    assert r.status_code == 400 and not r["Content-Type"].startswith("text/csv")
    assert "Choose a date before 9999-12-31." in r.content.decode()


@pytest.mark.parametrize("view", ["memory_edit", "memory_pin", "memory_delete"])
def test_a_memory_post_without_an_id_is_a_message(
    client: Client, alice, agent_with_memories, view: str
) -> None:
    agent = agent_with_memories(2)
    before = agent_census(agent=agent)
    client.force_login(alice)
    r = client.post(
        reverse(view, args=[agent.slug]), {"document": "New text", "pinned": "1"}, follow=True
    )
    assert r.status_code == 200
    shown = [str(m) for m in r.context["messages"]]
    assert shown and all(m.strip() for m in shown), shown
    assert agent_census(agent=agent) == before


# ----- audit CSV: every formula start is neutralised ------------------------------

FORMULA_NOTES = [
    "=1+1",
    "+1",
    "-1",
    "@SUM(A1)",
    "\tx",
    "\rx",
    "\nx",
    ";x",
    "|calc",
    ",x",
    "%x",
    "  =1+1",
]


@pytest.mark.parametrize("note", FORMULA_NOTES, ids=[repr(n) for n in FORMULA_NOTES])
def test_audit_csv_cells_never_start_a_formula(
    client: Client, carol, unique_name, note: str
) -> None:
    import csv
    import io

    a = Agent.objects.create(name="Csv", slug=unique_name("csv"), collection_name=unique_name("c"))
    run = Pass.objects.create(
        agent=a, trigger="operator", status="rejected", note=note, reason=note, error=note
    )
    client.force_login(carol)
    rows = list(csv.DictReader(io.StringIO(client.get(reverse("audit_csv")).content.decode())))
    row = next(r for r in rows if int(r["pass"]) == run.pk)
    for col in ("note", "reason", "error"):
        assert row[col] == "'" + note, (col, row[col])


# ----- JSONL: one bad line among 1,500 refuses the whole file ----------------------

BAD_1501 = {
    "surrogate-document": b'{"id": "x", "document": "bad \\ud800 text"}',
    "surrogate-id": b'{"id": "x\\ud800", "document": "fine"}',
    "surrogate-metadata-key": b'{"id": "x", "document": "fine", "metadata": {"k\\udc00": 1}}',
    "surrogate-metadata-value": b'{"id": "x", "document": "fine", "metadata": {"k": ["\\udbff"]}}',
    "nested-100000": b'{"id": "x", "document": "fine", "metadata": {"k": '
    + b"[" * 100_000
    + b"]" * 100_000
    + b"}}",
    "int-5000-digits": b'{"id": "x", "document": "fine", "metadata": {"n": ' + b"7" * 5000 + b"}}",
    "reserved-key": b'{"id": "x", "document": "fine", "metadata": {"chroma:x": 1}}',
    "embedding-overflow": b'{"id": "x", "document": "fine", "embedding": ['
    + b"1e39, " * 384
    + b"]}",
}


def file_1501(bad: bytes) -> bytes:
    good = [
        json.dumps({"id": f"ok-{i:04d}", "document": f"Valid memory number {i}."}).encode()
        for i in range(1500)
    ]
    return b"\n".join([*good, bad.replace(b", ]", b"]")]) + b"\n"


@pytest.mark.parametrize("kind", list(BAD_1501))
def test_one_bad_line_among_1500_refuses_the_whole_file_from_the_command(
    agent_with_memories, tmp_path: Path, kind: str
) -> None:
    from memoryadmin.core.models import AuditEvent

    agent = agent_with_memories(2)
    before = agent_census(agent=agent)
    path = tmp_path / "big.jsonl"
    path.write_bytes(file_1501(BAD_1501[kind]))
    with pytest.raises(CommandError) as info:
        call_command("import_memories", agent.slug, str(path))
    assert info.value.returncode == 2
    message = str(info.value)
    assert "1 invalid line, nothing written — line 1501: " in message, message
    assert "Traceback" not in message and len(message) < 600
    assert agent_census(agent=agent) == before
    event = AuditEvent.objects.get(agent=agent, verb="memories_import_refused")
    assert "line 1501" in event.note and event.actor == "cli"


@pytest.mark.parametrize("kind", ["surrogate-document", "nested-100000", "int-5000-digits"])
def test_one_bad_line_among_1500_refuses_the_whole_upload(
    client: Client, alice, agent_with_memories, kind: str
) -> None:
    from tests.memories.test_views_upload import post

    agent = agent_with_memories(2)
    before = agent_census(agent=agent)
    client.force_login(alice)
    r = post(client, agent, file_1501(BAD_1501[kind]))
    html = r.content.decode()
    assert r.status_code == 200 and "Nothing was written." in html
    assert '<td class="num mono">1501</td>' in html
    assert agent_census(agent=agent) == before


# ----- JSONL: a store failing half-way through the write ---------------------------


class UpsertFails:
    """The agent's real store, except that upsert call number ``fail_at`` (1-based) raises, as a
    Chroma server dying mid-import would; with ``undo_fails`` the store stays down for deletes."""

    def __init__(self, store: Any, fail_at: int, undo_fails: bool = False) -> None:
        self._store, self.fail_at, self.undo_fails, self.calls = store, fail_at, undo_fails, 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def upsert(self, records: Any) -> None:
        self.calls += 1
        if self.calls == self.fail_at or (self.undo_fails and self.calls > self.fail_at):
            raise StoreUnavailable("Cannot reach the Chroma server (test)")
        self._store.upsert(records)

    def delete(self, ids: Any) -> None:
        if self.undo_fails:
            raise StoreUnavailable("Cannot reach the Chroma server (test)")
        self._store.delete(ids)


def big_file_with_embeddings(n: int) -> bytes:
    rng = np.random.default_rng(11)
    vecs = rng.normal(size=(n, 384)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    rows = [
        {
            "id": f"mem-{i:03d}" if i < 2 else f"new-{i:04d}",
            "document": f"Imported memory {i}.",
            "metadata": {"n": i},
            "embedding": [float(x) for x in vecs[i]],
        }
        for i in range(n)
    ]
    return "\n".join(json.dumps(r) for r in rows).encode() + b"\n"


def store_records(agent: Any) -> list[Any]:
    return sorted(
        (r for page in stores.get_store(agent).iter_pages(include_embeddings=True) for r in page),
        key=lambda r: r.id,
    )


def contents(agent: Any) -> dict[str, tuple[str, str]]:
    return {
        r.id: (r.document, json.dumps(r.metadata, sort_keys=True))
        for page in stores.get_store(agent).iter_pages()
        for r in page
    }


def test_a_store_failing_half_way_is_undone(
    agent_with_memories, tmp_path: Path, monkeypatch
) -> None:
    from memoryadmin.core.models import AuditEvent

    agent = agent_with_memories(3)  # mem-000..002; the file replaces mem-000 and mem-001
    before, census = contents(agent), agent_census(agent=agent)
    old = store_records(agent)
    path = tmp_path / "big.jsonl"
    path.write_bytes(big_file_with_embeddings(1500))
    real = stores.get_store
    monkeypatch.setattr(stores, "get_store", lambda a: UpsertFails(real(a), fail_at=2))
    with pytest.raises(CommandError) as info:
        call_command("import_memories", agent.slug, str(path))
    assert "taken back, so nothing was imported" in str(info.value)
    monkeypatch.setattr(stores, "get_store", real)
    assert contents(agent) == before  # the 1,000 written memories were taken back
    after = agent_census(agent=agent)
    assert after["store"]["content_sha256"] == census["store"]["content_sha256"]
    assert after["archive"] == census["archive"] and after["store"]["count"] == 3
    # The two replaced memories were written back: equal within Chroma's 1-ulp re-write.
    assert stores.embeddings_within_ulp(
        np.stack([r.embedding for r in old]), np.stack([r.embedding for r in store_records(agent)])
    )
    event = AuditEvent.objects.get(agent=agent, verb="memories_import_failed")
    assert event.data["undone"] is True and event.data["written"] == 1000


def test_an_undo_that_fails_too_says_to_run_the_import_again(
    agent_with_memories, tmp_path: Path, monkeypatch
) -> None:
    agent = agent_with_memories(3)
    path = tmp_path / "big.jsonl"
    path.write_bytes(big_file_with_embeddings(1500))
    real = stores.get_store
    monkeypatch.setattr(
        stores, "get_store", lambda a: UpsertFails(real(a), fail_at=2, undo_fails=True)
    )
    with pytest.raises(CommandError) as info:
        call_command("import_memories", agent.slug, str(path))
    assert "Run the same import again" in str(info.value)
    monkeypatch.setattr(stores, "get_store", real)
    call_command("import_memories", agent.slug, str(path))  # resumable: finishes the job
    got = contents(agent)
    assert len(got) == 1501 and got["new-1499"][0] == "Imported memory 1499."
