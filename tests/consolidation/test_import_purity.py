"""The engine core never loads Django, chromadb, onnxruntime, openai or praisonaiagents
(docs/ARCHITECTURE.md "Layers").

One check for the whole core: every module of ``consolidation`` outside ``adapters/`` (the code
that talks to Chroma, onnxruntime and the LLM) and ``integrations/`` (the code another library
loads, e.g. the PraisonAI plugin) is imported in a fresh interpreter, and a ``Consolidator``
is built and run over memories that carry their own embeddings: then none of the heavy modules
may be in ``sys.modules``, nor any adapter or integration. The same interpreter then runs
``Consolidator()`` over memories stored without embeddings: the offline default embedder is
loaded at that first use (onnxruntime appears only now), still without chromadb, Django, openai
or praisonaiagents — with the store adapters of ``pyproject.toml`` declared (entry-point
group ``consolidation.stores``), which the core looks up by type name only. ruff's TID251
bans the imports statically; this proves no indirect import pulls them in either.
"""

from __future__ import annotations

import pkgutil
import subprocess
import sys
from pathlib import Path

import consolidation

pytest_plugins = ["tests.store_adapters"]

REPO = Path(__file__).resolve().parents[2]
HEAVY = ("django", "chromadb", "onnxruntime", "openai", "praisonaiagents")
BOUNDARIES = ("consolidation.adapters", "consolidation.integrations")


def core_modules() -> list[str]:
    return sorted(
        m.name
        for m in pkgutil.walk_packages(consolidation.__path__, "consolidation.")
        if not m.name.startswith(BOUNDARIES)
    )


def test_the_engine_core_imports_and_runs_without_heavy_dependencies(store_adapters):
    # with PraisonAI's store adapters declared: the core looks them up by the memory's type
    # and loads none for a memory of another type
    modules = core_modules()
    assert {
        "consolidation.planning.engine",
        "consolidation.distill.run",
        "consolidation.recall",
        "consolidation.consolidator",
        "consolidation.default_embedder",
    } <= set(modules)
    code = (
        "import importlib, sys\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        "from datetime import UTC, datetime\n"
        "from importlib.metadata import entry_points\n"
        "assert entry_points(group='consolidation.stores'), 'no store adapters declared'\n"
        "from consolidation import Consolidator\n"
        "class Memory:\n"
        "    def __init__(self, embedded):\n"
        "        self.embedded = embedded\n"
        "    def get_all_memories(self):\n"
        "        extra = {'embedding': [1.0] + [0.0] * 383} if self.embedded else {}\n"
        "        return [{'id': str(i), 'text': 'Alice likes jazz', **extra} for i in range(2)]\n"
        "clock = lambda: datetime(2025, 1, 1, tzinfo=UTC)\n"
        "result = Consolidator(clock=clock).consolidate(Memory(True), max_loss_fraction=1.0)\n"
        "assert result.merged == 2, result\n"
        f"bad = [m for m in {HEAVY + BOUNDARIES!r} if m in sys.modules]\n"
        "assert not bad, ('loaded before any embedding was needed', bad)\n"
        "result = Consolidator(clock=clock).consolidate(Memory(False), max_loss_fraction=1.0)\n"
        "assert result.merged == 2, result\n"
        "assert 'onnxruntime' in sys.modules, 'the default embedder was not loaded'\n"
        f"bad = [m for m in {HEAVY!r} if m in sys.modules and m != 'onnxruntime']\n"
        "assert not bad, ('loaded with the default embedder', bad)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
