"""Auto-apply ``safe`` on a real LoCoMo agent, in the console: conv-26 imported with
import_locomo, the default policy (both guards, the content guard and the recall holds as
shipped), five scheduled passes. Each pass applies only its safe part and leaves the rest as a
proposal for a person; the next scheduled pass plans that rest again. With windows of 6 turns
and 800 characters (the defaults before) this agent stopped at 47.9 % fewer in
bench/quality_locomo.py ``--mode safe``; the goal for auto-apply safe is ≥ 50 % fewer at
≥ 99 % of the answer recall and ≤ 1.25× context for each agent, and this test holds the
console to it on the conversation that missed it."""

from __future__ import annotations

import pytest

from memoryadmin.agents.models import Agent
from memoryadmin.agents.selectors.probes import recall_evaluate
from memoryadmin.core import stores
from memoryadmin.proposals.models import Pass
from memoryadmin.proposals.services.passes import pass_request

pytestmark = [pytest.mark.slow, pytest.mark.django_db]


def test_five_safe_nights_halve_a_locomo_agent_and_keep_its_answers(
    locomo_agent,
    django_capture_on_commit_callbacks,  # noqa: F811
):
    agent = locomo_agent("conv-26")
    Agent.objects.filter(pk=agent.pk).update(auto_apply=Agent.AutoApply.SAFE)
    agent.refresh_from_db()
    before = recall_evaluate(agent=agent)
    count_before = stores.get_store(agent).count()
    sizes, waited = [count_before], []
    for _ in range(5):
        with django_capture_on_commit_callbacks(execute=True):
            run = pass_request(agent=agent, trigger=Pass.Trigger.SCHEDULE, actor="schedule")
        run.refresh_from_db()
        sizes.append(stores.get_store(agent).count())
        waiting = Pass.objects.filter(agent=agent, status=Pass.Status.PROPOSED).first()
        if waiting is not None:
            # what safe left is a proposal of its own, each operation with its reasons
            ops = list(waiting.operations.exclude(kind="conflict"))
            waited.append(len(ops))
            assert all((op.scores or {}).get("waiting", {}).get("codes") for op in ops)
    after = recall_evaluate(agent=agent)
    print("memories after each night:", " → ".join(map(str, sizes)), "waiting:", waited)
    assert sizes == sorted(sizes, reverse=True)  # no night grew the store
    assert 1 - sizes[-1] / count_before >= 0.50, sizes
    assert after.answer_recall >= 0.99 * before.answer_recall, (before, after)
    assert after.context_chars <= 1.25 * before.context_chars, (before, after)
    assert Pass.objects.filter(agent=agent, status=Pass.Status.APPLIED).count() >= 3
