"""The engine core never loads Django, chromadb, onnxruntime or openai
(docs/ARCHITECTURE.md "Layers").

One check for the whole core: every module of ``consolidation`` outside ``adapters/`` is
imported in a fresh interpreter (and a ``Consolidator`` built and run over a memory that
carries its own embeddings), then none of the four may be in ``sys.modules``. ruff's TID251
bans the imports statically; this proves no indirect import pulls them in either.
"""

from __future__ import annotations

import pkgutil
import subprocess
import sys
from pathlib import Path

import consolidation

REPO = Path(__file__).resolve().parents[2]
HEAVY = ("django", "chromadb", "onnxruntime", "openai")


def core_modules() -> list[str]:
    return sorted(
        m.name
        for m in pkgutil.walk_packages(consolidation.__path__, "consolidation.")
        if not m.name.startswith("consolidation.adapters")
    )


def test_the_engine_core_imports_and_runs_without_heavy_dependencies():
    modules = core_modules()
    assert {
        "consolidation.planning.engine",
        "consolidation.distill.run",
        "consolidation.recall",
        "consolidation.consolidator",
    } <= set(modules)
    code = (
        "import importlib, sys\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        "from datetime import UTC, datetime\n"
        "from consolidation import Consolidator\n"
        "class Memory:\n"
        "    def get_all_memories(self):\n"
        "        return [{'id': str(i), 'text': 'Alice likes jazz', "
        "'embedding': [1.0] + [0.0] * 383}\n"
        "                for i in range(2)]\n"
        "clock = lambda: datetime(2025, 1, 1, tzinfo=UTC)\n"
        "result = Consolidator(clock=clock).consolidate(Memory(), max_loss_fraction=1.0)\n"
        "assert result.merged == 2, result\n"
        f"bad = [m for m in {HEAVY!r} if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
