"""The code cites documents in the repository: ``docs/ARCHITECTURE.md`` and ``docs/SOURCES.md``,
never the team's shared folder (``../shared/docs``), which is not part of the repository."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CODE = ("consolidation", "memoryadmin", "tests", "bench")
OUTSIDE = re.compile(r"shared/docs|(?<![\w/])(?:ARCHITECTURE|STYLE|TEAM)\.md")
CITED = re.compile(r"docs/[A-Z]+\.md")


def _sources() -> list[Path]:
    files = [p for d in CODE for p in (REPO / d).rglob("*.py")]
    return sorted(files + [REPO / "pyproject.toml"])


def test_the_code_cites_no_document_outside_the_repository() -> None:
    found = [
        f"{path.relative_to(REPO)}:{n}: {line.strip()}"
        for path in _sources()
        if path != Path(__file__).resolve()
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if OUTSIDE.search(line)
    ]
    assert not found, "cite docs/ARCHITECTURE.md or docs/SOURCES.md instead:\n" + "\n".join(found)


def test_every_document_the_code_cites_exists() -> None:
    cited = {m for path in _sources() for m in CITED.findall(path.read_text(encoding="utf-8"))}
    assert "docs/ARCHITECTURE.md" in cited
    assert {c for c in cited if not (REPO / c).is_file()} == set()
