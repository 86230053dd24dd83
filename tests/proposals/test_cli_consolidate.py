"""consolidate / evaluate_recall commands: JSON shape, exit codes, and the recall guard."""

from __future__ import annotations

import json
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from consolidation import NAMED_POLICIES
from consolidation.planning import plan as make_plan
from memoryadmin.agents.models import ProbeQuery
from memoryadmin.agents.selectors.probes import read_records, recall_check
from memoryadmin.core import stores
from memoryadmin.management.commands.consolidate import KEYS
from memoryadmin.proposals.models import Pass
from memoryadmin.proposals.services.passes import pass_plan
from tests.conftest import DISTINCT_FACTS


def consolidate(*args: str) -> dict:
    out = StringIO()
    call_command("consolidate", *args, "--json", stdout=out)
    text = out.getvalue().strip()
    assert "\n" not in text  # exactly one JSON object
    return json.loads(text)


def fresh(days: float = 1, importance: float = 0.5) -> dict:
    return {
        "created_at": (timezone.now() - timedelta(days=days)).isoformat(),
        "importance": importance,
    }


@pytest.fixture
def duplicates_agent(agent_with_memories):
    texts = DISTINCT_FACTS[:18] + [DISTINCT_FACTS[0], DISTINCT_FACTS[1]]  # two exact duplicates
    agent = agent_with_memories(texts, [fresh() for _ in texts])
    ProbeQuery.objects.create(
        agent=agent, question="Where did Caroline move from?", answer="Sweden"
    )
    ProbeQuery.objects.create(
        agent=agent, question="What is Jon's favourite board game?", answer="Settlers of Catan"
    )
    return agent


@pytest.fixture
def fading_agent(agent_with_memories):
    """Twenty facts; the three about pets, allergies and the shelter are old and unimportant, so
    the default policy prunes them (15 % loss, under the 25 % loss guard) — and the probes'
    answers live only there."""
    faded = {5, 12, 18}
    metas = [fresh(400, 0.1) if i in faded else fresh(1, 0.9) for i in range(20)]
    agent = agent_with_memories(20, metas)
    ProbeQuery.objects.create(
        agent=agent, question="What is the name of Gina's cat?", answer="Pixel"
    )
    ProbeQuery.objects.create(agent=agent, question="What is Maria allergic to?", answer="peanuts")
    return agent


@pytest.mark.django_db
def test_dry_run_prints_the_figures_and_records_nothing(duplicates_agent):
    out = consolidate(duplicates_agent.slug, "--dry-run")
    assert list(out) == list(KEYS)
    assert out["pass_id"] is None and out["status"] == "dry_run"
    assert out["entries_before"] == 20 and out["entries_after"] == 18 and out["merged"] == 4
    assert out["guard_passed"] is True and out["max_loss_fraction"] == 0.25
    assert out["recall_before"] == 1.0 and out["recall_after"] == 1.0
    assert out["context_chars_before"] > 0 and out["seconds"] >= 0
    assert not Pass.objects.exists()
    assert stores.get_store(duplicates_agent).count() == 20


@pytest.mark.django_db
def test_propose_stores_a_pass_and_apply_applies_it(duplicates_agent):
    out = consolidate(duplicates_agent.slug, "--propose")
    assert out["status"] == "proposed" and Pass.objects.get(pk=out["pass_id"]).status == "proposed"
    assert out["recall_passed"] is True and stores.get_store(duplicates_agent).count() == 20

    out = consolidate(duplicates_agent.slug, "--apply")
    assert out["status"] == "applied"
    assert stores.get_store(duplicates_agent).count() == 18
    assert Pass.objects.get(pk=out["pass_id"]).decided_actor == "cli"


@pytest.mark.django_db
def test_the_recall_guard_trips_on_a_plan_that_prunes_the_probe_evidence(fading_agent):
    records = read_records(fading_agent)
    policy = NAMED_POLICIES["default"]
    plan = make_plan(records, policy, now=timezone.now())
    pruned = {rid for op in plan.operations for rid in op.removes}
    assert pruned == {"mem-005", "mem-012", "mem-018"}
    assert not plan.result.exceeds_loss(policy.max_loss_fraction)  # the loss guard alone passes

    check = recall_check(fading_agent, records, plan, policy)
    assert check["answer_recall_before"] == 1.0 and check["answer_recall_after"] == 0.0
    assert check["passed"] is False
    assert "1.000 to 0.000" in check["reason"] and "98.0%" in check["reason"]
    assert check["lost"] == 2 and {p["answer"] for p in check["lost_probes"]} == {
        "Pixel",
        "peanuts",
    }

    out = consolidate(fading_agent.slug, "--dry-run")
    assert out["guard_passed"] is True and out["recall_passed"] is False
    assert out["recall_before"] == 1.0 and out["recall_after"] == 0.0


@pytest.mark.django_db
def test_apply_does_not_apply_a_pass_the_recall_guard_refuses(fading_agent):
    out = consolidate(fading_agent.slug, "--apply")
    assert out["recall_passed"] is False
    assert out["status"] in ("proposed", "rejected_by_guard")
    assert stores.get_store(fading_agent).count() == 20


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["no-such-agent"], "Unknown agent 'no-such-agent'"),
        (["{agent}", "--policy", "reckless"], "Unknown policy 'reckless'"),
    ],
)
def test_bad_input_exits_2_with_one_line(duplicates_agent, args, message):
    args = [a.format(agent=duplicates_agent.slug) for a in args]
    with pytest.raises(CommandError) as exc:
        call_command("consolidate", *args, "--json")
    assert exc.value.returncode == 2
    assert message in str(exc.value) and "\n" not in str(exc.value)
    assert not Pass.objects.exists()


@pytest.mark.django_db
def test_an_agent_with_an_invalid_stored_policy_is_bad_input(duplicates_agent):
    duplicates_agent.policy = {"max_loss_fraction": 7}
    duplicates_agent.save()
    with pytest.raises(CommandError) as exc:
        call_command("consolidate", duplicates_agent.slug, "--dry-run")
    assert exc.value.returncode == 2 and "max_loss_fraction" in str(exc.value)


@pytest.mark.django_db
def test_evaluate_recall_prints_the_live_figures(fading_agent):
    out = StringIO()
    call_command("evaluate_recall", fading_agent.slug, "--json", "--k", "3", stdout=out)
    d = json.loads(out.getvalue())
    assert d["agent"] == fading_agent.slug and d["k"] == 3 and d["probes"] == 2
    assert d["answer_recall"] == 1.0 and d["entries"] == 20 and d["context_chars"] > 0
    out = StringIO()
    call_command("evaluate_recall", fading_agent.slug, stdout=out)
    assert "answer recall@10 1.000" in out.getvalue()
    with pytest.raises(CommandError) as exc:
        call_command("evaluate_recall", "nobody")
    assert exc.value.returncode == 2


@pytest.mark.django_db
@pytest.mark.parametrize("checkpointed", [False, True])
def test_dry_run_plans_the_operations_propose_stores(agent_with_memories, checkpointed):
    """--dry-run previews the pass: same snapshot, same checkpoint, same operations. With a
    checkpoint the two old duplicates are not searched again (nothing to merge); without one
    they merge — in both modes alike."""

    texts = DISTINCT_FACTS[:12] + [DISTINCT_FACTS[0]]  # mem-000 and mem-012: duplicates
    agent = agent_with_memories(texts, [fresh() for _ in texts])
    if checkpointed:  # as if the last applied pass saw every memory but one new one
        records = read_records(agent)
        agent.checkpoint = {r.id: r.content_hash for r in records if r.id != "mem-003"}
        agent.save(update_fields=["checkpoint"])
    planned = pass_plan(agent=agent, policy=agent.get_policy(), now=timezone.now())
    dry = consolidate(agent.slug, "--dry-run")
    assert not Pass.objects.filter(agent=agent).exists()
    proposed = consolidate(agent.slug, "--propose")
    run = Pass.objects.get(pk=proposed["pass_id"])

    figures = (
        "entries_before",
        "entries_after",
        "merged",
        "promoted",
        "pruned",
        "reconciled",
        "loss_fraction",
        "guard_passed",
        "recall_before",
        "recall_after",
    )
    assert {k: dry[k] for k in figures} == {k: proposed[k] for k in figures}
    stored = [(op.kind, op.source_ids, op.removes) for op in run.operations.order_by("index")]
    assert stored == [
        (op.kind.value, list(op.source_ids), list(op.removes)) for op in planned.plan.operations
    ]
    assert dry["merged"] == (0 if checkpointed else 2)
