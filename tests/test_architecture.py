"""The console is domain packages (docs/ARCHITECTURE.md "Packages"), and its imports run one way.

Read from the code with ``ast`` (nothing is imported): every import statement of
``memoryadmin/`` counts, at the top of a module, inside a function or under ``TYPE_CHECKING``
(a lazy import hides a cycle, it does not remove it). Migrations aside.

- no import cycle between modules;
- no function-level import of our own modules (the need for one is removed instead);
- inside every package, no import from a higher layer: views → forms / services / selectors →
  the ground (models, and core's stores, validation, errors, roles) → the engine; services never
  import forms or views, selectors never import services, forms never import services, tasks
  call services;
- between packages, below the views, a package imports only the packages before it in
  :data:`PACKAGES` (the models of every package are one ground: one Django app whose foreign
  keys run both ways); views, template tags and the entry points may import any package;
- the package table in docs/ARCHITECTURE.md lists exactly the modules of every package's layers,
  its template folder and its test folder, and the line under it the app's root.
"""

from __future__ import annotations

import ast
import functools
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
ARCHITECTURE = REPO / "docs/ARCHITECTURE.md"

PACKAGES = ["core", "notifications", "agents", "memories", "proposals", "ops"]
"""The console's domain packages under ``memoryadmin/``, in import order: below the views a
package imports only the packages before it here (and itself)."""

PACKAGE_ORDER = {name: i for i, name in enumerate(PACKAGES)}

LAYER_NAMES = ("models", "selectors", "services", "forms", "views")
"""A package's layers: a module ``<package>/<layer>.py`` or a folder ``<package>/<layer>/``."""

LAYERS = [
    ("memoryadmin.models", "ground"),
    ("memoryadmin.apps", "ground"),
    ("memoryadmin.core.errors", "ground"),
    ("memoryadmin.core.validation", "ground"),
    ("memoryadmin.core.stores", "ground"),
    ("memoryadmin.core.roles", "ground"),
    ("memoryadmin.proposals.figures", "ground"),
    ("memoryadmin.proposals.telemetry", "ground"),
    ("memoryadmin.core.leases", "services"),
    ("memoryadmin.core.error_pages", "views"),
    ("memoryadmin.templatetags", "views"),
    ("memoryadmin.tasks", "tasks"),
    ("memoryadmin.api.models", "ground"),
    ("memoryadmin.api.schemas", "ground"),
    ("memoryadmin.api.apps", "ground"),
    ("memoryadmin.api.present", "selectors"),
    ("memoryadmin.api.actions", "services"),
    ("memoryadmin.api.tokens", "services"),
    ("memoryadmin.api.routes", "views"),
    ("memoryadmin.api.paging", "views"),
    ("memoryadmin.api.views", "views"),
] + [
    (f"memoryadmin.{package}.{layer}", "ground" if layer == "models" else layer)
    for package in PACKAGES
    for layer in LAYER_NAMES
]
"""(module prefix, layer); the longest matching prefix wins. Everything else (urls, admin,
management commands, the API's mount and its MCP server, settings, middleware, wsgi) is an entry
point: it may import any layer."""

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


@functools.cache  # parsed once per tree: the package table asks for it per cell
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
    """The layer of ``module`` (``"entry"`` when none claims it); a domain package's own
    ``__init__`` (a docstring, how its modules are reached) is ground."""
    if module.count(".") == 1 and module.split(".")[1] in PACKAGE_ORDER:
        return "ground"
    best = max(
        (p for p, _ in LAYERS if module == p or module.startswith(p + ".")), key=len, default=""
    )
    return dict(LAYERS).get(best, "entry")


def package_of(module: str) -> str | None:
    """The domain package of ``module`` (``None`` for the API, the app's root and entry points)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in PACKAGE_ORDER else None


def _upward(edges: list[Edge]) -> list[str]:
    wrong = []
    for e in edges:
        if e.source.startswith(e.target + "."):
            continue  # its own package (a face that defines nothing): how siblings are reached
        source, target = layer_of(e.source), layer_of(e.target)
        if source in ALLOWED and target not in ALLOWED[source]:
            wrong.append(f"{e.source}:{e.line} ({source}) imports {e.target} ({target})")
    return wrong


def _across(edges: list[Edge]) -> list[str]:
    """Imports below the views from a package later in :data:`PACKAGES` (models aside)."""
    wrong = []
    for e in edges:
        source, target = package_of(e.source), package_of(e.target)
        if source is None or target is None or source == target:
            continue
        if layer_of(e.source) in ("views", "entry") or layer_of(e.target) == "ground":
            continue
        if PACKAGE_ORDER[target] > PACKAGE_ORDER[source]:
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


def test_packages_import_only_the_packages_before_them() -> None:
    _, edges = _edges()
    assert _across(edges) == []


def test_the_checks_see_a_cycle_a_lazy_import_and_an_upward_import(tmp_path: Path) -> None:
    pkg = tmp_path / "memoryadmin" / "agents"
    (pkg / "selectors").mkdir(parents=True)
    (pkg / "services").mkdir()
    for init in (pkg.parent, pkg, pkg / "selectors", pkg / "services"):
        (init / "__init__.py").write_text("")
    (pkg / "selectors" / "a.py").write_text("def f():\n    from ..services import b\n")
    (pkg / "services" / "b.py").write_text("from ..selectors import a\n")
    mods, edges = _edges(tmp_path)
    assert _cycles(sorted(mods), edges) == [
        ["memoryadmin.agents.selectors.a", "memoryadmin.agents.services.b"]
    ]
    assert {(e.source, e.target) for e in edges if e.lazy} == {
        ("memoryadmin.agents.selectors.a", "memoryadmin.agents.services"),
        ("memoryadmin.agents.selectors.a", "memoryadmin.agents.services.b"),
    }
    assert sorted(_upward(edges)) == [
        f"memoryadmin.agents.selectors.a:2 (selectors) imports {target} (services)"
        for target in ("memoryadmin.agents.services", "memoryadmin.agents.services.b")
    ]


# ----- the package table ------------------------------------------------------------------

COLUMNS = ("ground", "services", "selectors", "forms", "views", "templates", "tests")
"""The table's columns after the package name: the modules of each layer (a layer's own module
``<layer>.py`` is listed by the layer's name), then the package's template and test folders."""


def parse_packages(text: str) -> tuple[dict[tuple[str, str], set[str]], set[str]]:
    """``({(package, column): names}, root names)`` from the section "Packages" of
    docs/ARCHITECTURE.md: its table, and the backticked names of its "**App root**" line.
    Raises ``ValueError`` when it has no table."""
    section = text.split("## Packages", 1)[-1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("|")]
    if len(rows) < 3:
        raise ValueError("no package table under '## Packages'")
    header = [c.strip() for c in rows[0].strip("|").split("|")]
    cells: dict[tuple[str, str], set[str]] = {}
    for row in rows[2:]:
        values = [c.strip() for c in row.strip("|").split("|")]
        package = values[0].strip("*` ")
        for column, value in zip(header[1:], values[1:], strict=True):
            cells[(package, column)] = set(re.findall(r"`(\w+)/?`", value))
    root = re.search(r"\*\*App root\*\*[^:]*:(.*?)(?=\n\n|$)", section, re.S)
    return cells, set(re.findall(r"`(\w+)/?`", root.group(1))) if root else set()


def _tree(package: str, column: str) -> set[str]:
    if column in ("templates", "tests"):
        folder = REPO / column / package
        pattern = "*.html" if column == "templates" else "test_*.py"
        return {package} if folder.is_dir() and any(folder.glob(pattern)) else set()
    mods, _ = _edges()
    return {
        m.rsplit(".", 1)[-1]
        for m, path in mods.items()
        if package_of(m) == package and path.name != "__init__.py" and layer_of(m) == column
    }


def test_the_package_table_lists_exactly_the_modules_of_every_package() -> None:
    cells, _ = parse_packages(ARCHITECTURE.read_text(encoding="utf-8"))
    assert {p for p, _ in cells} == set(PACKAGES)
    assert {c for _, c in cells} == set(COLUMNS)
    for (package, column), names in sorted(cells.items()):
        assert names == _tree(package, column), f"{package} / {column}"


def test_every_module_of_a_package_has_a_layer() -> None:
    mods, _ = _edges()
    homeless = [m for m in mods if package_of(m) and m.count(".") >= 2 and layer_of(m) == "entry"]
    assert homeless == []


def test_the_app_root_holds_what_the_table_names() -> None:
    _, root = parse_packages(ARCHITECTURE.read_text(encoding="utf-8"))
    app = REPO / "memoryadmin"
    here = {p.stem for p in app.glob("*.py") if p.name != "__init__.py"}
    here |= {p.name for p in app.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert root == here - set(PACKAGES)


@pytest.mark.parametrize("text", ["## Packages\n\nno table\n", "# nothing\n"])
def test_a_missing_package_table_is_an_error(text: str) -> None:
    with pytest.raises(ValueError):
        parse_packages(text)


def test_the_table_parser_reads_rows_cells_and_the_root_line() -> None:
    text = (
        "## Packages\n\n| package | services | views |\n|---|---|---|\n"
        "| agents | `agents` | `views` |\n| ops | `demo`, `health` | — |\n\n"
        "**App root** (`memoryadmin/`): `urls`, `management/`.\n\n## Next\n"
    )
    cells, root = parse_packages(text)
    assert cells == {
        ("agents", "services"): {"agents"},
        ("agents", "views"): {"views"},
        ("ops", "services"): {"demo", "health"},
        ("ops", "views"): set(),
    }
    assert root == {"urls", "management"}


def test_the_package_check_sees_an_import_from_a_later_package() -> None:
    edges = [
        Edge(
            "memoryadmin.agents.services.agents", "memoryadmin.proposals.selectors.passes", 3, False
        ),
        Edge("memoryadmin.agents.views.agents", "memoryadmin.proposals.services.passes", 4, False),
        Edge("memoryadmin.agents.selectors.probes", "memoryadmin.proposals.models", 5, False),
        Edge(
            "memoryadmin.proposals.services.passes",
            "memoryadmin.agents.services.schedules",
            6,
            False,
        ),
    ]
    assert _across(edges) == [
        "memoryadmin.agents.services.agents:3 (agents) imports "
        "memoryadmin.proposals.selectors.passes (proposals)"
    ]


# ----- settings are read in settings.py only -------------------------------------------------

ENV_READS_ALLOWED = {
    "memoryadmin.settings": "the one place the environment becomes settings",
    "memoryadmin.wsgi": "names the settings module (DJANGO_SETTINGS_MODULE) before settings exist",
}
"""Modules of ``memoryadmin/`` that may touch the process environment, with the reason. The
engine (``consolidation/``) is not the console: it reads its own variables (docs/ARCHITECTURE.md
"Settings")."""


def _env_reads(mods: dict[str, Path]) -> list[str]:
    """``module:line`` of every ``os.environ`` / ``os.getenv`` / ``os.putenv`` use, and every
    ``from os import environ|getenv|putenv``, in ``mods``."""
    names = {"environ", "getenv", "putenv", "unsetenv", "environb", "getenvb"}
    found = []
    for module, path in mods.items():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            hit = (
                isinstance(node, ast.Attribute)
                and node.attr in names
                and isinstance(node.value, ast.Name)
                and node.value.id == "os"
            ) or (
                isinstance(node, ast.ImportFrom)
                and node.module == "os"
                and any(alias.name in names for alias in node.names)
            )
            if hit:
                found.append(f"{module}:{node.lineno}")
    return found


def test_the_console_reads_the_environment_only_in_settings() -> None:
    """Everything else reads ``django.conf.settings`` at call time, so ``override_settings``
    (and pytest-django's ``settings``) reaches it and one file lists every variable."""
    mods = {m: p for m, p in _modules().items() if m not in ENV_READS_ALLOWED}
    assert _env_reads(mods) == []


def test_the_environment_check_sees_each_way_of_reading_it(tmp_path: Path) -> None:
    pkg = tmp_path / "memoryadmin"
    pkg.mkdir()
    (pkg / "a.py").write_text("import os\nX = os.getenv('X')\n")
    (pkg / "b.py").write_text("import os\n\ndef f():\n    return os.environ['Y']\n")
    (pkg / "c.py").write_text("from os import environ\n")
    (pkg / "d.py").write_text("import os\nZ = os.path.join('a', 'b')\n")
    assert _env_reads(_modules(tmp_path)) == [
        "memoryadmin.a:2",
        "memoryadmin.b:4",
        "memoryadmin.c:1",
    ]
