"""Size limits (docs/ARCHITECTURE.md "Limits": rooms a newcomer can hold in their head): no
module under ``consolidation/`` or ``memoryadmin/`` over 600 lines, no function or method over 120
lines (migrations aside).

A failure names every module and function past its limit with its length, so the fix is a
split, not a hunt.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("consolidation", "memoryadmin")
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 120


def _modules() -> list[Path]:
    return sorted(
        path
        for package in PACKAGES
        for path in (REPO / package).rglob("*.py")
        if "migrations" not in path.relative_to(REPO).parts
    )


def _too_long(path: Path, root: Path = REPO) -> list[str]:
    """One line per module or function of ``path`` past its limit (empty when none is)."""
    source = path.read_text(encoding="utf-8")
    rel = path.relative_to(root).as_posix()
    found = []
    lines = len(source.splitlines())
    if lines > MAX_MODULE_LINES:
        found.append(f"{rel}: module has {lines} lines (limit {MAX_MODULE_LINES})")
    for node in ast.walk(ast.parse(source, filename=str(rel))):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            start = min([node.lineno] + [d.lineno for d in node.decorator_list])
            length = node.end_lineno - start + 1
            if length > MAX_FUNCTION_LINES:
                found.append(
                    f"{rel}:{node.lineno} {node.name}() has {length} lines "
                    f"(limit {MAX_FUNCTION_LINES})"
                )
    return found


def test_the_packages_are_where_the_test_looks() -> None:
    names = {p.relative_to(REPO).as_posix() for p in _modules()}
    assert "consolidation/records.py" in names and "memoryadmin/proposals/models.py" in names
    assert not any("/migrations/" in n for n in names)


def test_no_module_or_function_is_past_its_size_limit() -> None:
    found = [problem for path in _modules() for problem in _too_long(path)]
    assert not found, "past the size limits:\n" + "\n".join(found)


def test_the_check_sees_a_long_function_and_a_long_module(tmp_path: Path) -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    (tmp_path / "long.py").write_text(f"def grown():\n{body}\n")
    assert _too_long(tmp_path / "long.py", tmp_path) == [
        f"long.py:1 grown() has {MAX_FUNCTION_LINES + 1} lines (limit {MAX_FUNCTION_LINES})"
    ]
    (tmp_path / "big.py").write_text("x = 1\n" * (MAX_MODULE_LINES + 1))
    assert _too_long(tmp_path / "big.py", tmp_path) == [
        f"big.py: module has {MAX_MODULE_LINES + 1} lines (limit {MAX_MODULE_LINES})"
    ]
    (tmp_path / "ok.py").write_text(f"def fits():\n{body[: body.rindex(chr(10))]}\n")
    assert _too_long(tmp_path / "ok.py", tmp_path) == []
