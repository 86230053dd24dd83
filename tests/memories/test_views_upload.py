"""Agent page: JSONL upload (admin; all-or-nothing unless "skip invalid lines") and download."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client, TestCase
from django.urls import reverse

from memoryadmin.agents.models import Agent
from memoryadmin.core import stores
from memoryadmin.core.models import AuditEvent
from tests.conftest import XSS
from tests.conftest import XSS_ESCAPED as ESCAPED

pytestmark = pytest.mark.django_db


def line(mid: str, **extra) -> str:
    return json.dumps(
        {
            "id": mid,
            "document": f"Memory number {mid} about the garden.",
            "metadata": {"n": 1},
            **extra,
        }
    )


def upload(content: str | bytes, name: str = "memories.jsonl") -> SimpleUploadedFile:
    return SimpleUploadedFile(
        name,
        content.encode() if isinstance(content, str) else content,
        content_type="application/x-ndjson",
    )


def ids_in(agent: Agent) -> set[str]:
    return {r.id for page in stores.get_store(agent).iter_pages() for r in page}


def post(client: Client, agent: Agent, content, *, skip: bool = False, htmx: bool = False):
    """Upload, let the worker's task run (django-q2 sync mode, after commit), then show the job
    as the page's polling would: its final state (htmx: 286, which stops the polling)."""
    data = {"file": upload(content)}
    if skip:
        data["skip_invalid"] = "on"
    extra = {"HTTP_HX_REQUEST": "true"} if htmx else {}
    with TestCase.captureOnCommitCallbacks(execute=True):
        r = client.post(reverse("memories_import", args=[agent.slug]), data, **extra)
    job = r.context["job"] if r.status_code == 200 and r.context else None
    if job is None:
        return r
    r = client.get(reverse("memories_import_status", args=[agent.slug, job.pk]), **extra)
    assert r.status_code == (286 if htmx else 200)
    return r


# ----- the agent page ----------------------------------------------------------------------


def test_it_offers_upload_and_download_to_an_admin(
    client: Client, alice, agent_with_memories
) -> None:
    agent = agent_with_memories(1)
    client.force_login(alice)
    html = client.get(reverse("agent_detail", args=[agent.slug])).content.decode()
    assert reverse("memories_export", args=[agent.slug]) in html
    assert 'enctype="multipart/form-data"' in html and 'name="skip_invalid"' in html
    assert (
        f'hx-post="{reverse("memories_import", args=[agent.slug])}"' in html
        and 'id="import-result"' in html
    )


@pytest.mark.parametrize("user", ["bob", "carol"])
def test_it_offers_only_the_download_to_readers(
    client: Client, user: str, request, agent_with_memories
) -> None:
    agent = agent_with_memories(1)
    client.force_login(request.getfixturevalue(user))
    html = client.get(reverse("agent_detail", args=[agent.slug])).content.decode()
    assert reverse("memories_export", args=[agent.slug]) in html
    assert 'name="skip_invalid"' not in html


def test_it_shows_the_upload_page(client: Client, alice, agent_with_memories) -> None:
    agent = agent_with_memories(0)
    client.force_login(alice)
    r = client.get(reverse("memories_import", args=[agent.slug]))
    assert r.status_code == 200 and b'type="file"' in r.content and b"<html" in r.content


# ----- access ------------------------------------------------------------------------------


def test_it_redirects_an_anonymous_upload_to_login_and_writes_nothing(
    client: Client, agent_with_memories
) -> None:
    agent = agent_with_memories(0)
    r = post(client, agent, line("a"))
    assert r.status_code == 302 and r["Location"].startswith(reverse("login"))
    assert stores.get_store(agent).count() == 0


@pytest.mark.parametrize("user", ["bob", "carol"])
def test_it_forbids_upload_without_the_memory_permission(
    client: Client, user: str, request, agent_with_memories
) -> None:
    agent = agent_with_memories(0)
    client.force_login(request.getfixturevalue(user))
    assert post(client, agent, line("a")).status_code == 403
    assert client.get(reverse("memories_import", args=[agent.slug])).status_code == 403
    assert stores.get_store(agent).count() == 0


def test_it_enforces_csrf_on_upload(alice, agent_with_memories) -> None:
    agent = agent_with_memories(0)
    c = Client(enforce_csrf_checks=True)
    c.force_login(alice)
    assert post(c, agent, line("a")).status_code == 403
    assert stores.get_store(agent).count() == 0


# ----- a valid file ------------------------------------------------------------------------


def test_it_writes_a_valid_file_and_says_how_many(
    client: Client, alice, agent_with_memories
) -> None:
    agent = agent_with_memories(1)
    client.force_login(alice)
    r = post(client, agent, "\n".join(line(m) for m in ("a", "b", "c")) + "\n")
    assert r.status_code == 200
    assert r.context["report"].written == 3
    assert b"<strong>3</strong> memories written" in r.content
    assert ids_in(agent) == {"mem-000", "a", "b", "c"}
    assert stores.get_store(agent).get(["b"])[0].embedding.shape == (384,)
    event = AuditEvent.objects.get(agent=agent, verb="memories_imported")
    assert event.user == alice and event.actor == "alice"


def test_it_returns_only_the_result_to_htmx(client: Client, alice, agent_with_memories) -> None:
    agent = agent_with_memories(0)
    client.force_login(alice)
    r = post(client, agent, line("a") + "\n", htmx=True)
    html = r.content.decode()
    assert r.status_code == 286 and html.lstrip().startswith('<div id="import-result"')
    assert "<html" not in html and "<strong>1</strong> memory written" in html
    assert ids_in(agent) == {"a"}
    assert "HX-Request" in r["Vary"]


def test_it_keeps_given_embeddings(client: Client, alice, agent_with_memories) -> None:
    agent = agent_with_memories(0)
    vec = [float(x) for x in np.linspace(-1, 1, 384, dtype=np.float32)]
    client.force_login(alice)
    r = post(client, agent, line("a", embedding=vec) + "\n")
    assert r.context["report"].embedded == 0
    assert np.allclose(stores.get_store(agent).get(["a"])[0].embedding, vec)


def test_it_reports_unchanged_lines_on_a_second_upload(
    client: Client, alice, agent_with_memories
) -> None:
    agent = agent_with_memories(0)
    client.force_login(alice)
    post(client, agent, line("a") + "\n")
    r = post(client, agent, line("a") + "\n")
    assert r.context["report"].written == 0 and r.context["report"].unchanged == 1
    assert b"1 unchanged" in r.content


# ----- malformed files: a line-numbered error, nothing written -----------------------------


MALFORMED = [
    (
        "truncated JSON",
        (line("a") + "\n" + '{"id": "b", "document": "cut').encode(),
        2,
        "invalid JSON",
    ),
    (
        "non-UTF-8",
        line("a").encode() + b"\n" + '{"id": "b", "document": "caf\xe9"}'.encode("latin-1"),
        2,
        "not UTF-8",
    ),
    (
        "duplicate ids",
        (line("a") + "\n" + line("b") + "\n" + line("a")).encode(),
        3,
        "duplicate id 'a' (first on line 1)",
    ),
    (
        "empty document",
        (line("a") + "\n" + json.dumps({"id": "b", "document": ""})).encode(),
        2,
        "'document' is empty",
    ),
    (
        "1 MB document",
        (line("a") + "\n" + json.dumps({"id": "b", "document": "x" * 1_000_000})).encode(),
        2,
        "'document' is 1,000,000 characters long",
    ),
    (
        "wrong type",
        (json.dumps({"id": "a", "document": 42}) + "\n" + line("b")).encode(),
        1,
        "'document' must be a string",
    ),
]


@pytest.mark.parametrize(
    ("case", "content", "lineno", "message"), MALFORMED, ids=[m[0] for m in MALFORMED]
)
@pytest.mark.parametrize("htmx", [False, True], ids=["page", "htmx"])
def test_it_refuses_a_malformed_file_whole(
    client: Client, alice, agent_with_memories, case, content, lineno, message, htmx
) -> None:
    agent = agent_with_memories(2)
    client.force_login(alice)
    r = post(client, agent, content, htmx=htmx)
    assert r.status_code == (286 if htmx else 200)
    html = r.content.decode()
    assert "Nothing was written." in html
    assert f'<td class="num mono">{lineno}</td>' in html, html[:3000]
    assert message.replace("'", "&#x27;") in html
    assert ids_in(agent) == {"mem-000", "mem-001"}
    assert not AuditEvent.objects.filter(agent=agent, verb="memories_imported").exists()


def test_it_refuses_an_empty_file(client: Client, alice, agent_with_memories) -> None:
    agent = agent_with_memories(0)
    client.force_login(alice)
    r = post(client, agent, "\n\n")
    assert (
        r.status_code == 200
        and b"holds no memories" in r.content
        and b"Nothing was written." in r.content
    )
    assert stores.get_store(agent).count() == 0


def test_it_asks_for_a_file(client: Client, alice, agent_with_memories) -> None:
    agent = agent_with_memories(0)
    client.force_login(alice)
    r = client.post(reverse("memories_import", args=[agent.slug]), {"skip_invalid": "on"})
    assert r.status_code == 200 and r.context["form"].errors.get("file")
    assert stores.get_store(agent).count() == 0


def test_it_caps_the_listed_errors_and_counts_the_rest(
    client: Client, alice, agent_with_memories
) -> None:
    agent = agent_with_memories(0)
    client.force_login(alice)
    r = post(client, agent, "\n".join(["{bad"] * 25 + [line("ok")]))
    html = r.content.decode()
    assert html.count('<td class="num mono">') == 20
    assert "… and 5 more invalid lines." in html and "25 invalid lines" in html
    assert stores.get_store(agent).count() == 0


def test_skip_invalid_writes_the_valid_lines_and_lists_the_rest(
    client: Client, alice, agent_with_memories
) -> None:
    agent = agent_with_memories(0)
    client.force_login(alice)
    content = "\n".join(
        [line("a"), "{oops", line("c"), json.dumps({"id": "d", "document": "  "}), line("a")]
    )
    r = post(client, agent, content, skip=True)
    html = r.content.decode()
    assert r.status_code == 200 and "Nothing was written." not in html
    assert (
        "<strong>2</strong> memories written" in html
        and "<strong>3</strong> invalid lines skipped" in html
    )
    for n in (2, 4, 5):
        assert f'<td class="num mono">{n}</td>' in html
    assert ids_in(agent) == {"a", "c"}


def test_it_reports_a_store_outage_without_a_500(bare_agent, client: Client, alice) -> None:
    agent = bare_agent(name="No store")
    client.force_login(alice)
    r = post(client, agent, line("a") + "\n")
    assert r.status_code == 200 and b"store is unavailable" in r.content
    assert b"The import failed." in r.content and b"nothing was written" in r.content


# ----- escaping ----------------------------------------------------------------------------


def test_it_escapes_file_content_echoed_in_errors_and_in_the_browser(
    client: Client, alice, agent_with_memories
) -> None:
    agent = agent_with_memories(0)
    client.force_login(alice)
    bad = (
        json.dumps({"id": XSS, "document": "one"})
        + "\n"
        + json.dumps({"id": XSS, "document": "two"})
    )
    r = post(client, agent, bad)
    assert XSS.encode() not in r.content and ESCAPED in r.content
    post(client, agent, json.dumps({"id": "x1", "document": XSS}) + "\n")
    r = client.get(reverse("memory_list", args=[agent.slug]))
    assert XSS.encode() not in r.content and ESCAPED in r.content


# ----- download ----------------------------------------------------------------------------


@pytest.mark.parametrize("user", ["alice", "bob", "carol"])
def test_it_downloads_every_memory_as_jsonl(
    client: Client, user: str, request, agent_with_memories
) -> None:
    agent = agent_with_memories(3, [{"speaker": "Ann"}, {}, {"pinned": True}])
    client.force_login(request.getfixturevalue(user))
    r = client.get(reverse("memories_export", args=[agent.slug]))
    assert r.status_code == 200
    assert (
        r["Content-Disposition"].startswith("attachment")
        and f"{agent.slug}-memories.jsonl" in r["Content-Disposition"]
    )
    rows = [json.loads(x) for x in b"".join(r.streaming_content).decode().splitlines()]
    assert sorted(x["id"] for x in rows) == ["mem-000", "mem-001", "mem-002"]
    by_id = {x["id"]: x for x in rows}
    assert (
        by_id["mem-000"]["metadata"]["speaker"] == "Ann"
        and len(by_id["mem-000"]["embedding"]) == 384
    )


def test_a_download_uploads_back_identically(client: Client, alice, agent_with_memories) -> None:
    source = agent_with_memories(3, [{"speaker": "Ann"}, {"tags": ["x"]}, {}])
    target = agent_with_memories(0)
    client.force_login(alice)
    body = b"".join(client.get(reverse("memories_export", args=[source.slug])).streaming_content)
    r = post(client, target, body)
    assert r.context["report"].written == 3 and r.context["report"].embedded == 0
    a = {x.id: x for p in stores.get_store(source).iter_pages(include_embeddings=True) for x in p}
    b = {x.id: x for p in stores.get_store(target).iter_pages(include_embeddings=True) for x in p}
    assert a.keys() == b.keys()
    for mid in a:
        assert (a[mid].document, a[mid].metadata) == (b[mid].document, b[mid].metadata)
        assert np.array_equal(a[mid].embedding, b[mid].embedding)


def test_a_download_from_a_missing_store_is_a_message(bare_agent, client: Client, carol) -> None:
    agent = bare_agent(name="No store")
    client.force_login(carol)
    r = client.get(reverse("memories_export", args=[agent.slug]), follow=True)
    assert r.status_code == 200 and b"Export failed, the store is unavailable" in r.content


def test_a_refused_upload_points_to_the_skip_invalid_checkbox(
    client: Client, alice, agent_with_memories
) -> None:
    agent = agent_with_memories(0)
    client.force_login(alice)
    html = post(client, agent, "\n".join([line("a"), "{oops"])).content.decode()
    assert "import the 1 valid line by ticking “Skip invalid lines”" in html
    assert "--skip-invalid" not in html


def test_a_file_with_no_valid_line_does_not_offer_to_import_zero_lines(
    client: Client, alice, agent_with_memories
) -> None:
    agent = agent_with_memories(0)
    client.force_login(alice)
    html = post(client, agent, "\n".join(["{oops", '{"id": "x", "document": "a\\u0000b"}'])).content
    html = html.decode()
    assert "No line is valid: fix the file." in html and "NUL character" in html
    assert "import the 0 valid lines" not in html


BAD_FORMATS = [
    ("importance", 7, "expected a number in [0, 1]"),
    ("created_at", "yesterday", "expected an ISO 8601 time"),
    ("pinned", "maybe", "expected true or false"),
]


def test_metadata_in_the_wrong_format_is_a_line_error_naming_line_and_key(
    client: Client, alice, agent_with_memories
) -> None:
    """docs/API.md's formats hold for an upload: importance in [0, 1], times ISO 8601 or epoch
    seconds, pinned true/false. Each bad line is refused with its number and key; with "skip
    invalid lines" only the good lines are written."""
    agent = agent_with_memories(0)
    client.force_login(alice)
    good = line("good", metadata={"importance": 0.7, "created_at": 1767225600, "pinned": True})
    bad = [line(f"bad-{k}", metadata={k: v}) for k, v, _ in BAD_FORMATS]
    content = "\n".join([good, *bad]) + "\n"
    html = post(client, agent, content).content.decode()
    assert "3 invalid lines" in html and "nothing written" in html
    assert stores.get_store(agent).count() == 0
    html = post(client, agent, content, skip=True).content.decode()
    for n, (key, _value, words) in enumerate(BAD_FORMATS, start=2):
        row = re.search(rf'<td class="num mono">{n}</td>(.*?)</tr>', html, re.S)
        assert row and f"&#x27;{key}&#x27;" in row.group(1) and words in row.group(1), html
    assert ids_in(agent) == {"good"}
