"""A pass's telemetry, typed: the one home of ``Pass.telemetry`` (a JSON column).

Every key the console reads or writes is a field of :class:`PassTelemetry`; whatever else the
plan's context holds (``timings``, ``held_back``, ``left_out``, …) is kept as it came under
:attr:`PassTelemetry.context`, so the stored JSON is what it was before this type existed
(:meth:`PassTelemetry.from_json` and :meth:`PassTelemetry.to_json` round-trip any dict). A
module reads ``run.telemetry_data`` (``Pass.telemetry_data``) and writes with
:func:`telemetry_save`, or hands :meth:`PassTelemetry.to_json` to ``transition`` or ``create``;
``tests/proposals/test_telemetry.py`` fails when a module elsewhere indexes the column itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any, Protocol

__all__ = [
    "LLM_MODEL_LOOKUP",
    "LLM_TOTALS_LOOKUP",
    "PassTelemetry",
    "telemetry_save",
]

LLM_TOTALS_LOOKUP = "telemetry__llm__totals"
"""The ORM lookup of :attr:`PassTelemetry.llm`'s ``totals`` (tokens and requests), for queries
over many passes (the dashboard's and ``/metrics``' model costs)."""

LLM_MODEL_LOOKUP = "telemetry__llm__model"
"""The ORM lookup of :attr:`PassTelemetry.llm`'s ``model`` (its name)."""


@dataclass(frozen=True)
class PassTelemetry:
    """What a pass recorded beside its figures, one field per key of ``Pass.telemetry``.

    A field that is ``None`` (``()`` for :attr:`forgotten_by`) is absent from the JSON. The
    mappings are kept as stored (JSON objects); their shapes are given per field.
    """

    layer: str | None = None
    """The memory layer a ``memory_compact`` pass is restricted to (FieldMap ``layer``)."""

    policy_override: str | None = None
    """The policy the request fixed for this pass (``consolidate --policy NAME``, ``"explicit"``,
    ``"compact:<layer>"``): the pass is held to that policy's threshold, and the schedule never
    skips a pass because of it."""

    now: str | None = None
    """The clock the pass planned with (ISO 8601)."""

    inputs_digest: str | None = None
    """SHA-256 of what the plan was made from (``selectors.passes.plan_inputs_digest``): the
    schedule skips a pass that would repeat it."""

    review: dict[str, Any] | None = None
    """The review aids stored with the operations: ``{"scored": bool, "risk_line": float,
    "store_sentences": int (sentences of the store at planning), "from": str}``."""

    trimmed: dict[str, Any] | None = None
    """What the loss budget deferred (``consolidation.planning``): ``{"budget",
    "dropped_operations", "dropped_removals", "deferred_by_kind": {kind: n},
    "deferred": [{"kind", "rule", "source_ids", "reason"}]}``."""

    llm: dict[str, Any] | None = None
    """The model work of the plan (``plan.context["llm"]``): ``{"model", "totals":
    {"tokens_in", "tokens_out", "requests"}, "judge", "distill"}`` (see
    ``consolidation.snapshot.llm_brief``)."""

    auto_apply: dict[str, Any] | None = None
    """What auto-apply did: ``{"mode", "applied", "waiting", "reasons": {code: n}}`` plus
    ``"waiting_pass"`` (the pass waiting for review), ``"recall_split"``, ``"recall_ratio"``
    (the applied part's recall kept, in [0, 1]); the waiting part has ``"part": "waiting"`` and
    ``"applied_pass"``."""

    content_override: dict[str, Any] | None = None
    """A reviewer approved past the content guard: ``{"by", "at" (ISO 8601), "reason"}``."""

    apply_guard: dict[str, Any] | None = None
    """The loss guard re-checked at apply time (``Evaluation.to_dict()`` on the live store): its
    presence says the check ran, so a resumed apply does not check again."""

    applied: dict[str, Any] | None = None
    """What apply applied (``Evaluation.to_dict()`` with ``"conflicts"`` and ``"failed"``)."""

    rollback: dict[str, Any] | None = None
    """A requested rollback: ``{"actor", "from" (the status it was rolled back from),
    "requested_at" (ISO 8601), "started": bool (it began writing: resumed, not re-checked)}``."""

    forgotten_by: tuple[int, ...] = ()
    """Forget requests that purged memories this pass held (ids, ascending): no Undo."""

    context: dict[str, Any] = field(default_factory=dict)
    """The rest of the plan's context, as the engine gave it (``timings``, ``held_back``,
    ``held_back_count``, ``left_out``, …): kept and shown, never driving the console."""

    @classmethod
    def from_json(cls, data: Any) -> PassTelemetry:
        """The telemetry stored as ``data`` (``Pass.telemetry``; anything not a dict is empty).
        Keys of the fields are read into them, every other key into :attr:`context`."""
        if not isinstance(data, Mapping):
            return cls()
        names = {f.name for f in fields(cls)} - {"context"}
        values: dict[str, Any] = {k: v for k, v in data.items() if k in names}
        if "forgotten_by" in values:
            values["forgotten_by"] = tuple(int(n) for n in values["forgotten_by"] or ())
        context = {k: v for k, v in data.items() if k not in names}
        return cls(**values, context=context)

    def to_json(self) -> dict[str, Any]:
        """The JSON object ``Pass.telemetry`` stores: :attr:`context` and every field that is
        set (``forgotten_by`` as a list)."""
        out = dict(self.context)
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "context" or value is None or (f.name == "forgotten_by" and not value):
                continue
            out[f.name] = list(value) if f.name == "forgotten_by" else value
        return out

    def with_(self, **changes: Any) -> PassTelemetry:
        """A copy with ``changes`` (field name → value; ``None`` removes a key)."""
        return replace(self, **changes)

    @property
    def review_scored(self) -> bool:
        """True when the operations were scored (risk and lost content) when stored."""
        return bool((self.review or {}).get("scored"))

    @property
    def store_sentences(self) -> int | None:
        """Sentences of the store at planning (the content guard's denominator), if counted."""
        value = (self.review or {}).get("store_sentences")
        return int(value) if isinstance(value, int) else None

    @property
    def rollback_actor(self) -> str:
        """Who asked for the rollback (``"cli"`` when not recorded)."""
        return str((self.rollback or {}).get("actor") or "cli")

    @property
    def waiting_pass(self) -> int | None:
        """The pass auto-apply left waiting for review when it split this one, if any."""
        value = (self.auto_apply or {}).get("waiting_pass")
        return int(value) if isinstance(value, int) else None

    @property
    def recall_ratio(self) -> float | None:
        """The recall an ``all`` auto-apply kept (in [0, 1]), summed by the drift check."""
        value = (self.auto_apply or {}).get("recall_ratio")
        return float(value) if isinstance(value, int | float) else None


class _HasTelemetry(Protocol):
    pk: Any
    telemetry: Any


def telemetry_save(run: _HasTelemetry, telemetry: PassTelemetry) -> None:
    """Store ``telemetry`` as the pass ``run``'s (one UPDATE of the column) and on ``run``."""
    data = telemetry.to_json()
    type(run).objects.filter(pk=run.pk).update(telemetry=data)  # type: ignore[attr-defined]
    run.telemetry = data
