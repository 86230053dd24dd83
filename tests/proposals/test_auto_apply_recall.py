"""Auto-apply safe and the recall guard: the operations behind a lost probe answer, as the
console finds them (:func:`memoryadmin.agents.selectors.probes.recall_held`) against a real
Chroma (EphemeralClient) and the offline embedder."""

from __future__ import annotations

import pytest

from consolidation import Operation, OpKind
from memoryadmin.agents.models import ProbeQuery
from memoryadmin.agents.selectors.probes import read_records, recall_held

pytestmark = pytest.mark.django_db

FACTS = [
    "Gina adopted a grey rescue cat named Pixel.",
    "Tim is learning to play the cello with a private teacher.",
    "Maria is allergic to peanuts and carries an epinephrine pen.",
    "The library on Elm Street closes early on Fridays.",
]


def prune(record) -> Operation:
    return Operation(
        OpKind.PRUNE, [record.id], [record.content_hash], [record.id], "stale", "decay"
    )


def test_it_holds_the_operation_that_costs_a_probe_its_answer(agent_with_memories):
    agent = agent_with_memories(FACTS)
    ProbeQuery.objects.create(agent=agent, question="Which instrument is Tim learning?", answer="x")
    ProbeQuery.objects.create(agent=agent, question="What is Gina's cat called?", answer="Pixel")
    records = read_records(agent)
    pixel = next(r for r in records if "Pixel" in r.document)
    library = next(r for r in records if "library" in r.document)
    ops = [prune(library), prune(pixel)]
    held = recall_held(agent, records, ops, agent.get_policy())
    assert list(held) == [1]  # the library went unasked; the cat's name was an answer
    assert held[1].startswith("costs probe query 2 its answer: \"What is Gina's cat called?\"")


def test_nothing_is_held_when_the_recall_guard_is_off_or_there_are_no_probes(
    agent_with_memories,
):
    agent = agent_with_memories(FACTS, policy={"min_recall_retention": None})
    records = read_records(agent)
    ops = [prune(r) for r in records]
    assert recall_held(agent, records, ops, agent.get_policy()) == {}
    agent.policy = {}
    assert recall_held(agent, records, ops, agent.get_policy()) == {}  # no probes yet
    ProbeQuery.objects.create(agent=agent, question="What is Gina's cat called?", answer="Pixel")
    assert list(recall_held(agent, records, ops, agent.get_policy())) == [
        i for i, r in enumerate(records) if "Pixel" in r.document
    ]
