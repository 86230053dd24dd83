"""pass_run's recall guard and optional LLM distillation, end to end against a real Chroma
(EphemeralClient) and a real local OpenAI-compatible stub server (tests/llm_stub.py)."""

from __future__ import annotations

import pytest

from consolidation import NAMED_POLICIES
from memoryadmin.agents.models import ProbeQuery
from memoryadmin.agents.selectors.agents import agent_census
from memoryadmin.proposals.models import Pass
from memoryadmin.proposals.services.passes import pass_request, pass_run
from tests.conftest import days_ago

pytest_plugins = ["tests.llm_stub"]
pytestmark = pytest.mark.django_db

STALE_FACTS = [
    "Gina adopted a grey rescue cat named Pixel.",
    "Tim is learning to play the cello with a private teacher.",
    "Maria is allergic to peanuts and carries an epinephrine pen.",
    "The library on Elm Street closes early on Fridays.",
]
OLD = {"created_at": days_ago(400), "importance": 0.05}


def _probe(agent, question, answer, key):
    ProbeQuery.objects.create(agent=agent, question=question, answer=answer, external_key=key)


def _run(agent):
    run = pass_request(agent=agent, trigger="operator")
    return pass_run(run=run)


def test_it_rejects_a_pass_that_prunes_the_probe_sets_evidence(agent_with_memories):
    agent = agent_with_memories(
        STALE_FACTS, [OLD] * 4, policy={"max_loss_fraction": 1.0, "min_recall_retention": 0.98}
    )
    _probe(agent, "What is the name of Gina's cat?", "Pixel", "p1")
    _probe(agent, "Which instrument is Tim learning?", "cello", "p2")
    before = agent_census(agent=agent)
    run = _run(agent)
    assert run.pruned == 4  # the loss guard alone (threshold 1.0) would let this through
    assert run.status == Pass.Status.REJECTED_BY_GUARD
    assert run.guard_reason.startswith("Recall guard tripped")
    assert run.recall["answer_recall_before"] == 1.0 and run.recall["answer_recall_after"] == 0.0
    assert run.recall["lost"] == 2
    assert agent_census(agent=agent) == before  # I-2: rejected means untouched


def test_it_lets_the_same_pass_through_when_the_recall_guard_is_disabled(agent_with_memories):
    agent = agent_with_memories(
        STALE_FACTS, [OLD] * 4, policy={"max_loss_fraction": 1.0, "min_recall_retention": None}
    )
    _probe(agent, "What is the name of Gina's cat?", "Pixel", "p1")
    run = _run(agent)
    assert run.status == Pass.Status.PROPOSED
    assert run.recall["ratio"] == 0.0 and run.recall["passed"] is True


def test_a_cli_policy_override_is_used_for_that_pass_only(agent_with_memories):
    agent = agent_with_memories(4)
    run = pass_request(
        agent=agent, trigger="cli", policy=NAMED_POLICIES["aggressive"], policy_name="aggressive"
    )
    run = pass_run(run=run)
    assert run.max_loss_fraction == NAMED_POLICIES["aggressive"].max_loss_fraction
    assert run.telemetry["policy_override"] == "aggressive"
    agent.refresh_from_db()
    assert agent.get_policy().max_loss_fraction == 0.25  # the agent's own policy is unchanged


EPISODES = [
    "Caroline: I finally signed up for the pottery class downtown!",
    "Melanie: That's great, when does it start?",
    "Caroline: Next Tuesday, and I already bought my own clay.",
]


def _episodic_agent(agent_with_memories):
    metas = [{"layer": "episodic", "session": 1, "created_at": days_ago(2)} for _ in EPISODES]
    # The guard is opened wide: these tests are about distillation, not about other operations.
    return agent_with_memories(EPISODES, metas, policy={"max_loss_fraction": 1.0})


@pytest.fixture
def llm_env(llm_stub, settings):
    settings.OPENAI_BASE_URL = llm_stub.base_url
    settings.OPENAI_API_KEY = "test-key"
    settings.MEMORYADMIN_LLM_MODEL = "stub-model"
    settings.MEMORYADMIN_LLM_TIMEOUT = "1"
    return llm_stub


def test_it_adds_llm_distillations_to_the_proposal_without_removing_anything(
    agent_with_memories, llm_env
):
    agent = _episodic_agent(agent_with_memories)
    llm_env.push_facts(
        [
            {
                "text": "Caroline takes a pottery class.",
                "evidence": ["mem-000", "mem-002"],
                "confidence": 0.9,
            }
        ]
    )
    run = _run(agent)
    assert run.status == Pass.Status.PROPOSED
    distills = list(run.operations.filter(kind="distill"))
    assert [op.result_document for op in distills] == ["Caroline takes a pottery class."]
    assert distills[0].removes == []
    assert distills[0].result_metadata["derived_from"] == ["mem-000", "mem-002"]
    sent = llm_env.requests[0].messages[-1]["content"]
    assert "pottery class downtown" in sent  # memory text travels as quoted data


def test_a_timing_out_llm_costs_only_the_distillation_and_the_proposal_says_why(
    agent_with_memories, llm_env
):
    agent = _episodic_agent(agent_with_memories)
    llm_env.push_slow(5)
    before = agent_census(agent=agent)
    run = _run(agent)
    assert run.status in (Pass.Status.PROPOSED, Pass.Status.APPLIED)  # the pass goes on
    assert not run.operations.filter(kind="distill").exists()
    distilled = run.telemetry["llm"]["distill"]
    assert distilled["group_log"][0]["reason"] == "timeout"
    assert distilled["summary"].startswith("distilled 0 of 1 session")
    assert agent_census(agent=agent) == before


def test_offline_passes_send_nothing_to_an_llm(agent_with_memories, llm_stub, settings):
    settings.MEMORYADMIN_LLM_MODEL = ""
    agent = _episodic_agent(agent_with_memories)
    assert _run(agent).status == Pass.Status.PROPOSED
    assert llm_stub.requests == []


def test_a_pass_with_nothing_to_do_is_settled_not_left_pending(agent_with_memories):
    agent = agent_with_memories(6)  # six unrelated, recent facts: no operation applies
    before = agent_census(agent=agent)
    run = _run(agent)
    assert not run.operations.exists()
    assert run.status == Pass.Status.NO_CHANGES and run.decided_actor == "policy"
    assert not run.can_roll_back  # nothing to undo
    assert run.events.filter(verb="nothing_to_apply").count() == 1
    assert not agent.passes.filter(status=Pass.Status.PROPOSED).exists()  # not "pending"
    assert agent_census(agent=agent) == before


def test_the_proposal_the_api_and_the_cli_show_the_models_work(
    agent_with_memories, llm_env, alice, client
):
    """Requests, tokens, seconds and each step's sentence: the same figures on the page, in the
    API's pass and in ``consolidate --dry-run``; a timed-out group is listed with its reason."""
    import io
    import json

    from django.core.management import call_command
    from django.urls import reverse

    agent = _episodic_agent(agent_with_memories)
    llm_env.push_slow(5)
    run = _run(agent)
    llm = run.telemetry["llm"]
    summary = llm["distill"]["summary"]
    client.force_login(alice)
    page = client.get(reverse("pass_detail", args=[run.pk])).content.decode()
    assert "Model work" in page and "stub-model" in page
    assert summary in page
    assert f"{llm['totals']['requests']} request" in page
    assert "timeout" in page  # the group's line

    from django.test import Client

    from memoryadmin.api.tokens import token_create
    from tests.api.api_helpers import Api

    got = Api(Client(), token_create(user=alice, name="t")[1]).get(f"/passes/{run.pk}").json()
    assert got["llm"]["distill"] == summary
    assert got["llm"]["totals"] == llm["totals"]

    llm_env.push_slow(5)
    out = io.StringIO()
    call_command("consolidate", agent.slug, "--dry-run", "--json", stdout=out)
    dry = json.loads(out.getvalue())
    assert dry["llm"]["model"] == "stub-model"
    assert dry["llm"]["distill"].startswith("distilled 0 of 1 session")
    out = io.StringIO()
    llm_env.push_slow(5)
    call_command("consolidate", agent.slug, "--dry-run", stdout=out)
    assert "distill: distilled 0 of 1 session" in out.getvalue()


def test_a_pass_without_a_model_shows_no_model_work(agent_with_memories, alice, client):
    from django.urls import reverse

    run = _run(agent_with_memories(4))
    client.force_login(alice)
    assert "Model work" not in client.get(reverse("pass_detail", args=[run.pk])).content.decode()
