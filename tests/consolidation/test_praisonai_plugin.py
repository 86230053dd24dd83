"""The PraisonAI plugin inside praisonaiagents 1.7.17: found through the ``praisonai.plugins``
entry point by their ``PluginManager``, configured through its options, triggered by real
agent turns (their ``Agent`` talking to the local OpenAI-compatible stub, ``tests/llm_stub.py``)
and by its timer, in local mode over the agent's own ``FileMemory``.

Each test uses its own ``PluginManager`` and ``HookRegistry`` (handed to the ``Agent`` as
``hooks=``), so nothing leaks into PraisonAI's process-wide plugin state; ``cwd`` is a temporary
directory, where ``Agent(memory=True)`` keeps ``.praisonai/memory/<user_id>/``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from typing import Any

import pytest

os.environ.setdefault("PRAISONAI_TELEMETRY_DISABLED", "true")  # before praisonaiagents loads

from praisonaiagents import Agent  # noqa: E402
from praisonaiagents.hooks import HookRegistry  # noqa: E402
from praisonaiagents.memory import (  # noqa: E402
    AsyncMemoryConsolidationProtocol,
    MemoryConsolidationProtocol,
)
from praisonaiagents.memory.file_memory import FileMemory  # noqa: E402
from praisonaiagents.plugins import PluginManager  # noqa: E402

from consolidation import Consolidator  # noqa: E402
from consolidation.integrations.praisonai import (  # noqa: E402
    ConsolidationPlugin,
    PluginOptions,
)
from tests.llm_stub import StubLLM  # noqa: E402

QUESTIONS = ["Where do I live? In Boston.", "My cat is called Pixel.", "I like jazz."]


@pytest.fixture
def llm(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> Iterator[StubLLM]:
    """The stub as the agents' OpenAI endpoint; cwd a temporary directory."""
    monkeypatch.chdir(tmp_path)
    with StubLLM() as stub:
        stub.respond_with(lambda body: "Noted: " + str(body["messages"][-1]["content"])[:60])
        monkeypatch.setenv("OPENAI_BASE_URL", stub.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        for name in ("MEMORYADMIN_URL", "MEMORYADMIN_TOKEN", "MEMORYADMIN_AGENT"):
            monkeypatch.delenv(name, raising=False)
        yield stub


def discovered(options: dict[str, Any] | None = None) -> tuple[PluginManager, HookRegistry, Any]:
    """A fresh manager that discovered the entry points, with ``options`` delivered, wired
    into a fresh registry."""
    manager = PluginManager(disabled=False)
    manager.discover_entry_points()
    if options is not None:
        manager.set_plugin_options({"memoryadmin": options})
        manager.apply_plugin_options()
    registry = HookRegistry()
    manager.wire_into_hook_registry(registry)
    return manager, registry, manager.get_plugin("memoryadmin")


def support_agent(registry: HookRegistry) -> Agent:
    return Agent(
        name="Support",
        instructions="Help the user.",
        memory=True,
        model="gpt-4o-mini",
        hooks=registry,
    )


def texts(memory: FileMemory) -> list[str]:
    return sorted(i["content"] for i in memory.get_all_memories())


def test_their_plugin_manager_discovers_and_registers_the_entry_point():
    manager, _registry, plugin = discovered()
    assert isinstance(plugin, ConsolidationPlugin) and manager.is_enabled("memoryadmin")
    info = plugin.info
    assert info.name == "memoryadmin" and [h.value for h in info.hooks] == ["after_agent"]
    assert info.dependencies == ["praisonaiagents>=1.7.17,<2"]
    assert isinstance(plugin, MemoryConsolidationProtocol)
    assert isinstance(plugin, AsyncMemoryConsolidationProtocol)
    assert plugin.options == PluginOptions()  # built with no arguments: the defaults


def test_options_arrive_through_their_per_plugin_options():
    _m, _r, plugin = discovered(
        {"every_turns": 5, "cron": "30 2 * * *", "max_loss_fraction": 0.4, "policy": "aggressive"}
    )
    assert (plugin.options.every_turns, plugin.options.cron) == (5, "30 2 * * *")
    assert (plugin.options.max_loss_fraction, plugin.options.policy) == (0.4, "aggressive")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"every_turns": -1}, "every_turns"),
        ({"every_turns": True}, "every_turns"),
        ({"cron": "every night"}, "cron"),
        ({"max_loss_fraction": 1.5}, "loss"),
        ({"policy": "reckless"}, "policy"),
        ({"wait_seconds": 0}, "wait_seconds"),
        ({"evry_turns": 3}, "unknown option"),
    ],
)
def test_a_bad_option_is_refused_by_name_and_the_old_options_stay(options, message):
    plugin = ConsolidationPlugin(every_turns=2)
    with pytest.raises(ValueError, match=message):
        plugin.on_config(options)
    assert plugin.options.every_turns == 2


def test_every_n_turns_a_granted_hook_consolidates_the_agents_memory(llm):
    _m, registry, plugin = discovered(
        {"every_turns": 3, "cron": "", "max_loss_fraction": 0.5, "allow_conversation": True}
    )
    agent = support_agent(registry)
    plugin.watch(agent)
    for question in QUESTIONS[:2]:
        agent.chat(question)
    assert plugin.results == {}  # two turns: not yet
    agent.chat(QUESTIONS[2])
    assert plugin.wait(60)

    result = plugin.results["Support"]
    assert not result.rejected and result.context["applied"] is True, result.reason
    assert result.merged >= 2 and result.loss_fraction <= 0.5
    memory = agent._memory_instance
    assert len(memory.get_all_memories()) < 6  # each turn was stored twice
    again = FileMemory(user_id=memory.user_id).get_all_memories()  # as the next run reads it
    for question in QUESTIONS:  # no turn is lost
        assert any(question in i["content"] for i in again), question


def test_without_the_grant_praisonai_withholds_the_turn_hook(llm):
    _m, registry, plugin = discovered({"every_turns": 1, "cron": ""})
    agent = support_agent(registry)
    plugin.watch(agent)
    agent.chat(QUESTIONS[0])
    assert plugin.wait(10) and plugin.results == {}
    assert len(agent._memory_instance.get_all_memories()) == 2


def test_the_timer_consolidates_every_watched_agent(llm):
    agent = support_agent(HookRegistry())
    memory = agent._memory_instance
    for n in range(4):  # 8 memories: the 0.25 guard admits one merge
        text = f"User: fact number {n}\nAssistant: noted fact {n}"
        memory.store_long_term(text, metadata={"agent_id": "Support"})
        memory.store_short_term(text, metadata={"agent_id": "Support"})
    plugin = ConsolidationPlugin(cron="* * * * * *")  # every second (croniter's seconds field)
    plugin.watch(agent)
    try:
        deadline = time.monotonic() + 20
        while "Support" not in plugin.results and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        plugin.on_shutdown()
    assert plugin.wait(30)
    # One merge fits the budget; a later tick finds nothing more that fits (7 memories: 1).
    assert plugin.results["Support"].context["mode"] == "local"
    items = FileMemory(user_id=memory.user_id).get_all_memories()
    assert len(items) == 7 and len({i["content"] for i in items}) == 4


def test_the_seed_quick_start_runs_verbatim_on_their_agents_memory(llm):
    agent = Agent(name="Support", instructions="Help the user.", memory=True, model="gpt-4o-mini")
    for question in QUESTIONS:
        agent.chat(question)
    before = texts(agent._memory_instance)

    # Later, off the reply path (e.g. a nightly job):
    consolidator = Consolidator()
    result = consolidator.consolidate(agent._memory_instance)
    print(result.merged, result.pruned, result.rejected)

    assert (result.entries_before, result.merged) == (6, 6)  # each turn's two copies found
    assert result.rejected is True and "Loss guard tripped" in result.reason  # 100 % > 25 %
    assert texts(agent._memory_instance) == before


def test_console_mode_refuses_a_memory_the_console_cannot_read(llm, monkeypatch):
    agent = support_agent(HookRegistry())
    agent._memory_instance.store_long_term("User: hi\nAssistant: hello")
    closed = "http://127.0.0.1:9"  # nothing listens: a request would raise ConsoleError
    plugin = ConsolidationPlugin(environ={"MEMORYADMIN_URL": closed, "MEMORYADMIN_TOKEN": "ma_x"})

    result = plugin.consolidate(agent._memory_instance)

    assert result.rejected is True and "Chroma collection the console has attached" in result.reason
    assert result.context == {"mode": "console", "applied": False}
    assert len(agent._memory_instance.get_all_memories()) == 1
