"""The PraisonAI plugin in console mode against a live console (pytest-django's ``live_server``,
real API tokens, django-q2 inline, the in-process Chroma).

The agent's memory is praisonaiagents 1.7.17's chroma-backed ``Memory``; its collection was
written with the library's payload (``tests/agent_stores.write_praisonai``: documents, epoch
``timestamp``, 1536-d vectors) and attached with ``manage.py attach_collection --preset
praisonai``, as an operator would. The console reads the collection from its own Chroma (here
the in-process one, under the same name the ``Memory`` object gives): the plugin finds the
console's agent by that name, or by ``MEMORYADMIN_AGENT``.
"""

from __future__ import annotations

import os
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command

os.environ.setdefault("PRAISONAI_TELEMETRY_DISABLED", "true")  # before praisonaiagents loads

from praisonaiagents.memory import ConsolidationResult as PraisonResult  # noqa: E402
from praisonaiagents.memory.memory import Memory  # noqa: E402

from consolidation.integrations.praisonai import ConsoleError, ConsolidationPlugin  # noqa: E402
from memoryadmin.agents.models import Agent  # noqa: E402
from memoryadmin.api.tokens import token_create, token_revoke  # noqa: E402
from memoryadmin.core import stores  # noqa: E402
from memoryadmin.proposals.models import Pass  # noqa: E402
from tests.agent_stores import PraisonMemory, write_praisonai  # noqa: E402
from tests.conftest import DISTINCT_FACTS  # noqa: E402

# The live server's threads read what the test wrote: committed data.
pytestmark = pytest.mark.django_db(transaction=True)

# 8 memories, two re-written word for word (the default policy's 0.25 guard admits one merge).
TEXTS = [
    "User prefers window seats on long flights",
    "User prefers window seats on long flights",
    "Der Nutzer trinkt morgens schwarzen Kaffee",
    "Der Nutzer trinkt morgens schwarzen Kaffee",
    *DISTINCT_FACTS[:4],
]


@pytest.fixture
def attached(unique_name, tmp_path) -> tuple[Agent, Memory]:
    """The console agent on the collection, and the agent's praisonaiagents ``Memory``."""
    name = unique_name("memory")
    write_praisonai(stores.get_client(), [PraisonMemory(t) for t in TEXTS], collection_name=name)
    call_command(
        "attach_collection", "support", name, "--preset", "praisonai", "--json", stdout=StringIO()
    )
    memory = Memory(
        {"provider": "chroma", "rag_db_path": str(tmp_path / "chroma"), "collection_name": name}
    )
    return Agent.objects.get(slug="support"), memory


def plugin_for(live_server: Any, token: str, **env: str) -> ConsolidationPlugin:
    environ = {"MEMORYADMIN_URL": live_server.url, "MEMORYADMIN_TOKEN": token, **env}
    return ConsolidationPlugin(environ=environ, wait_seconds=60)


def test_a_pass_is_queued_for_review_in_the_console(live_server, alice, attached):
    agent, memory = attached
    _t, token = token_create(user=alice, name="praisonai plugin")
    plugin = plugin_for(live_server, token)

    result = plugin.consolidate(memory)

    run = Pass.objects.get(agent=agent)
    assert isinstance(result, PraisonResult)
    assert result.rejected is True and result.reason == f"queued for review: pass #{run.pk}"
    assert run.status == Pass.Status.PROPOSED and run.requested_by == alice
    assert (result.entries_before, result.entries_after, result.merged) == (8, 7, 2)
    assert (result.merged, result.entries_after) == (run.merged, run.entries_after)
    assert result.context["url"] == f"{live_server.url}/passes/{run.pk}/"
    assert stores.get_store(agent).count() == 8  # nothing applied before a reviewer approves

    again = plugin.consolidate(memory)  # the proposal is still waiting: it is the answer

    assert again.reason == result.reason and again.context["already_waiting"] is True
    assert Pass.objects.filter(agent=agent).count() == 1


def test_a_pass_the_agents_policy_auto_applies_returns_the_applied_result(
    live_server, alice, attached
):
    agent, memory = attached
    agent.auto_apply = "all"
    agent.save()
    _t, token = token_create(user=alice)

    result = plugin_for(live_server, token, MEMORYADMIN_AGENT="support").consolidate(memory)

    run = Pass.objects.get(agent=agent)
    assert run.status == Pass.Status.APPLIED
    assert result.rejected is False and result.reason is None and result.context["applied"]
    assert (result.entries_before, result.entries_after, result.merged) == (8, 7, 2)
    assert result.loss_fraction == pytest.approx(run.loss_fraction)
    documents = stores.get_client().get_collection(agent.collection_name).get()["documents"]
    assert len(documents) == 7 and set(documents) == set(TEXTS)  # one copy merged, none lost


def test_a_collection_no_console_agent_is_attached_to_is_said_so(live_server, alice, tmp_path):
    _t, token = token_create(user=alice)
    memory = Memory(
        {"provider": "chroma", "rag_db_path": str(tmp_path / "c"), "collection_name": "unseen"}
    )

    result = plugin_for(live_server, token).consolidate(memory)

    assert result.rejected is True and "attached to collection 'unseen'" in result.reason
    assert not Pass.objects.exists()


@pytest.mark.parametrize(
    ("who", "message"),
    [("viewer", "403.*only admins"), ("revoked", "401"), ("nobody", "401")],
)
def test_a_token_that_may_not_start_passes_is_a_clear_error(
    live_server, alice, carol, attached, who, message
):
    _agent, memory = attached
    if who == "nobody":
        token = "ma_not-a-token"
    else:
        row, token = token_create(user=carol if who == "viewer" else alice)
        if who == "revoked":
            token_revoke(token=row, by=alice)

    with pytest.raises(ConsoleError, match=message):
        plugin_for(live_server, token, MEMORYADMIN_AGENT="support").consolidate(memory)
    assert not Pass.objects.exists()
