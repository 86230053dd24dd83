"""The console is one grid, layer × domain (docs/ARCHITECTURE.md "The console grid"), and its
imports run one way.

Read from the code with ``ast`` (nothing is imported): every import statement of
``memoryadmin/`` counts, at the top of a module, inside a function or under ``TYPE_CHECKING``
(a lazy import hides a cycle, it does not remove it). Migrations aside.

- no import cycle between modules;
- no function-level import of our own modules (the need for one is removed instead);
- no import from a higher layer: views → forms / services / selectors → the ground (models,
  stores, validation, errors, roles) → the engine; services never import forms or views,
  selectors never import services, forms never import services, tasks call services;
- the grid table in docs/ARCHITECTURE.md lists exactly the modules of the layer packages (and
  the template folders), each named after its row's domain, and the line under it lists exactly
  the modules at the console's root.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
ARCHITECTURE = REPO / "docs/ARCHITECTURE.md"

# (module prefix, layer); the longest matching prefix wins.
LAYERS = [
    ("memoryadmin.console.models", "ground"),
    ("memoryadmin.console.errors", "ground"),
    ("memoryadmin.console.validation", "ground"),
    ("memoryadmin.console.stores", "ground"),
    ("memoryadmin.console.roles", "ground"),
    ("memoryadmin.console.apps", "ground"),
    ("memoryadmin.console.selectors", "selectors"),
    ("memoryadmin.console.services", "services"),
    ("memoryadmin.console.forms", "forms"),
    ("memoryadmin.console.views", "views"),
    ("memoryadmin.console.templatetags", "views"),
    ("memoryadmin.console.tasks", "tasks"),
    ("memoryadmin.api.models", "ground"),
    ("memoryadmin.api.schemas", "ground"),
    ("memoryadmin.api.apps", "ground"),
    ("memoryadmin.api.present", "selectors"),
    ("memoryadmin.api.actions", "services"),
    ("memoryadmin.api.tokens", "services"),
    ("memoryadmin.api.routes", "views"),
    ("memoryadmin.api.paging", "views"),
    ("memoryadmin.api.views", "views"),
]
"""Everything else (urls, admin, management commands, the API's mount and its MCP server,
settings) is an entry point: it may import any layer."""

ALLOWED = {
    "ground": {"ground"},
    "selectors": {"ground", "selectors"},
    "services": {"ground", "selectors", "services"},
    "forms": {"ground", "selectors", "forms"},
    "views": {"ground", "selectors", "services", "forms", "views"},
    "tasks": {"ground", "services"},
}
"""Which layers a module of each layer may import."""


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    line: int
    lazy: bool


def _modules(root: Path = REPO) -> dict[str, Path]:
    mods = {}
    for path in sorted((root / "memoryadmin").rglob("*.py")):
        if "migrations" in path.parts:
            continue
        name = ".".join(path.relative_to(root).with_suffix("").parts)
        mods[name.removesuffix(".__init__")] = path
    return mods


def _resolve(mods: dict[str, Path], module: str, node: ast.Import | ast.ImportFrom) -> set[str]:
    """The modules of ``mods`` that ``node`` (in ``module``) imports."""
    package = module if mods[module].name == "__init__.py" else module.rsplit(".", 1)[0]
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    else:
        if node.level:
            parts = package.split(".")
            base = ".".join(parts[: len(parts) - node.level + 1])
            target = f"{base}.{node.module}" if node.module else base
        else:
            target = node.module or ""
        names = [target] + [f"{target}.{a.name}" for a in node.names]
    found = set()
    for name in names:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        if name and name != module:
            found.add(name)
    return found


def _edges(root: Path = REPO) -> tuple[dict[str, Path], list[Edge]]:
    mods = _modules(root)
    edges = []
    for module, path in mods.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        lazy_nodes = {
            id(n)
            for f in ast.walk(tree)
            if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)
            for n in ast.walk(f)
        }
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom):
                for target in _resolve(mods, module, node):
                    edges.append(Edge(module, target, node.lineno, id(node) in lazy_nodes))
    return mods, edges


def _cycles(nodes: list[str], edges: list[Edge]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    graph: dict[str, set[str]] = {n: set() for n in nodes}
    for e in edges:
        graph[e.source].add(e.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for start in nodes:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            v, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        found.append(sorted(comp))
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(graph[child]))))
            elif child in on_stack:
                low[v] = min(low[v], index[child])
    return found


def layer_of(module: str) -> str:
    """The layer of ``module`` (``"entry"`` when none claims it)."""
    best = max(
        (p for p, _ in LAYERS if module == p or module.startswith(p + ".")), key=len, default=""
    )
    return dict(LAYERS).get(best, "entry")


def _upward(edges: list[Edge]) -> list[str]:
    wrong = []
    for e in edges:
        if e.source.startswith(e.target + "."):
            continue  # its own package (a face that defines nothing): how siblings are reached
        source, target = layer_of(e.source), layer_of(e.target)
        if source in ALLOWED and target not in ALLOWED[source]:
            wrong.append(f"{e.source}:{e.line} ({source}) imports {e.target} ({target})")
    return wrong


def test_no_import_cycle_between_modules() -> None:
    mods, edges = _edges()
    assert len(mods) > 100, "the walk found the modules"
    assert _cycles(sorted(mods), edges) == []


def test_no_function_imports_one_of_our_modules() -> None:
    _, edges = _edges()
    lazy = [f"{e.source}:{e.line} imports {e.target}" for e in edges if e.lazy]
    assert lazy == [], "import at the top of the module instead:\n" + "\n".join(lazy)


def test_imports_run_down_the_layers() -> None:
    _, edges = _edges()
    assert _upward(edges) == []


def test_the_checks_see_a_cycle_a_lazy_import_and_an_upward_import(tmp_path: Path) -> None:
    pkg = tmp_path / "memoryadmin" / "console"
    (pkg / "selectors").mkdir(parents=True)
    (pkg / "services").mkdir()
    for init in (pkg.parent, pkg, pkg / "selectors", pkg / "services"):
        (init / "__init__.py").write_text("")
    (pkg / "selectors" / "a.py").write_text("def f():\n    from ..services import b\n")
    (pkg / "services" / "b.py").write_text("from ..selectors import a\n")
    mods, edges = _edges(tmp_path)
    assert _cycles(sorted(mods), edges) == [
        ["memoryadmin.console.selectors.a", "memoryadmin.console.services.b"]
    ]
    assert {(e.source, e.target) for e in edges if e.lazy} == {
        ("memoryadmin.console.selectors.a", "memoryadmin.console.services"),
        ("memoryadmin.console.selectors.a", "memoryadmin.console.services.b"),
    }
    assert sorted(_upward(edges)) == [
        f"memoryadmin.console.selectors.a:2 (selectors) imports {target} (services)"
        for target in ("memoryadmin.console.services", "memoryadmin.console.services.b")
    ]


# ----- the grid table ---------------------------------------------------------------------

COLUMNS = {
    "services": "memoryadmin/console/services",
    "selectors": "memoryadmin/console/selectors",
    "forms": "memoryadmin/console/forms",
    "views": "memoryadmin/console/views",
    "templates": "templates/console",
    "API routes": "memoryadmin/api/routes",
    "API actions": "memoryadmin/api/actions",
    "API present": "memoryadmin/api/present",
}
"""The grid's columns and the folder each lists (modules, or template folders)."""

SHARED = "common"
"""The row of what a layer's domains share; its modules need not bear a domain's name."""


def parse_grid(text: str) -> tuple[dict[tuple[str, str], set[str]], dict[str, set[str]]]:
    """``({(domain, column): names}, {"ground" | "entry points": names})`` from the section
    "The console grid" of docs/ARCHITECTURE.md. Raises ``ValueError`` when it has no table."""
    section = text.split("## The console grid", 1)[-1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("|")]
    if len(rows) < 3:
        raise ValueError("no grid table under '## The console grid'")
    header = [c.strip() for c in rows[0].strip("|").split("|")]
    cells: dict[tuple[str, str], set[str]] = {}
    for row in rows[2:]:
        values = [c.strip() for c in row.strip("|").split("|")]
        domain = values[0].strip("*` ")
        for column, value in zip(header[1:], values[1:], strict=True):
            cells[(domain, column)] = set(re.findall(r"`(\w+)/?`", value))
    root = {
        m.group(1).lower(): set(re.findall(r"`(\w+)/?`", m.group(2)))
        for m in re.finditer(r"\*\*(Ground|Entry points)\*\*(.*?)(?=\n\*\*|\n\n|$)", section, re.S)
    }
    return cells, root


def _tree(column: str) -> set[str]:
    folder = REPO / COLUMNS[column]
    if column == "templates":
        return {p.name for p in folder.iterdir() if p.is_dir() and any(p.glob("*.html"))}
    return {p.stem for p in folder.glob("*.py") if p.name != "__init__.py"}


def test_the_grid_table_lists_exactly_the_modules_of_the_layer_packages() -> None:
    cells, _ = parse_grid(ARCHITECTURE.read_text(encoding="utf-8"))
    columns = {column for _, column in cells}
    assert columns == set(COLUMNS)
    for column in sorted(COLUMNS):
        listed = {name for (_, c), names in cells.items() if c == column for name in names}
        assert listed == _tree(column), column


def test_every_module_of_the_grid_is_named_after_its_domain() -> None:
    cells, _ = parse_grid(ARCHITECTURE.read_text(encoding="utf-8"))
    misnamed = [
        f"{column}/{name} in row {domain}"
        for (domain, column), names in cells.items()
        if domain != SHARED
        for name in names
        if name != domain and not name.startswith(domain + "_")
    ]
    assert misnamed == []


def test_the_console_root_holds_only_the_ground_and_the_entry_points() -> None:
    _, root = parse_grid(ARCHITECTURE.read_text(encoding="utf-8"))
    console = REPO / "memoryadmin" / "console"
    here = {p.stem for p in console.glob("*.py") if p.name != "__init__.py"}
    here |= {
        p.name
        for p in console.iterdir()
        if p.is_dir() and p.name in ("management", "templatetags", "models")
    }
    assert root["ground"] | root["entry points"] == here
    assert {layer_of(f"memoryadmin.console.{m}") for m in root["ground"]} == {"ground"}


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("## The console grid\n\nno table\n", ValueError),
        ("# nothing\n", ValueError),
    ],
)
def test_a_missing_grid_table_is_an_error(text: str, error: type[Exception]) -> None:
    with pytest.raises(error):
        parse_grid(text)


def test_the_grid_parser_reads_rows_cells_and_the_root_lines() -> None:
    text = (
        "## The console grid\n\n| domain | services | views |\n|---|---|---|\n"
        "| agents | `agents` | `agents`, `agents_x` |\n| apply | `apply` | — |\n\n"
        "**Ground**: `models`, `stores`.\n**Entry points**: `urls`, `management/`.\n\n## Next\n"
    )
    cells, root = parse_grid(text)
    assert cells == {
        ("agents", "services"): {"agents"},
        ("agents", "views"): {"agents", "agents_x"},
        ("apply", "services"): {"apply"},
        ("apply", "views"): set(),
    }
    assert root == {"ground": {"models", "stores"}, "entry points": {"urls", "management"}}
