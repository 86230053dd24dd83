"""The web process is warm before its first request (the first proposal page
after a start took 2.1 s): starting ``memoryadmin.wsgi`` imports every view and compiles the
proposal page's templates, which Django otherwise does on the first request."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import json, sys
import memoryadmin.wsgi
from django.template import engines
cached = set()
todo = list(engines["django"].engine.template_loaders)
while todo:  # the partials loader wraps Django's cached loader
    loader = todo.pop()
    cached |= {k for k in getattr(loader, "get_template_cache", {}) if isinstance(k, str)}
    todo += list(getattr(loader, "loaders", []) or [])
print(json.dumps({
    "views": "memoryadmin.proposals.views.review" in sys.modules,
    "templates": sorted(cached),
}))
"""


def _start(**env: str) -> dict:
    environ = {
        **os.environ,
        "CHROMA_MODE": "ephemeral",
        "DJANGO_SETTINGS_MODULE": "memoryadmin.settings",
        **env,
    }
    out = subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=ROOT,
        env=environ,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_starting_the_web_process_imports_the_views_and_compiles_the_proposal_page() -> None:
    started = _start()
    assert started["views"]
    assert "proposals/pass_detail.html" in started["templates"]


def test_the_warm_up_can_be_switched_off() -> None:
    started = _start(MEMORYADMIN_WARM_UP="0")
    assert not started["views"] and started["templates"] == []
