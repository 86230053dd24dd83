"""``memory_compact``'s layer restriction: a pass planned for one memory layer reads only that
layer's memories, so duplicates in another layer are left alone."""

from __future__ import annotations

import pytest

from memoryadmin.proposals.models import Pass
from memoryadmin.proposals.services.passes import pass_request

pytestmark = pytest.mark.django_db(transaction=True)

TEXTS = [
    "Alice prefers green tea in the morning.",
    "Alice prefers green tea in the morning.",
    "Bob walked the dog at noon.",
    "Bob walked the dog at noon.",
    "Carol is learning to play the cello.",
]
LAYERS = ["semantic", "semantic", "episodic", "episodic", ""]


@pytest.mark.parametrize(
    ("layer", "touched"),
    [("semantic", {"mem-000", "mem-001"}), ("episodic", {"mem-002", "mem-003"})],
)
def test_a_pass_restricted_to_a_layer_plans_only_that_layer(
    agent_with_memories, django_capture_on_commit_callbacks, layer, touched
):
    metas = [{"layer": la} if la else {} for la in LAYERS]
    agent = agent_with_memories(TEXTS, metas)
    with django_capture_on_commit_callbacks(execute=True):
        run = pass_request(
            agent=agent,
            trigger=Pass.Trigger.OPERATOR,
            run_inline=True,
            layer=layer,
            policy=agent.get_policy().with_(trim_to_guard=False, max_loss_fraction=1.0),
            policy_name=f"compact:{layer}",
        )
    run.refresh_from_db()
    assert run.status == Pass.Status.PROPOSED, (run.status, run.error, run.guard_reason)
    assert run.telemetry["layer"] == layer
    seen = {sid for op in run.operations.all() for sid in op.source_ids}
    assert seen == touched  # the other layer's exact duplicates are neither compared nor merged
    # the unlayered memory counts as semantic: it is in the semantic pass's snapshot
    assert run.entries_before == (3 if layer == "semantic" else 2)


def test_without_a_layer_every_memory_is_planned(
    agent_with_memories, django_capture_on_commit_callbacks
):
    metas = [{"layer": la} if la else {} for la in LAYERS]
    agent = agent_with_memories(TEXTS, metas)
    with django_capture_on_commit_callbacks(execute=True):
        run = pass_request(
            agent=agent,
            trigger=Pass.Trigger.OPERATOR,
            run_inline=True,
            policy=agent.get_policy().with_(trim_to_guard=False, max_loss_fraction=1.0),
        )
    run.refresh_from_db()
    assert run.entries_before == 5 and "layer" not in run.telemetry
    seen = {sid for op in run.operations.all() for sid in op.source_ids}
    assert {"mem-000", "mem-001", "mem-002", "mem-003"} <= seen
