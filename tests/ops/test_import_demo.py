"""Demo seed: three agents of 500–2,000 memories, every operation, proposals, one guard
rejection."""

from __future__ import annotations

import io

import pytest

from memoryadmin.agents.models import Agent
from memoryadmin.core import stores
from memoryadmin.ops.services.demo import seed_demo_agents
from memoryadmin.proposals.models import Pass


@pytest.mark.django_db
def test_it_seeds_three_agents_with_pending_proposals_and_is_idempotent(unique_name):
    prefix = unique_name("demo") + "-"
    out = io.StringIO()
    agents = seed_demo_agents(out, collection_prefix=prefix)
    assert [a.slug for a in agents] == ["demo-support", "demo-coding", "demo-personal"]
    kinds: set[str] = set()
    for agent in agents:
        assert 500 <= stores.get_store(agent).count() <= 2000
        assert agent.probes.count() >= 5
        proposed = agent.passes.get(status=Pass.Status.PROPOSED)
        kinds |= set(proposed.operations.values_list("kind", flat=True))
        pinned = [
            r
            for page in stores.get_store(agent).iter_pages()
            for r in page
            if r.metadata.get("pinned")
        ]
        assert pinned
        removed = {rid for op in proposed.operations.all() for rid in op.removes}
        assert not removed & {r.id for r in pinned}  # I-6
    assert kinds >= {"merge", "promote", "prune", "reconcile"}
    rejected = Pass.objects.get(status=Pass.Status.REJECTED_BY_GUARD)
    assert rejected.agent.slug == "demo-personal" and "loss" in rejected.guard_reason.lower()

    again = seed_demo_agents(collection_prefix=prefix)
    assert [a.pk for a in again] == [a.pk for a in agents]
    # four passes, and the coding assistant (auto-apply safe) applied its safe part on its own
    statuses = sorted(Pass.objects.values_list("status", flat=True))
    assert Agent.objects.count() == 3 and len(statuses) == 5, statuses
    assert statuses.count("proposed") == 3 and "rejected_by_guard" in statuses, statuses
    # what the README's demo section says: support #1 waits; coding #2 applied its safe part,
    # #3 (trigger policy) waits, counted from the store #2 left; personal #4 rejected, #5 waits
    runs = list(Pass.objects.order_by("pk").values_list("agent__slug", "status", "trigger"))
    # #2 is approved by the policy and applies when the transaction commits (not in this test)
    runs = [(a, "applied" if s == "approved" else s, t) for a, s, t in runs]
    assert runs == [
        ("demo-support", "proposed", "operator"),
        ("demo-coding", "applied", "operator"),
        ("demo-coding", "proposed", "policy"),
        ("demo-personal", "rejected_by_guard", "operator"),
        ("demo-personal", "proposed", "operator"),
    ], runs
    applied, waiting = Pass.objects.filter(agent__slug="demo-coding").order_by("pk")
    assert waiting.entries_before == applied.entries_after
    # the seed's output names every pass it made, the waiting part of the split too
    said = out.getvalue()
    for run in Pass.objects.all():
        assert f"pass #{run.pk} " in said, said
    assert f"Coding assistant: pass #{waiting.pk} proposed (" in said, said


def test_every_demo_probe_is_answered_by_a_memory_about_its_subject():
    """The demo's recall starts at 100 %: each probe's expected answer is in a memory that
    names the probe's subject (a probe expecting "Enterprise" for Acme Corp, which the store
    puts on Starter, held the demo's recall at 80 % with no explanation)."""
    import random
    import re

    from memoryadmin.ops.services.demo import DEMO_AGENTS

    for spec in DEMO_AGENTS:
        docs = [d.lower() for _, d, _ in spec.facts(random.Random(spec.slug))]
        for question, answer in spec.probes:
            subject = [w.lower() for w in re.findall(r"\b[A-Z][\w'-]+|\b\w+-\w+", question)[1:]]
            subject = [w.removesuffix("'s").split("-")[0] for w in subject]  # atlas-api: atlas
            words = re.findall(r"\w[\w.%-]*", answer.lower())
            assert any(all(w in d for w in words + subject) for d in docs), (spec.slug, question)
