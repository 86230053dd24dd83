"""Memory browser: paged list, filters, semantic search, detail with history, pin/edit/delete."""

from __future__ import annotations

from urllib.parse import urlencode

import pytest
from django.test import Client
from django.urls import reverse

from memoryadmin.core import stores
from memoryadmin.core.models import AuditEvent
from memoryadmin.memories.models import ArchivedMemory
from tests.conftest import XSS
from tests.conftest import XSS_ESCAPED as ESCAPED
from tests.proposals.make import make_proposal

pytestmark = pytest.mark.django_db


def _detail(agent, memory_id: str) -> str:
    return f"{reverse('memory_detail', args=[agent.slug])}?{urlencode({'id': memory_id})}"


@pytest.fixture
def agent(agent_with_memories):
    texts = [
        "Gina adopted a grey rescue cat named Pixel.",
        XSS,
        "The database backups run nightly at two.",
    ]
    metas = [{"tier": "curated", "pinned": True}, {"tier": "working"}, {}]
    return agent_with_memories(texts, metas)


# ----- list and filters ---------------------------------------------------------------------


def test_it_lists_memories_escaped(client: Client, carol, agent) -> None:
    client.force_login(carol)
    r = client.get(reverse("memory_list", args=[agent.slug]))
    assert r.status_code == 200
    assert r.context["page"].paginator.count == 3
    assert b"Pixel" in r.content and XSS.encode() not in r.content and ESCAPED in r.content


def test_it_pages_by_fifty(client: Client, carol, agent_with_memories) -> None:
    big = agent_with_memories([f"Note number {i} about topic {i % 7}." for i in range(60)])
    client.force_login(carol)
    r = client.get(reverse("memory_list", args=[big.slug]))
    assert len(r.context["page"].object_list) == 50 and r.context["page"].paginator.num_pages == 2
    r = client.get(reverse("memory_list", args=[big.slug]), {"page": 2})
    assert len(r.context["page"].object_list) == 10


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({"tier": "curated"}, ["mem-000"]),
        ({"pinned": "yes"}, ["mem-000"]),
        ({"pinned": "no"}, ["mem-001", "mem-002"]),
        ({"contains": "BACKUPS"}, ["mem-002"]),
        ({"tier": "working", "contains": "script"}, ["mem-001"]),
    ],
)
def test_it_filters(client: Client, carol, agent, params: dict, expected: list[str]) -> None:
    client.force_login(carol)
    r = client.get(reverse("memory_list", args=[agent.slug]), params)
    assert [m.id for m in r.context["page"]] == expected


@pytest.mark.parametrize("htmx", [False, True])
def test_it_says_no_memories_match_a_filter_with_no_matches(
    client: Client, carol, agent, htmx
) -> None:
    client.force_login(carol)
    headers = {"HTTP_HX_REQUEST": "true"} if htmx else {}
    r = client.get(
        reverse("memory_list", args=[agent.slug]), {"contains": "no such words"}, **headers
    )
    assert r.status_code == 200
    assert "No memories match these filters." in r.content.decode()


def test_it_returns_the_results_fragment_for_htmx(client: Client, carol, agent) -> None:
    client.force_login(carol)
    r = client.get(
        reverse("memory_list", args=[agent.slug]), {"contains": "cat"}, HTTP_HX_REQUEST="true"
    )
    html = r.content.decode()
    assert r.status_code == 200 and html.lstrip().startswith('<section id="memory-results"')
    assert "<html" not in html and "Pixel" in html and "backups" not in html


def test_it_searches_semantically(client: Client, carol, agent) -> None:
    client.force_login(carol)
    r = client.get(
        reverse("memory_list", args=[agent.slug]), {"q": "which pet did Gina get?", "k": 2}
    )
    assert r.status_code == 200
    results = r.context["results"]
    assert len(results) == 2 and results[0].id == "mem-000"
    assert -1.0 <= results[1].score <= results[0].score <= 1.0
    assert XSS.encode() not in r.content


def test_it_shows_a_store_outage_instead_of_failing(bare_agent, client: Client, carol) -> None:

    orphan = bare_agent(name="Orphan")
    client.force_login(carol)
    r = client.get(reverse("memory_list", args=[orphan.slug]))
    assert r.status_code == 200 and b"Store unavailable" in r.content


# ----- detail --------------------------------------------------------------------------------


def test_it_shows_detail_with_metadata_and_passes(client: Client, carol, agent) -> None:
    run = make_proposal(agent, merges=1)
    src = run.operations.get().sources.first()
    src.memory_id = "mem-000"
    src.save()
    client.force_login(carol)
    r = client.get(_detail(agent, "mem-000"))
    assert r.status_code == 200
    html = r.content.decode()
    assert "Pixel" in html and "curated" in html
    fields = html[html.index('data-testid="memory-metadata"') :]
    assert (
        '<dt>pinned</dt><dd class="memtext">yes</dd>' in fields and "&quot;pinned&quot;" not in html
    )
    assert reverse("pass_detail", args=[run.pk]) in html
    assert "Edit text" not in html  # viewers cannot edit


def test_it_escapes_the_detail_page(client: Client, alice, agent) -> None:
    client.force_login(alice)
    r = client.get(_detail(agent, "mem-001"))
    assert XSS.encode() not in r.content and ESCAPED in r.content


def test_it_shows_a_missing_memory_with_its_archive(client: Client, alice, agent) -> None:
    client.force_login(alice)
    client.post(reverse("memory_delete", args=[agent.slug]), {"memory_id": "mem-001"})
    r = client.get(_detail(agent, "mem-001"))
    assert r.status_code == 200
    assert b"not in the store" in r.content and b"operator delete" in r.content
    assert XSS.encode() not in r.content and ESCAPED in r.content


def test_it_404s_without_an_id(client: Client, carol, agent) -> None:
    client.force_login(carol)
    assert client.get(reverse("memory_detail", args=[agent.slug])).status_code == 404


# ----- writes ---------------------------------------------------------------------------------


def test_it_pins_and_unpins(client: Client, alice, agent) -> None:
    client.force_login(alice)
    r = client.post(
        reverse("memory_pin", args=[agent.slug]), {"memory_id": "mem-002", "pinned": "1"}
    )
    assert r.status_code == 302 and r["Location"] == _detail(agent, "mem-002")
    assert (
        stores.get_store(agent).get(["mem-002"], include_embeddings=False)[0].metadata["pinned"]
        is True
    )
    client.post(reverse("memory_pin", args=[agent.slug]), {"memory_id": "mem-002", "pinned": "0"})
    assert (
        stores.get_store(agent).get(["mem-002"], include_embeddings=False)[0].metadata["pinned"]
        is False
    )
    assert (
        ArchivedMemory.objects.filter(
            agent=agent, memory_id="mem-002", action="operator_pin"
        ).count()
        == 2
    )


def test_it_edits_a_memory(client: Client, alice, agent) -> None:
    client.force_login(alice)
    r = client.post(
        reverse("memory_edit", args=[agent.slug]),
        {"memory_id": "mem-002", "document": "Backups run at three."},
    )
    assert r.status_code == 302
    assert (
        stores.get_store(agent).get(["mem-002"], include_embeddings=False)[0].document
        == "Backups run at three."
    )
    assert AuditEvent.objects.filter(agent=agent, verb="memory_edited").exists()


def test_it_rerenders_an_empty_edit_at_200(client: Client, alice, agent) -> None:
    client.force_login(alice)
    r = client.post(
        reverse("memory_edit", args=[agent.slug]), {"memory_id": "mem-002", "document": "   "}
    )
    assert r.status_code == 200 and b"This field is required" in r.content
    assert (
        stores.get_store(agent)
        .get(["mem-002"], include_embeddings=False)[0]
        .document.startswith("The database")
    )


def test_it_reports_an_unknown_memory(client: Client, alice, agent) -> None:
    client.force_login(alice)
    r = client.post(
        reverse("memory_pin", args=[agent.slug]), {"memory_id": "nope", "pinned": "1"}, follow=True
    )
    assert r.status_code == 200 and b"is not in" in r.content


def test_it_deletes_a_memory(client: Client, alice, agent) -> None:
    client.force_login(alice)
    r = client.post(reverse("memory_delete", args=[agent.slug]), {"memory_id": "mem-002"})
    assert r.status_code == 302 and r["Location"] == reverse("memory_list", args=[agent.slug])
    assert stores.get_store(agent).get(["mem-002"], include_embeddings=False) == []
    assert ArchivedMemory.objects.filter(
        agent=agent, memory_id="mem-002", action="operator_delete"
    ).exists()


@pytest.mark.parametrize(
    ("name", "data"),
    [
        ("memory_pin", {"memory_id": "mem-002", "pinned": "1"}),
        ("memory_edit", {"memory_id": "mem-002", "document": "changed"}),
        ("memory_delete", {"memory_id": "mem-002"}),
    ],
)
@pytest.mark.parametrize("user", ["bob", "carol"])
def test_it_forbids_memory_writes_without_the_permission(
    client: Client, agent, request, name, data, user
) -> None:
    client.force_login(request.getfixturevalue(user))
    assert client.post(reverse(name, args=[agent.slug]), data).status_code == 403
    rec = stores.get_store(agent).get(["mem-002"], include_embeddings=False)[0]
    assert rec.document.startswith("The database") and "pinned" not in rec.metadata


@pytest.mark.parametrize("name", ["memory_pin", "memory_delete"])
def test_it_enforces_csrf(alice, agent, name: str) -> None:
    c = Client(enforce_csrf_checks=True)
    c.force_login(alice)
    assert (
        c.post(
            reverse(name, args=[agent.slug]), {"memory_id": "mem-002", "pinned": "1"}
        ).status_code
        == 403
    )
    assert stores.get_store(agent).get(["mem-002"], include_embeddings=False) != []


def test_the_memory_table_has_no_empty_column(client, alice, agent_with_memories):
    """The paged list has Memory, Tier, Pinned; the cosine column only shows for a search."""
    from django.urls import reverse

    agent = agent_with_memories(3)
    client.force_login(alice)
    body = client.get(reverse("memory_list", args=[agent.slug])).content.decode()
    head = body[body.index("<thead>") : body.index("</thead>")]
    assert head.count("</th>") == 3 and "<th class=\"num\"></th>" not in head
    row = body[body.index("<tbody>") : body.index("</tr>", body.index("<tbody>"))]
    assert row.count("</td>") == 3
