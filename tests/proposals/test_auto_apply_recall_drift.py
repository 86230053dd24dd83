"""Auto-apply ``all`` and recall drift: each pass keeps its own recall guard (after/before ≥
``min_recall_retention``), and the passes it applies since a person last approved one must keep
that much recall between them too — two nights that each lose one answer (3 of 4 kept, each
within a 0.75 guard) would otherwise keep 56 % unattended. Real Chroma
(EphemeralClient), the offline embedder, django-q2 sync."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from memoryadmin.agents.models import Agent, ProbeQuery
from memoryadmin.agents.selectors.probes import agent_probes, probe_set_digest, recall_drift
from memoryadmin.core import stores
from memoryadmin.core.models import AuditEvent
from memoryadmin.proposals.models import Pass
from memoryadmin.proposals.services.passes import pass_request
from memoryadmin.proposals.services.review import pass_approve
from tests.conftest import DISTINCT_FACTS, memory_records

pytestmark = pytest.mark.django_db

STALE = [
    "Gina adopted a grey rescue cat named Pixel.",
    "Nate prefers window seats on long-haul flights.",
]
"""Two years old at importance 0.1: decay prunes them; each answers one probe query."""

POLICY = {"auto_apply_max_risk": 1.0, "max_lost_content_words": None,
          "max_lost_sentence_fraction": 1.0, "min_recall_retention": 0.75,
          "max_loss_fraction": 0.5}  # fmt: skip
PROBES = [
    ("What is Gina's cat called?", "Pixel"),
    ("Which seats does Nate prefer on flights?", "window seats"),
    ("Where did Caroline move to?", "Boston"),
    ("Which board game does Jon like best?", "Settlers of Catan"),
    ("What instrument is Tim learning?", "cello"),
]


def _old() -> dict:
    return {"importance": 0.1, "created_at": (timezone.now() - timedelta(days=730)).isoformat()}


@pytest.fixture
def agent(agent_with_memories) -> Agent:
    recent = [t for t in DISTINCT_FACTS if t not in STALE][:8]
    agent = agent_with_memories(
        [STALE[0], *recent], [_old()] + [{"created_at": timezone.now().isoformat()}] * 8,
        policy=POLICY,
    )  # fmt: skip
    Agent.objects.filter(pk=agent.pk).update(auto_apply="all")
    agent.refresh_from_db()
    for question, answer in PROBES:
        ProbeQuery.objects.create(agent=agent, question=question, answer=answer)
    return agent


def _night(agent: Agent, capture) -> Pass:
    with capture(execute=True):
        run = pass_request(agent=agent, trigger=Pass.Trigger.SCHEDULE, actor="schedule")
    run.refresh_from_db()
    return run


def _write_stale(agent: Agent) -> None:
    """The agent writes the second stale memory (an old fact it imported late)."""
    stores.get_store(agent).upsert(memory_records([STALE[1]], [_old()], prefix="late"))


def test_two_nights_that_each_pass_the_recall_guard_do_not_add_up_unattended(
    agent, client, bob, django_capture_on_commit_callbacks
):
    first = _night(agent, django_capture_on_commit_callbacks)
    assert first.status == Pass.Status.APPLIED, (first.status, first.guard_reason)
    assert first.recall["ratio"] == pytest.approx(0.75)  # the Pixel answer went with its prune
    _write_stale(agent)
    second = _night(agent, django_capture_on_commit_callbacks)
    # 3 of 4 answers kept again: the pass's own guard (0.75) passes; 0.75 × 0.75 does not.
    assert second.recall["passed"] is True and second.recall["ratio"] == pytest.approx(0.75)
    assert second.status == Pass.Status.PROPOSED, (second.status, second.progress_label)
    held = AuditEvent.objects.get(run=second, verb="auto_apply_held")
    assert "1 automatic pass kept 75.0%, this one 75.0%" in held.note
    assert "below the recall retention 75%" in held.note
    assert STALE[1] in [r.document for r in stores.get_store(agent).iter_records()]
    client.force_login(bob)
    page = client.get(reverse("pass_detail", args=[second.pk])).content.decode()
    assert "Not applied automatically: recall kept by the automatic passes on these probe" in page

    shown = client.get(reverse("agent_detail", args=[agent.slug])).content.decode()
    assert "1 automatic pass kept 75.0% of the answer recall" in shown
    assert "waits for a person before it would fall below 75.0%" in shown

    # A person approves it: the count starts again from that pass.
    with django_capture_on_commit_callbacks(execute=True):
        pass_approve(run=second, user=bob)
    digest = probe_set_digest(agent_probes(agent))
    drift = recall_drift(agent, digest)
    assert drift == {"retention": 1.0, "passes": [], "since": second.pk}
    shown = client.get(reverse("agent_detail", args=[agent.slug])).content.decode()
    link = f'<a href="/passes/{second.pk}/">pass #{second.pk}</a>'
    assert f"no automatic pass since {link}, the last a person approved" in shown


def test_a_new_probe_set_starts_the_count_again(agent, django_capture_on_commit_callbacks):
    first = _night(agent, django_capture_on_commit_callbacks)
    assert first.status == Pass.Status.APPLIED
    digest = probe_set_digest(agent_probes(agent))
    assert recall_drift(agent, digest)["passes"] == [first.pk]
    ProbeQuery.objects.create(agent=agent, question="Where is Audrey's sister marrying?",
                              answer="Lisbon")  # fmt: skip
    _write_stale(agent)
    second = _night(agent, django_capture_on_commit_callbacks)
    assert second.status == Pass.Status.APPLIED, (second.status, second.progress_label)


def test_safe_is_not_held_by_drift_it_never_loses_an_answer_unattended(
    agent, django_capture_on_commit_callbacks
):
    Agent.objects.filter(pk=agent.pk).update(auto_apply="safe")
    agent.refresh_from_db()
    run = _night(agent, django_capture_on_commit_callbacks)
    assert "recall_ratio" not in run.telemetry.get("auto_apply", {})
    assert not AuditEvent.objects.filter(agent=agent, data__has_key="recall_drift").exists()
