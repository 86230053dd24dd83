"""End to end in the console: a mem0 collection attached without an embedder for its 1536-d
vectors, where one user's agent re-wrote a fact 15 times and once paraphrased it. The group of
copies and paraphrase has a new text the store cannot write; its 15 copies still merge into one
(one copy's text and mem0's own vector), the paraphrase stays, and undoing the pass restores
every copy byte for byte.
"""

from __future__ import annotations

import io
from collections import Counter

import numpy as np
import pytest
from django.core.management import call_command

from consolidation.policy import NAMED_POLICIES
from memoryadmin.agents.models import Agent
from memoryadmin.core import stores
from memoryadmin.proposals.models import Pass
from memoryadmin.proposals.services.passes import pass_request
from memoryadmin.proposals.services.review import pass_approve
from memoryadmin.proposals.services.rollback import pass_rollback_request
from tests.agent_stores import FOREIGN_DIM, Mem0Memory, foreign_vector, raw_records, write_mem0
from tests.conftest import DISTINCT_FACTS

pytestmark = pytest.mark.django_db

FACT = "Prefers dark mode in the editor"
PARAPHRASE = "Likes the editor in dark mode"  # joins the copies at the aggressive 0.82 link


def raw(name: str) -> dict[str, tuple[str | None, dict, bytes]]:
    return raw_records(stores.get_client(), name)


def test_fifteen_rewrites_beside_a_paraphrase_merge_and_undo(
    unique_name, alice, bob, django_capture_on_commit_callbacks
):
    name = unique_name("mem0")
    memories = (
        [Mem0Memory(FACT, user_id="alice") for _ in range(15)]
        + [Mem0Memory(PARAPHRASE, user_id="alice")]
        + [Mem0Memory(t, user_id="bob") for t in DISTINCT_FACTS]
    )
    write_mem0(stores.get_client(), name, memories)
    before = raw(name)
    call_command("attach_collection", f"agent-{name}", name, stdout=io.StringIO())
    agent = Agent.objects.get(slug=f"agent-{name}")
    agent.policy = NAMED_POLICIES["aggressive"].to_dict()
    agent.save()

    with django_capture_on_commit_callbacks(execute=True):
        run = pass_request(agent=agent, trigger="operator", user=alice)
    run.refresh_from_db()
    assert run.status == Pass.Status.PROPOSED, (run.status, run.error, run.reason)
    [left] = run.telemetry["left_out"]
    assert len(left["source_ids"]) == 16 and left["copies_merged"] == 15
    [merge] = [op for op in run.operations.all() if op.kind == "merge"]
    assert len(merge.source_ids) == 15 and merge.result_document == FACT

    with django_capture_on_commit_callbacks(execute=True):
        pass_approve(run=run, user=bob)
    run.refresh_from_db()
    assert run.status == Pass.Status.APPLIED, (run.status, run.error)
    after = raw(name)
    alice_rows = [(m["data"], e) for _, m, e in after.values() if m["user_id"] == "alice"]
    assert Counter(t for t, _ in alice_rows) == Counter({FACT: 1, PARAPHRASE: 1})
    for text, vec in alice_rows:  # mem0's own vector of the text: its search still finds it
        assert len(vec) == FOREIGN_DIM * 4
        assert np.allclose(np.frombuffer(vec, np.float32), foreign_vector(text), atol=1e-6)
    assert len(after) == len(before) - 14

    with django_capture_on_commit_callbacks(execute=True):
        pass_rollback_request(run=run, user=bob, note="undo")
    run.refresh_from_db()
    assert run.status == Pass.Status.ROLLED_BACK, (run.status, run.error)
    assert raw(name) == before
