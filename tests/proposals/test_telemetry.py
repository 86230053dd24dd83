"""A pass's telemetry has one typed home (``memoryadmin/proposals/telemetry.py``): every module
reads ``Pass.telemetry_data`` and writes through ``telemetry_save`` (or ``to_json``), none
indexes the JSON column itself; the type round-trips any stored telemetry unchanged."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from memoryadmin.proposals.models import Pass
from memoryadmin.proposals.telemetry import PassTelemetry, telemetry_save

REPO = Path(__file__).resolve().parents[2]
HOME = {
    Path("memoryadmin/proposals/telemetry.py"),  # the typed home
    Path("memoryadmin/proposals/models.py"),  # Pass.telemetry_data: PassTelemetry.from_json
}
TEMPLATE_READ = re.compile(r"\.telemetry\b(?!_data)")


def telemetry_reads(root: Path = REPO) -> list[str]:
    """``"path:line"`` of every use of a ``.telemetry`` attribute (``run.telemetry[...]``,
    ``run.telemetry.get(...)``, ``dict(run.telemetry or {})``, …) or of a ``telemetry__``
    lookup in the console's modules outside :data:`HOME` (migrations aside), and of
    ``.telemetry`` in its templates (``run.telemetry.llm``)."""
    found = []
    for path in sorted((root / "memoryadmin").rglob("*.py")):
        rel = path.relative_to(root)
        if rel in HOME or "migrations" in rel.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            hit = (isinstance(node, ast.Attribute) and node.attr == "telemetry") or (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and node.value.startswith("telemetry__")
            )
            if hit:
                found.append(f"{rel}:{node.lineno}")
    for path in sorted((root / "templates").rglob("*.html")):
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if TEMPLATE_READ.search(line):
                found.append(f"{path.relative_to(root)}:{n}")
    return found


def test_no_module_outside_the_typed_home_reads_the_telemetry_column() -> None:
    assert telemetry_reads() == [], "read run.telemetry_data, write with telemetry_save"


def test_the_check_sees_each_way_of_reading_it(tmp_path: Path) -> None:
    pkg = tmp_path / "memoryadmin" / "proposals"
    pkg.mkdir(parents=True)
    (tmp_path / "templates").mkdir()
    (pkg / "a.py").write_text("def f(run):\n    return run.telemetry['layer']\n")
    (pkg / "b.py").write_text("def f(run):\n    return (run.telemetry or {}).get('llm')\n")
    (pkg / "c.py").write_text("Q = {'telemetry__llm__totals__isnull': False}\n")
    (pkg / "d.py").write_text("def f(run):\n    return run.telemetry_data.layer\n")
    (pkg / "telemetry.py").write_text("def f(run):\n    return run.telemetry\n")  # the home
    (tmp_path / "templates" / "t.html").write_text(
        "{{ run.telemetry.llm }}\n{{ run.telemetry_data.llm }}\n"
    )
    assert telemetry_reads(tmp_path) == [
        "memoryadmin/proposals/a.py:2",
        "memoryadmin/proposals/b.py:2",
        "memoryadmin/proposals/c.py:1",
        "templates/t.html:1",
    ]


STORED = {
    "layer": "semantic",
    "policy_override": "compact:semantic",
    "now": "2026-10-01T00:00:00+00:00",
    "inputs_digest": "ab" * 32,
    "review": {"scored": True, "risk_line": 0.5, "store_sentences": 40},
    "trimmed": {"budget": 4, "dropped_operations": 1, "dropped_removals": 1},
    "llm": {"model": "m", "totals": {"tokens_in": 3, "tokens_out": 1, "requests": 1}},
    "auto_apply": {"mode": "safe", "applied": 2, "waiting": 1, "waiting_pass": 7},
    "content_override": {"by": "bob", "at": "2026-10-01T00:00:00+00:00", "reason": "r"},
    "apply_guard": {"guard_passed": True},
    "applied": {"conflicts": 0, "failed": 0},
    "rollback": {"from": "applied", "actor": "bob", "started": True},
    "forgotten_by": [3, 5],
    "timings": {"plan_s": 1.5},
    "held_back": [{"reason": "a decision"}],
}


@pytest.mark.parametrize(
    "stored", [STORED, {}, {"timings": {"x": 1}}, {"layer": "episodic"}], ids=str
)
def test_it_round_trips_what_a_pass_stored(stored: dict) -> None:
    tel = PassTelemetry.from_json(stored)
    assert tel.to_json() == stored
    assert PassTelemetry.from_json(tel.to_json()) == tel


def test_the_fields_read_what_the_keys_hold() -> None:
    tel = PassTelemetry.from_json(STORED)
    assert (tel.layer, tel.policy_override, tel.forgotten_by) == (
        "semantic",
        "compact:semantic",
        (3, 5),
    )
    assert tel.review_scored and tel.store_sentences == 40 and tel.waiting_pass == 7
    assert tel.rollback_actor == "bob" and tel.recall_ratio is None
    assert tel.context == {"timings": {"plan_s": 1.5}, "held_back": [{"reason": "a decision"}]}
    assert tel.with_(apply_guard=None).to_json().keys() == STORED.keys() - {"apply_guard"}
    assert PassTelemetry.from_json(None) == PassTelemetry() and PassTelemetry().to_json() == {}
    assert PassTelemetry().rollback_actor == "cli" and not PassTelemetry().review_scored


@pytest.mark.django_db
def test_telemetry_save_writes_the_column_and_the_instance(bare_agent) -> None:
    run = Pass.objects.create(agent=bare_agent(), trigger="operator", telemetry={"now": "t"})
    telemetry_save(run, run.telemetry_data.with_(forgotten_by=(4,)))
    assert run.telemetry == {"now": "t", "forgotten_by": [4]}
    assert Pass.objects.get(pk=run.pk).telemetry_data.forgotten_by == (4,)
