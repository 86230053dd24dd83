"""Probe queries: paged list, add / edit / delete (admin, audited), the live recall check, and the
recall figures of a pass on the proposal page."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from memoryadmin.agents.models import Agent, ProbeQuery
from memoryadmin.agents.services.probes import probe_delete, probe_update
from memoryadmin.core.errors import ServiceError
from memoryadmin.core.models import AuditEvent
from tests.conftest import XSS
from tests.conftest import XSS_ESCAPED as ESCAPED
from tests.proposals.make import make_proposal

pytestmark = pytest.mark.django_db


EVIDENCE = [{"evidence": ["D1:1", "D1:3", "a"]}, {"evidence": ["D2:2", "D2:5", "D3:3"]}]
"""The evidence ids the probe tests cite, listed by the agent's memories (a probe's evidence
ids must be ones its memories list)."""


@pytest.fixture
def agent(agent_with_memories) -> Agent:
    """An agent whose two memories list the evidence ids the tests use."""
    return agent_with_memories(2, EVIDENCE, name="Probe bot")


def probe(agent: Agent, n: int = 0, **kw) -> ProbeQuery:
    kw.setdefault("question", f"Question {n}?")
    kw.setdefault("answer", f"answer {n}")
    return ProbeQuery.objects.create(agent=agent, **kw)


def form(**over) -> dict:
    return {
        "question": "Where did Caroline move from?",
        "answer": "Sweden",
        "evidence_ids": "D1:3, D2:5  D1:3",
        "category": "1",
        **over,
    }


# ----- list --------------------------------------------------------------------------------


def test_it_lists_probes_for_a_viewer_escaped_and_without_writes(
    client: Client, carol, agent
) -> None:
    probe(agent, question=XSS, answer=XSS, evidence_ids=["D1:1", "D2:2"], category=2)
    client.force_login(carol)
    r = client.get(reverse("probe_list", args=[agent.slug]))
    assert r.status_code == 200
    assert XSS.encode() not in r.content and r.content.count(ESCAPED) == 2
    assert b"D1:1, D2:2" in r.content
    assert b"Add a probe" not in r.content and b"Delete" not in r.content
    assert reverse("probe_recall", args=[agent.slug]).encode() in r.content


def test_it_shows_the_add_form_and_row_actions_to_an_admin(client: Client, alice, agent) -> None:
    p = probe(agent)
    client.force_login(alice)
    html = client.get(reverse("probe_list", args=[agent.slug])).content.decode()
    assert "Add a probe" in html and 'name="evidence_ids"' in html
    assert reverse("probe_edit", args=[agent.slug, p.pk]) in html
    assert f'hx-post="{reverse("probe_delete", args=[agent.slug, p.pk])}"' in html


def test_it_pages_the_list_and_serves_a_page_to_htmx(client: Client, carol, agent) -> None:
    for n in range(30):
        probe(agent, n)
    client.force_login(carol)
    full = client.get(reverse("probe_list", args=[agent.slug]))
    assert b"Question 24?" in full.content and b"Question 25?" not in full.content
    assert b"page 1 of 2" in full.content and b'href="?page=2"' in full.content
    r = client.get(reverse("probe_list", args=[agent.slug]), {"page": 2}, HTTP_HX_REQUEST="true")
    html = r.content.decode()
    assert html.lstrip().startswith('<section id="probe-list"') and "<html" not in html
    assert "Question 29?" in html and "Question 24?" not in html
    assert "HX-Request" in r["Vary"]


def test_the_agent_page_links_to_probes(client: Client, carol, agent) -> None:
    probe(agent)
    client.force_login(carol)
    html = client.get(reverse("agent_detail", args=[agent.slug])).content.decode()
    assert reverse("probe_list", args=[agent.slug]) in html and "1 probe query" in html


# ----- access ------------------------------------------------------------------------------


def _urls(agent: Agent, p: ProbeQuery) -> dict[str, str]:
    return {
        "list": reverse("probe_list", args=[agent.slug]),
        "create": reverse("probe_create", args=[agent.slug]),
        "edit": reverse("probe_edit", args=[agent.slug, p.pk]),
        "delete": reverse("probe_delete", args=[agent.slug, p.pk]),
        "recall": reverse("probe_recall", args=[agent.slug]),
    }


@pytest.mark.parametrize("name", ["list", "edit", "recall"])
def test_it_redirects_anonymous_reads_to_login(client: Client, agent, name: str) -> None:
    r = client.get(_urls(agent, probe(agent))[name])
    assert r.status_code == 302 and r["Location"].startswith(reverse("login"))


@pytest.mark.parametrize("name", ["create", "edit", "delete"])
def test_it_redirects_anonymous_writes_to_login(client: Client, agent, name: str) -> None:
    p = probe(agent)
    r = client.post(_urls(agent, p)[name], form())
    assert r.status_code == 302 and r["Location"].startswith(reverse("login"))
    assert list(agent.probes.values_list("question", flat=True)) == ["Question 0?"]


@pytest.mark.parametrize("user", ["bob", "carol"])
@pytest.mark.parametrize("name", ["create", "edit", "delete"])
def test_it_forbids_writes_without_manage(
    client: Client, request, agent, user: str, name: str
) -> None:
    p = probe(agent)
    client.force_login(request.getfixturevalue(user))
    assert client.post(_urls(agent, p)[name], form()).status_code == 403
    assert list(agent.probes.values_list("question", flat=True)) == ["Question 0?"]
    assert not AuditEvent.objects.filter(verb__startswith="probe_").exists()


def test_it_forbids_the_edit_form_to_a_viewer(client: Client, carol, agent) -> None:
    client.force_login(carol)
    assert client.get(_urls(agent, probe(agent))["edit"]).status_code == 403


@pytest.mark.parametrize("name", ["create", "edit", "delete"])
def test_it_enforces_csrf(alice, agent, name: str) -> None:
    p = probe(agent)
    c = Client(enforce_csrf_checks=True)
    c.force_login(alice)
    assert c.post(_urls(agent, p)[name], form()).status_code == 403
    assert list(agent.probes.values_list("question", flat=True)) == ["Question 0?"]


def test_it_404s_for_a_probe_of_another_agent(bare_agent, client: Client, alice, agent) -> None:
    other = bare_agent(name="Other")
    p = probe(other)
    client.force_login(alice)
    assert client.get(reverse("probe_edit", args=[agent.slug, p.pk])).status_code == 404
    assert client.post(reverse("probe_delete", args=[agent.slug, p.pk])).status_code == 404
    assert ProbeQuery.objects.filter(pk=p.pk).exists()


# ----- create ------------------------------------------------------------------------------


def test_it_adds_a_probe_and_audits_it(client: Client, alice, agent, unique_name) -> None:
    other = Agent.objects.create(
        name="Other", slug=unique_name("o"), collection_name=unique_name("c")
    )
    probe(other, 0)  # probe numbers are per agent: this one is #1 of the other agent
    client.force_login(alice)
    r = client.post(reverse("probe_create", args=[agent.slug]), form())
    assert r.status_code == 302 and r["Location"] == reverse("probe_list", args=[agent.slug])
    p = agent.probes.get()
    assert (p.question, p.answer, p.evidence_ids, p.category) == (
        "Where did Caroline move from?",
        "Sweden",
        ["D1:3", "D2:5"],
        1,
    )
    event = AuditEvent.objects.get(agent=agent, verb="probe_created")
    assert event.user == alice and event.actor == "alice"
    assert event.data["probe_id"] == p.pk and event.data["evidence_ids"] == ["D1:3", "D2:5"]
    page = client.get(r["Location"])
    assert "Probe #1 added." in page.content.decode() and p.pk != 1


def test_it_adds_with_htmx_and_refreshes_the_list_out_of_band(client: Client, alice, agent) -> None:
    for n in range(26):
        probe(agent, n)
    client.force_login(alice)
    r = client.post(
        reverse("probe_create", args=[agent.slug]), form(question=XSS), HTTP_HX_REQUEST="true"
    )
    html = r.content.decode()
    assert r.status_code == 200 and html.lstrip().startswith('<section id="probe-form"')
    assert '<section id="probe-list" hx-swap-oob="true">' in html
    assert "page 2 of 2" in html  # the page that holds the new probe
    assert XSS not in html and ESCAPED.decode() in html
    assert 'name="question"' in html and 'value="Sweden"' not in html  # a fresh form


@pytest.mark.parametrize(
    ("over", "field"),
    [
        ({"question": ""}, "question"),
        ({"question": "   "}, "question"),
        ({"answer": ""}, "answer"),
        ({"question": "q" * 2001}, "question"),
        ({"category": "x"}, "category"),
        ({"category": "-1"}, "category"),
        ({"evidence_ids": "x" * 513}, "evidence_ids"),
        ({"evidence_ids": " ".join(f"D{i}" for i in range(101))}, "evidence_ids"),
    ],
)
@pytest.mark.parametrize("htmx", [False, True], ids=["page", "htmx"])
def test_it_rerenders_create_errors_at_200(
    client: Client, alice, agent, over: dict, field: str, htmx: bool
) -> None:
    client.force_login(alice)
    extra = {"HTTP_HX_REQUEST": "true"} if htmx else {}
    r = client.post(reverse("probe_create", args=[agent.slug]), form(**over), **extra)
    assert r.status_code == 200
    assert r.context["form"].errors.get(field), r.context["form"].errors
    assert b'class="errorlist"' in r.content
    assert (b"<html" in r.content) is not htmx
    assert (
        not agent.probes.exists() and not AuditEvent.objects.filter(verb="probe_created").exists()
    )


# ----- edit and delete ---------------------------------------------------------------------


def test_it_edits_a_probe_and_audits_before_and_after(client: Client, alice, agent) -> None:
    p = probe(agent, evidence_ids=["D1:1"], category=2)
    client.force_login(alice)
    r = client.get(reverse("probe_edit", args=[agent.slug, p.pk]))
    assert r.status_code == 200 and b"Question 0?" in r.content and b'value="D1:1"' in r.content
    r = client.post(
        reverse("probe_edit", args=[agent.slug, p.pk]),
        {
            "question": "Question 0?",
            "answer": "a new answer",
            "evidence_ids": "D1:1 D3:3",
            "category": "",
        },
    )
    assert r.status_code == 302
    p.refresh_from_db()
    assert (p.answer, p.evidence_ids, p.category) == ("a new answer", ["D1:1", "D3:3"], None)
    event = AuditEvent.objects.get(agent=agent, verb="probe_updated")
    assert event.user == alice
    assert sorted(event.data["changed"]) == ["answer", "category", "evidence_ids"]
    assert (
        event.data["before"]["answer"] == "answer 0"
        and event.data["after"]["answer"] == "a new answer"
    )


def test_it_rerenders_edit_errors_at_200(client: Client, alice, agent) -> None:
    p = probe(agent)
    client.force_login(alice)
    r = client.post(reverse("probe_edit", args=[agent.slug, p.pk]), form(answer=""))
    assert r.status_code == 200 and r.context["form"].errors.get("answer")
    p.refresh_from_db()
    assert p.answer == "answer 0" and not AuditEvent.objects.filter(verb="probe_updated").exists()


def test_an_unchanged_edit_writes_no_event(alice, agent) -> None:
    p = probe(agent, evidence_ids=["a"])
    probe_update(
        agent=agent, probe=p, question=p.question, answer=p.answer, evidence_ids="a", user=alice
    )
    assert not AuditEvent.objects.filter(verb="probe_updated").exists()


def test_the_services_refuse_a_probe_of_another_agent(bare_agent, alice, agent) -> None:
    other = bare_agent(name="Other")
    p = probe(other)
    with pytest.raises(ServiceError):
        probe_delete(agent=agent, probe=p, user=alice)
    with pytest.raises(ServiceError):
        probe_update(agent=agent, probe=p, question="q", answer="a", user=alice)
    assert ProbeQuery.objects.filter(pk=p.pk, question="Question 0?").exists()


def test_it_deletes_a_probe_and_audits_its_content(client: Client, alice, agent) -> None:
    p = probe(agent, evidence_ids=["D1:1"])
    client.force_login(alice)
    r = client.post(reverse("probe_delete", args=[agent.slug, p.pk]))
    assert r.status_code == 302 and not agent.probes.exists()
    event = AuditEvent.objects.get(agent=agent, verb="probe_deleted")
    assert (
        event.user == alice
        and event.data["question"] == "Question 0?"
        and event.data["evidence_ids"] == ["D1:1"]
    )


def test_it_deletes_with_htmx_and_returns_the_list(client: Client, alice, agent) -> None:
    keep, gone = probe(agent, 1), probe(agent, 2)
    client.force_login(alice)
    r = client.post(
        reverse("probe_delete", args=[agent.slug, gone.pk]), {"page": "1"}, HTTP_HX_REQUEST="true"
    )
    html = r.content.decode()
    assert r.status_code == 200 and html.lstrip().startswith('<section id="probe-list"')
    assert keep.question in html and gone.question not in html


# ----- check recall ------------------------------------------------------------------------


@pytest.fixture
def recall_agent(agent_with_memories):
    """Five facts (two citing LoCoMo-style evidence ids); two probes answered by them, one not."""
    a = agent_with_memories(5, [{"evidence": ["D1:1"]}, {"evidence": ["D1:2", "D1:3"]}, {}, {}, {}])
    probe(a, question="Where did Caroline move from?", answer="Sweden", evidence_ids=["D1:1"])
    probe(
        a,
        question="What did Melanie run last Saturday?",
        answer="a charity race",
        evidence_ids=["D1:2"],
    )
    probe(a, question="What colour is the submarine?", answer="yellow ochre")
    return a


def test_it_checks_recall_of_the_live_store(client: Client, carol, recall_agent) -> None:
    client.force_login(carol)
    r = client.get(reverse("probe_recall", args=[recall_agent.slug]))
    assert r.status_code == 200 and b"<html" in r.content
    report = r.context["recall"]
    assert report.k == 10 and report.probes == 3 and report.entries == 5
    assert report.answer_recall == pytest.approx(2 / 3)
    assert report.evidence_recall == 1.0 and report.evidence_probes == 2
    html = r.content.decode()
    assert (
        "Answer recall@10" in html and '<strong data-testid="answer-recall">66.7%</strong>' in html
    )
    assert 'data-testid="evidence-recall">100.0%' in html
    assert f'data-testid="context-chars">{report.context_chars:.0f}<' in html


def test_it_returns_the_recall_fragment_to_htmx(client: Client, alice, recall_agent) -> None:
    client.force_login(alice)
    r = client.get(reverse("probe_recall", args=[recall_agent.slug]), HTTP_HX_REQUEST="true")
    html = r.content.decode()
    assert html.lstrip().startswith('<section id="recall-result"') and "<html" not in html
    assert "66.7%" in html and "HX-Request" in r["Vary"]


def test_it_says_when_there_are_no_probes(client: Client, carol, agent_with_memories) -> None:
    a = agent_with_memories(2)
    client.force_login(carol)
    r = client.get(reverse("probe_recall", args=[a.slug]), HTTP_HX_REQUEST="true")
    assert r.status_code == 200 and b"No probe queries to score" in r.content


@pytest.mark.parametrize("htmx", [False, True], ids=["page", "htmx"])
def test_a_store_outage_is_a_message_not_a_500(
    client: Client, carol, bare_agent, htmx: bool
) -> None:
    agent = bare_agent(name="Probe bot")  # its collection was never created
    probe(agent)
    client.force_login(carol)
    extra = {"HTTP_HX_REQUEST": "true"} if htmx else {}
    r = client.get(reverse("probe_recall", args=[agent.slug]), **extra)
    assert r.status_code == 200
    assert b"The store is unavailable, recall was not measured" in r.content


# ----- recall figures on the proposal page -------------------------------------------------


RECALL = {
    "k": 10,
    "probes": 40,
    "answer_recall_before": 0.9,
    "answer_recall_after": 0.8,
    "ratio": 0.8 / 0.9,
    "context_chars_before": 812.4,
    "context_chars_after": 655.0,
    "evidence_recall_before": 0.75,
    "evidence_recall_after": 0.5,
    "evidence_probes": 30,
    "min_recall_retention": 0.98,
    "passed": False,
    "reason": "answer recall@10 would fall from 90.0% to 80.0% (88.9% retained < 98.0%)",
    "lost": 3,
    "lost_probes": [
        {"id": 7, "question": XSS, "answer": "Sweden"},
        {"id": 8, "question": "When?", "answer": "May"},
    ],
    "seconds": 0.4,
}


def test_the_proposal_shows_recall_before_after_ratio_verdict_and_lost_probes(
    client: Client, carol, agent
) -> None:
    run = make_proposal(agent)
    run.recall = RECALL
    run.save()
    client.force_login(carol)
    html = client.get(reverse("pass_detail", args=[run.pk])).content.decode()
    assert '<td class="num" data-testid="recall-before">90.0%</td>' in html
    assert '<td class="num" data-testid="recall-after">80.0%</td>' in html
    assert ">812<" in html and ">655<" in html  # context size before → after (characters)
    assert ">75.0%<" in html and ">50.0%<" in html  # evidence recall
    assert 'data-testid="recall-ratio">88.9%<' in html and 'data-testid="recall-min">98.0%<' in html
    assert "recall guard fails" in html and "88.9% retained &lt; 98.0%" in html
    assert 'data-testid="recall-lost">3<' in html and "The first 2 of 3 are listed." in html
    assert XSS not in html and ESCAPED.decode() in html and "When?" in html
    assert reverse("probe_edit", args=[agent.slug, 7]) not in html  # a viewer gets no edit links


def test_the_proposal_links_lost_probes_for_an_admin_and_shows_a_pass(
    client: Client, alice, agent
) -> None:
    run = make_proposal(agent)
    run.recall = {
        **RECALL,
        "passed": True,
        "ratio": 1.0,
        "answer_recall_after": 0.9,
        "lost": 1,
        "lost_probes": RECALL["lost_probes"][:1],
        "reason": "answer recall@10 kept: 100.0% retained",
    }
    run.save()
    client.force_login(alice)
    html = client.get(reverse("pass_detail", args=[run.pk])).content.decode()
    assert "recall guard passes" in html and "100.0% retained" in html
    assert reverse("probe_edit", args=[agent.slug, 7]) in html
    assert "The first" not in html


def test_the_proposal_says_when_recall_was_not_measured(client: Client, carol, agent) -> None:
    run = make_proposal(agent)
    run.recall = {
        **RECALL,
        "probes": 0,
        "passed": True,
        "lost": 0,
        "lost_probes": [],
        "reason": "no probe queries: recall not measured",
    }
    run.save()
    client.force_login(carol)
    html = client.get(reverse("pass_detail", args=[run.pk])).content.decode()
    assert (
        "no probe queries: recall not measured" in html
        and 'data-testid="recall-before"' not in html
    )


def test_the_proposal_shows_a_disabled_recall_guard(client: Client, carol, agent) -> None:
    run = make_proposal(agent)
    run.recall = {
        **RECALL,
        "min_recall_retention": None,
        "passed": True,
        "reason": "recall guard off",
    }
    run.save()
    client.force_login(carol)
    html = client.get(reverse("pass_detail", args=[run.pk])).content.decode()
    assert "recall guard off" in html and 'data-testid="recall-min"' not in html


def test_an_evidence_id_no_memory_lists_is_a_field_error_and_nothing_is_saved(
    client: Client, alice, agent
) -> None:
    client.force_login(alice)
    r = client.post(
        reverse("probe_create", args=[agent.slug]), form(evidence_ids="D1:3 no-such-id")
    )
    assert r.status_code == 200
    errors = r.context["form"].errors
    assert "evidence_ids" in errors and "no-such-id" in errors["evidence_ids"][0]
    assert (
        "D1:3" not in errors["evidence_ids"][0].split("lists the evidence id")[1].split(" in ")[0]
    )
    assert not ProbeQuery.objects.filter(agent=agent).exists()
    p = probe(agent, evidence_ids=["D1:1"])
    r = client.post(
        reverse("probe_edit", args=[agent.slug, p.pk]),
        {"question": p.question, "answer": p.answer, "evidence_ids": "D1:1 typo:9"},
    )
    assert "typo:9" in r.context["form"].errors["evidence_ids"][0]
    p.refresh_from_db()
    assert p.evidence_ids == ["D1:1"]
