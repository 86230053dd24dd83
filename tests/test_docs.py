"""The code cites documents in the repository: ``docs/ARCHITECTURE.md`` and ``docs/SOURCES.md``,
never the team's shared folder (``../shared/docs``), which is not part of the repository."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CODE = ("consolidation", "memoryadmin", "tests", "bench")
OUTSIDE = re.compile(r"shared/docs|(?<![\w/])(?:ARCHITECTURE|STYLE|TEAM)\.md")
CITED = re.compile(r"docs/[A-Z_]+\.md")


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


TRACKER = re.compile(r"\bissues?\s+#?\d+", re.IGNORECASE)
"""A citation of the team's tracker by number (the word, then the number: in parentheses, with an
item, as a possessive), which a reader of the repository cannot open; another project's
``owner/repo#N`` is not one."""
CITING = ("consolidation", "memoryadmin", "tests", "bench", "docs", "templates", "static")


def _texts() -> list[Path]:
    files = [REPO / "README.md", REPO / "pyproject.toml", REPO / "Makefile"]
    for d in CITING:
        files += [
            p
            for p in (REPO / d).rglob("*")
            if p.suffix in (".py", ".md", ".html", ".js", ".css", ".txt", ".toml")
            and "migrations" not in p.parts  # history, kept as written
            and "vendor" not in p.parts
        ]
    return sorted(files)


def test_no_text_cites_the_tracker_by_number() -> None:
    found = [
        f"{path.relative_to(REPO)}:{n}: {line.strip()}"
        for path in _texts()
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if TRACKER.search(line)
    ]
    assert not found, "write the reason itself, not the issue number:\n" + "\n".join(found)


def test_the_citation_check_sees_each_form() -> None:
    word = "issue"  # spelled apart, so this file does not cite the tracker itself
    for text in (
        f"({word} 12)",
        f"({word} 9, item 7)",
        f"{word.title()} 10's figure",
        f"{word}s 4",
    ):
        assert TRACKER.search(text), text
    assert not TRACKER.search("mem0ai/mem0#4536, chroma-core/chroma#4965")


def test_the_readme_is_short_and_every_link_in_the_docs_resolves() -> None:
    """The README is what a newcomer reads first: at most 150 lines, the rest in docs/ pages, each
    of which a relative link in the README or in docs/ must reach (a moved page breaks a test)."""
    readme = REPO / "README.md"
    assert len(readme.read_text(encoding="utf-8").splitlines()) <= 150
    broken = []
    for page in [readme, *sorted((REPO / "docs").glob("*.md"))]:
        for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", page.read_text(encoding="utf-8")):
            if not (page.parent / target).exists():
                broken.append(f"{page.relative_to(REPO)} -> {target}")
    assert not broken, broken
