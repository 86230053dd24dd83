"""Auto-apply safe when the whole plan fails the recall guard: the operation behind the lost
answer waits for a person and the rest applies (it passes the recall guard by itself), instead
of the whole pass being rejected and planned again, identically, every night. With auto-apply
off or ``all`` the pass is still rejected whole; when even the part that would apply fails the
guard, nothing applies. Real Chroma (EphemeralClient), the offline embedder, django-q2 sync."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from memoryadmin.agents.models import Agent, ProbeQuery
from memoryadmin.agents.selectors.probes import read_records
from memoryadmin.core.models import AuditEvent
from memoryadmin.proposals.models import Pass
from memoryadmin.proposals.services import auto_apply
from memoryadmin.proposals.services.passes import pass_request
from tests.conftest import DISTINCT_FACTS

pytestmark = pytest.mark.django_db

OLD = [
    "Gina adopted a grey rescue cat named Pixel.",
    "The office coffee machine was replaced with an espresso maker.",
    "Nate prefers window seats on long-haul flights.",
]
"""Three memories two years old at importance 0.1: decay prunes all three (docs/POLICY.md,
``prune_max_importance``); only the first answers a probe query."""

# Prunes are not "safe" by default (an uncovered prune is risk 0.4 and loses content); these
# tests are about the recall guard, so the agent lets risk and lost content through.
POLICY = {"auto_apply_max_risk": 1.0, "max_lost_content_words": None,
          "max_lost_sentence_fraction": 1.0}  # fmt: skip


def _agent(agent_with_memories, mode: str) -> Agent:
    recent = [t for t in DISTINCT_FACTS if t not in OLD][:9]
    old = (timezone.now() - timedelta(days=730)).isoformat()
    metas = [{"importance": 0.1, "created_at": old} for _ in OLD] + [
        {"created_at": timezone.now().isoformat()} for _ in recent
    ]
    agent = agent_with_memories(OLD + recent, metas, policy=POLICY)
    Agent.objects.filter(pk=agent.pk).update(auto_apply=mode)
    agent.refresh_from_db()
    ProbeQuery.objects.create(agent=agent, question="What is Gina's cat called?", answer="Pixel")
    return agent


def _run(agent: Agent, django_capture_on_commit_callbacks) -> Pass:
    with django_capture_on_commit_callbacks(execute=True):
        run = pass_request(agent=agent, trigger=Pass.Trigger.SCHEDULE, actor="schedule")
    run.refresh_from_db()
    return run


def _texts(agent: Agent) -> list[str]:
    return sorted(r.document for r in read_records(agent, include_embeddings=False))


def test_safe_holds_the_operation_behind_the_lost_answer_and_applies_the_rest(
    agent_with_memories, django_capture_on_commit_callbacks
):
    agent = _agent(agent_with_memories, "safe")
    run = _run(agent, django_capture_on_commit_callbacks)
    assert run.status == Pass.Status.APPLIED, (run.status, run.guard_reason)
    approved = AuditEvent.objects.get(run=run, verb="approved")
    assert "The whole plan failed the recall guard" in approved.note
    assert run.recall["passed"] is True  # the applied part, measured by itself
    texts = _texts(agent)
    assert OLD[0] in texts  # the answer is still in the store
    assert OLD[1] not in texts and OLD[2] not in texts  # the two unasked prunes applied
    waiting = Pass.objects.get(agent=agent, status=Pass.Status.PROPOSED)
    (op,) = list(waiting.operations.all())
    assert op.kind == "prune" and "recall" in op.scores["waiting"]["codes"]
    assert "What is Gina's cat called?" in " ".join(op.scores["waiting"]["reasons"])
    assert run.telemetry["auto_apply"]["recall_split"] is True


@pytest.mark.parametrize("mode", ["off", "all"])
def test_off_and_all_still_reject_the_whole_pass(
    agent_with_memories, django_capture_on_commit_callbacks, mode
):
    agent = _agent(agent_with_memories, mode)
    before = _texts(agent)
    run = _run(agent, django_capture_on_commit_callbacks)
    assert run.status == Pass.Status.REJECTED_BY_GUARD
    assert run.guard_reason.startswith("Recall guard tripped")
    assert _texts(agent) == before


def test_nothing_applies_when_the_part_that_would_apply_fails_the_guard_too(
    agent_with_memories, django_capture_on_commit_callbacks, monkeypatch
):
    # the holds miss the lost answer (operations interact beyond what the rounds find): the
    # recall guard on the part that would apply is the backstop
    monkeypatch.setattr(auto_apply, "recall_held", lambda *a, **k: {})
    agent = _agent(agent_with_memories, "safe")
    before = _texts(agent)
    run = _run(agent, django_capture_on_commit_callbacks)
    assert run.status == Pass.Status.REJECTED_BY_GUARD
    assert run.guard_reason.startswith("Recall guard tripped on the part auto-apply would apply")
    assert _texts(agent) == before
    assert not Pass.objects.filter(agent=agent, status=Pass.Status.PROPOSED).exists()
