"""Scheduled passes converge, in the console: a LoCoMo conversation imported with import_locomo,
passes applied one after another with the agent's default policy, every pass under the loss
guard (within the budget), the store converging within 5 passes. conv-26 alone, default policy
with windows of 10 turns and 1000 characters: 622 → 509 → 409 → 324 → 291, 53.2 % fewer
(measured; bench/quality_locomo.py checks the goal per conversation). The bound below leaves
room for the clock (ages are taken from now)."""

from __future__ import annotations

import pytest

from memoryadmin.agents.models import Agent
from memoryadmin.core import stores
from memoryadmin.proposals.models import Pass
from memoryadmin.proposals.selectors.passes import agent_convergence
from memoryadmin.proposals.services.passes import pass_request

pytestmark = [pytest.mark.slow, pytest.mark.django_db]


def test_a_locomo_agent_converges_over_passes_each_under_the_guard(
    locomo_agent,
    django_capture_on_commit_callbacks,  # noqa: F811
):
    agent = locomo_agent("conv-26")
    # auto-apply "all" needs the content guard too; this test is about the loss budget, so the
    # content guard is opened (tests/proposals/test_content_guard.py covers it)
    Agent.objects.filter(pk=agent.pk).update(
        auto_apply="all",
        policy={**agent.policy, "max_lost_content_words": None, "max_lost_sentence_fraction": 1.0},
    )
    agent.refresh_from_db()
    assert agent.get_policy().trim_to_guard is True  # the default policy plans within the budget
    before = stores.get_store(agent).count()
    sizes = [before]
    for _ in range(5):
        with django_capture_on_commit_callbacks(execute=True):
            run = pass_request(agent=agent, trigger=Pass.Trigger.SCHEDULE, actor="schedule")
        run.refresh_from_db()
        assert run.guard_passed, run.guard_reason  # never rejected: each pass fits the budget
        assert run.loss_fraction <= run.max_loss_fraction
        if run.status == "no_changes" or (
            run.status == "proposed" and not run.operations.exclude(kind="conflict").exists()
        ):
            break  # converged: nothing left, or only conflicts, which wait for a person
        assert run.status == "applied", (run.status, run.progress_label)
        sizes.append(stores.get_store(agent).count())
        if not run.operations.exists():
            break
    print("memories after each pass:", " → ".join(map(str, sizes)))
    assert 1 - sizes[-1] / before >= 0.45, sizes
    assert sizes == sorted(sizes, reverse=True)  # every pass shrank the store or converged
    assert agent_convergence(agent) == "converged"
