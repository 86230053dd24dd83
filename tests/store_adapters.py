"""The store adapters ``pyproject.toml`` declares, visible to the process under test.

``Consolidator().consolidate(memory)`` finds a library's store adapter through the entry-point
group ``consolidation.stores`` (consolidation/store_adapters.py), which Python reads from the
installed package's metadata. An editable install made before the group was declared (or from
another checkout) does not list it until it is installed again, so the ``store_adapters``
fixture adds the group exactly as this checkout's ``pyproject.toml`` declares it: a
``*.dist-info`` directory with that ``entry_points.txt``, put on ``sys.path`` for the test
(``importlib.metadata`` finds distributions there) and in ``PYTHONPATH`` for the processes
it starts. When the installed metadata already lists every adapter it does nothing.

Use it with ``pytest_plugins = ["tests.store_adapters"]``.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Iterator
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from consolidation.store_adapters import GROUP

REPO = Path(__file__).resolve().parents[1]


def declared() -> dict[str, str]:
    """The ``consolidation.stores`` entry points of ``pyproject.toml``: name → object ref."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return dict(project["entry-points"][GROUP])


@pytest.fixture
def store_adapters(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """The declared adapters (name → ref), visible through ``importlib.metadata``."""
    wanted = declared()
    installed = {ep.name: ep.value for ep in entry_points(group=GROUP)}
    if all(installed.get(k) == v for k, v in wanted.items()):
        yield wanted
        return
    root = tmp_path_factory.mktemp("site")
    info = root / "memoryadmin_store_adapters-0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: memoryadmin-store-adapters\nVersion: 0\n", encoding="utf-8"
    )
    lines = "".join(f"{name} = {ref}\n" for name, ref in wanted.items())
    (info / "entry_points.txt").write_text(f"[{GROUP}]\n{lines}", encoding="utf-8")
    with pytest.MonkeyPatch.context() as mp:
        mp.syspath_prepend(str(root))
        parts = [str(root), str(REPO), os.environ.get("PYTHONPATH", "")]
        mp.setenv("PYTHONPATH", os.pathsep.join(p for p in parts if p))
        yield wanted
