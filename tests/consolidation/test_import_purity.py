"""The engine core never loads Django, chromadb, onnxruntime or openai (STYLE.md rule 1)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    "module",
    ["consolidation", "consolidation.planning", "consolidation.consolidator", "consolidation.text",
     "consolidation.review"],
)
def test_it_imports_the_core_without_heavy_dependencies(module):
    code = (
        f"import sys, {module}\n"
        "from consolidation import Consolidator\n"
        "Consolidator()\n"
        "bad = [m for m in ('django', 'chromadb', 'onnxruntime', 'openai') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
