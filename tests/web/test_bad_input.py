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

import pytest
from django.core.management import CommandError, call_command
from django.test import Client
from django.urls import reverse

from consolidation import MAX_DOCUMENT_CHARS, Policy
from memoryadmin.console import services, stores
from memoryadmin.console.models import Agent, Pass
from tests.conftest import DISTINCT_FACTS as F
from tests.web.conftest import XSS_MIXED as XSS

pytest_plugins = ["tests.llm_stub"]
pytestmark = pytest.mark.django_db

ONE_MB = "x" * (1024 * 1024)


def create_data(unique_name: Any, **over: str) -> dict[str, str]:
    data = {
        "name": "New bot", "slug": unique_name("new"), "collection_name": unique_name("coll"),
        "schedule_cron": "0 3 * * *", "schedule_enabled": "on",
        **{f"policy_{k}": ("on" if v is True else "" if v is False or v is None else v)
           for k, v in Policy().to_dict().items()},
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


@pytest.mark.parametrize(("field", "value"), AGENT_FORM_CASES, ids=[f"{f}={v[:20]!r}" for f, v in AGENT_FORM_CASES])
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
        services.agent_create(name="Svc", slug=slug, collection_name=coll, policy=policy)
    assert not Agent.objects.filter(slug=slug).exists() and not stores.collection_exists(coll)


@pytest.mark.parametrize("policy", [{"max_loss_fraction": 2}, {"max_loss_fraction": True},
                                    {"max_loss_fraction": "abc"}, {"link_threshold": -1}])
def test_consolidate_refuses_an_agent_whose_stored_policy_is_bad(agent_with_memories, policy: dict) -> None:
    agent = agent_with_memories(F[:3] + [F[0]])
    Agent.objects.filter(pk=agent.pk).update(policy=policy)  # corrupted behind the form's back
    before = services.agent_census(agent=agent)
    with pytest.raises(CommandError, match="invalid policy") as info:
        call_command("consolidate", agent.slug, "--apply")
    assert info.value.returncode == 2
    assert services.agent_census(agent=agent) == before and not Pass.objects.filter(agent=agent).exists()


def test_consolidate_refuses_an_unknown_named_policy(agent_with_memories) -> None:
    agent = agent_with_memories(3)
    with pytest.raises(CommandError, match="Unknown policy 'abc'"):
        call_command("consolidate", agent.slug, "--policy", "abc")
    assert not Pass.objects.filter(agent=agent).exists()


@pytest.mark.parametrize("cron", ["61 * * * *", "* * *", "", "0 3 * * MON-XYZ"])
def test_agent_update_refuses_a_bad_cron(agent_with_memories, alice, cron: str) -> None:
    agent = agent_with_memories(1)
    with pytest.raises(ValueError, match="cron"):
        services.agent_update(agent=agent, user=alice, schedule_cron=cron)
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


@pytest.mark.parametrize(("command", "args"), UNKNOWN_AGENT_COMMANDS, ids=[" ".join([c, *a]) for c, a in UNKNOWN_AGENT_COMMANDS])
def test_every_command_names_an_unknown_agent(tmp_path: Path, command: str, args: list[str]) -> None:
    path = tmp_path / "in.jsonl"
    path.write_text(json.dumps({"id": "a", "document": "hello", "metadata": {}}) + "\n")
    args = [str(path) if a == "FILE" else a for a in args]
    with pytest.raises(CommandError, match=r"(?i)(unknown agent|no agent).*nobody") as err:
        call_command(command, *args)
    assert err.value.returncode == 2  # bad input exits 2 for every command
    assert not Agent.objects.exists()


# ----- documents: empty, 1 MB, non-UTF-8 -----------------------------------------------------


@pytest.mark.parametrize(("document", "message"), [
    ("", "required"), ("   \n\t ", "required"), (ONE_MB, f"the limit is {MAX_DOCUMENT_CHARS:,}"),
])
def test_the_memory_edit_form_refuses(client: Client, alice, agent_with_memories, document: str, message: str) -> None:
    agent = agent_with_memories(3)
    before = services.agent_census(agent=agent)
    client.force_login(alice)
    r = client.post(reverse("memory_edit", args=[agent.slug]), {"memory_id": "mem-000", "document": document})
    assert r.status_code == 200
    assert message in " ".join(r.context["edit_form"].errors["document"])
    assert services.agent_census(agent=agent) == before


@pytest.mark.parametrize(("content", "message"), [
    (json.dumps({"id": "a", "document": "", "metadata": {}}).encode() + b"\n", "document"),
    (json.dumps({"id": "a", "document": ONE_MB, "metadata": {}}).encode() + b"\n", "document"),
    (b'{"id": "a", "document": "caf\xe9", "metadata": {}}\n', "UTF-8"),
    (b"\xff\xfe\x00garbage\n", "UTF-8"),
])
def test_jsonl_import_refuses_the_whole_file(agent_with_memories, tmp_path: Path, content: bytes, message: str) -> None:
    agent = agent_with_memories(3)
    before = services.agent_census(agent=agent)
    path = tmp_path / "bad.jsonl"
    path.write_bytes(content)
    with pytest.raises(CommandError) as info:
        call_command("import_memories", agent.slug, str(path))
    assert info.value.returncode == 2 and str(info.value).strip()
    assert message.lower() in str(info.value).lower() or message.lower() in repr(info.value).lower()
    assert services.agent_census(agent=agent) == before


# ----- HTML/JS in memory text; SQL-ish search -------------------------------------------------


@pytest.mark.parametrize("page", ["memory_list", "memory_detail"])
def test_memory_text_with_html_is_shown_escaped(client: Client, carol, agent_with_memories, page: str) -> None:
    agent = agent_with_memories([XSS, F[1]])
    client.force_login(carol)
    url = reverse(page, args=[agent.slug]) + ("?id=mem-000" if page == "memory_detail" else "")
    body = client.get(url).content.decode()
    assert XSS not in body and "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in body


@pytest.mark.parametrize(("contains", "expected"), [
    ("' OR 1=1 --", []), ("%", ["mem-000"]), ("_", ["mem-001"]), ('"; DROP TABLE console_pass; --', []),
])
def test_sql_ish_search_is_plain_text(client: Client, carol, agent_with_memories, contains: str, expected: list) -> None:
    agent = agent_with_memories(["The discount was 100% off.", "Use snake_case for names.", F[2]])
    client.force_login(carol)
    r = client.get(reverse("memory_list", args=[agent.slug]), {"contains": contains})
    assert r.status_code == 200
    shown = [m.id for m in r.context["page"]]
    assert shown == expected
    assert Pass.objects.model._meta.db_table == "console_pass" and Pass.objects.count() == 0  # table intact


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


def test_run_now_with_chroma_down_fails_the_pass_with_the_reason(client: Client, alice, agent_with_memories, chroma_down, django_capture_on_commit_callbacks) -> None:
    agent = agent_with_memories(F[:4] + [F[0]])
    before = services.agent_census(agent=agent)
    down, up = chroma_down
    down()
    client.force_login(alice)
    with django_capture_on_commit_callbacks(execute=True):
        client.post(reverse("agent_run", args=[agent.slug]))
    run = Pass.objects.get(agent=agent)
    assert run.status == "failed" and "Cannot reach the Chroma server at http://127.0.0.1:9" in run.error
    page = client.get(reverse("pass_detail", args=[run.pk])).content.decode()
    assert "Cannot reach the Chroma server" in page
    up()
    assert services.agent_census(agent=agent) == before


def test_pages_say_the_store_is_down(client: Client, carol, agent_with_memories, chroma_down) -> None:
    agent = agent_with_memories(2)
    down, _ = chroma_down
    down()
    client.force_login(carol)
    r = client.get(reverse("memory_list", args=[agent.slug]))
    assert r.status_code == 200 and "Store unavailable" in r.content.decode()
    r = client.get(reverse("agent_detail", args=[agent.slug]))
    assert r.status_code == 200 and "unavailable" in r.content.decode()


def test_creating_an_agent_with_chroma_down_writes_nothing(client: Client, alice, unique_name, chroma_down) -> None:
    down, _ = chroma_down
    down()
    client.force_login(alice)
    data = create_data(unique_name)
    r = client.post(reverse("agent_create"), data)
    assert r.status_code == 200 and "Cannot reach" in r.content.decode()
    assert not Agent.objects.filter(slug=data["slug"]).exists()


def test_an_llm_endpoint_that_times_out_fails_the_pass_and_writes_nothing(agent_with_memories, llm_stub, monkeypatch, django_capture_on_commit_callbacks) -> None:
    metas = [{"session": "s1"}, {"session": "s1"}, {"session": "s1"}]
    agent = agent_with_memories(F[:3], metas)
    before = services.agent_census(agent=agent)
    monkeypatch.setenv("MEMORYADMIN_LLM_MODEL", "stub-model")
    monkeypatch.setenv("OPENAI_BASE_URL", llm_stub.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    monkeypatch.setenv("MEMORYADMIN_LLM_TIMEOUT", "1")
    for _ in range(5):  # every attempt (and retry) is slower than the timeout
        llm_stub.push_slow(10)
    with django_capture_on_commit_callbacks(execute=True):
        run = services.pass_request(agent=agent, trigger="operator")
    run.refresh_from_db()
    assert llm_stub.requests, "the pass never called the LLM"
    assert run.status == "failed"
    assert "tim" in run.error.lower() and len(run.error) < 500, run.error  # readable: timed out / timeout
    assert services.agent_census(agent=agent) == before
