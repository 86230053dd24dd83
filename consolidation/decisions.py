"""Standing decisions: what reviewers decided, as constraints every later pass plans with.

A reviewer's decision that should outlive its pass (the console stores it per agent) reaches
the engine as a :class:`Constraint`; a pass plans with all of them at once as
:class:`StandingDecisions` (``consolidation.planning.plan(..., decisions=...)``,
``consolidation.snapshot.plan_snapshot(..., decisions=...)``, ``Consolidator(decisions=...)``).
Kinds (:class:`DecisionKind`):

- ``keep_apart`` — from excluding a merge, reconcile or fold: these memories (two or more;
  every pair of them) are never joined by a merge, reconcile, evidence fold or window, nor
  offered as a conflict item, in any later pass. Complete linkage: a group holding any two of
  them is not formed, other memories may still merge with either. Keyed by ids *and* content
  hashes: once one of a pair was edited (its hash changed) the pair is judged again. A memory
  merged from one of them (its ``merged_from`` names it) stands for it, whatever its hash.
- ``keep`` — from restoring an archived memory or "keep both" on a conflict: the memory (by
  id, whatever its content) is not pruned, superseded or merged away by any pass until the
  decision is revoked — like pinned (I-6), but a reviewer's. It may still be promoted.
- ``conflict_pick`` — keep A / keep B on a conflict: when a later pass finds the same pair
  (same ids, same hashes) in contradiction again it plans a ``reconcile`` keeping the pick
  (``rule`` ``"decided"``, ``scores["decision"]``: the decision's id), which a reviewer still
  sees and may exclude; the pair is never merged, folded or windowed. Changed hashes: the pick
  no longer applies.
- ``rejected_plan`` — not a planning constraint: the engine plans as usual, and the console
  matches each planned operation's :func:`operation_signature` against the signatures of the
  operations it rejected, so a rejected operation never applies on its own
  (:func:`consolidation.review.auto_apply.split_auto_apply`).

To stop a conflict being asked again after "keep both", record ``keep`` for both memories and
``keep_apart`` for the pair.

Whatever a decision held back is listed in the plan's telemetry,
``plan.context["held_back"]`` (see :mod:`consolidation.planning.constraints`): nothing is
dropped silently.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

__all__ = [
    "Constraint",
    "DecisionKind",
    "StandingDecisions",
    "operation_signature",
    "signature",
]


class DecisionKind(StrEnum):
    """The kinds of standing decision (see the module docstring)."""

    KEEP_APART = "keep_apart"
    KEEP = "keep"
    CONFLICT_PICK = "conflict_pick"
    REJECTED_PLAN = "rejected_plan"


_PLANNING_KINDS = frozenset(
    {DecisionKind.KEEP_APART, DecisionKind.KEEP, DecisionKind.CONFLICT_PICK}
)


@dataclass(frozen=True)
class Constraint:
    """One standing decision as the planner reads it.

    - ``decision``: the console's id of the decision (an int or a string), named in the plan's
      telemetry and in the reason of an operation it decided.
    - ``kind``: :class:`DecisionKind` (``rejected_plan`` is refused here: it is no constraint).
    - ``memories``: ``(memory id, content hash)`` pairs: two or more for ``keep_apart``,
      exactly two for ``conflict_pick`` (hashes required), one or more for ``keep`` (hash may
      be ``""``: a keep holds by id).
    - ``keep``: for ``conflict_pick``, the id of the memory the reviewer kept.
    - ``note``: shown after the decision's number, e.g. ``"set by alice on pass #4"``.

    Raises ``ValueError`` for a missing or repeated id, a missing hash where one is needed, a
    pick naming neither memory, or a kind that is not a planning constraint.
    """

    decision: int | str
    kind: DecisionKind
    memories: tuple[tuple[str, str], ...]
    keep: str = ""
    note: str = ""

    def __post_init__(self) -> None:
        try:
            kind = DecisionKind(self.kind)
        except ValueError:
            raise ValueError(f"unknown decision kind {self.kind!r}") from None
        object.__setattr__(self, "kind", kind)
        if kind not in _PLANNING_KINDS:
            raise ValueError(
                "a rejected plan is not a planning constraint: match operations with "
                "operation_signature() instead"
            )
        if isinstance(self.decision, bool) or not isinstance(self.decision, int | str):
            raise ValueError(f"decision must be an int or a string, got {self.decision!r}")
        mems = tuple((str(m), str(h or "")) for m, h in self.memories)
        object.__setattr__(self, "memories", mems)
        ids = [m for m, _ in mems]
        if any(not m for m in ids) or len(set(ids)) != len(ids):
            raise ValueError(f"decision {self.decision}: memory ids must be non-empty and unique")
        if kind == DecisionKind.KEEP:
            if not ids:
                raise ValueError(f"decision {self.decision}: keep names no memory")
            return
        need = 2 if kind == DecisionKind.CONFLICT_PICK else None
        if len(ids) < 2 or (need is not None and len(ids) != need):
            raise ValueError(
                f"decision {self.decision}: {kind.value} needs "
                f"{'exactly two' if need else 'at least two'} memories, got {len(ids)}"
            )
        if any(not h for _, h in mems):
            raise ValueError(f"decision {self.decision}: {kind.value} needs every content hash")
        if kind == DecisionKind.CONFLICT_PICK and self.keep not in ids:
            raise ValueError(
                f"decision {self.decision}: the kept memory {self.keep!r} is not one of the pair"
            )

    @property
    def memory_ids(self) -> list[str]:
        """The ids the decision covers, in its order."""
        return [m for m, _ in self.memories]

    @property
    def label(self) -> str:
        """``"decision #12 (keep apart, set by alice on pass #4)"``."""
        what = self.kind.value.replace("_", " ")
        return f"decision #{self.decision} ({what}{', ' + self.note if self.note else ''})"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (round-trips through :meth:`from_dict`)."""
        return {
            "decision": self.decision,
            "kind": self.kind.value,
            "memories": [list(m) for m in self.memories],
            "keep": self.keep,
            "note": self.note,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Constraint:
        """Inverse of :meth:`to_dict`; raises ``ValueError`` as the constructor does."""
        return cls(
            decision=data["decision"],
            kind=data["kind"],
            memories=tuple(tuple(m) for m in data.get("memories") or ()),
            keep=str(data.get("keep") or ""),
            note=str(data.get("note") or ""),
        )


def _pair(a: str, b: str) -> tuple[str, str]:
    return (a, b) if a < b else (b, a)


@dataclass(frozen=True)
class _PairRule:
    """A pair constraint indexed under its sorted ids, with the hashes in that order."""

    hashes: tuple[str, str]
    constraint: Constraint


@dataclass
class StandingDecisions:
    """An agent's standing decisions, indexed for the planner's per-pair lookups.

    ``StandingDecisions([Constraint(...), ...])``; ``len()`` counts constraints. Lookups are
    dict hits: :meth:`kept` (by id), :meth:`apart` and :meth:`pick` (by the sorted id pair,
    then the hashes). When two decisions cover the same memory or pair, the first given wins.
    """

    constraints: Sequence[Constraint] = ()
    _keep: dict[str, Constraint] = field(default_factory=dict, init=False, repr=False)
    _apart: dict[tuple[str, str], list[_PairRule]] = field(
        default_factory=dict, init=False, repr=False
    )
    _picks: dict[tuple[str, str], list[_PairRule]] = field(
        default_factory=dict, init=False, repr=False
    )

    def __post_init__(self) -> None:
        self.constraints = tuple(self.constraints)
        for c in self.constraints:
            if not isinstance(c, Constraint):
                raise ValueError(f"not a Constraint: {c!r}")
            if c.kind == DecisionKind.KEEP:
                for mid in c.memory_ids:
                    self._keep.setdefault(mid, c)
                continue
            table = self._apart if c.kind == DecisionKind.KEEP_APART else self._picks
            for i, (a, ha) in enumerate(c.memories):
                for b, hb in c.memories[i + 1 :]:
                    key = _pair(a, b)
                    hashes = (ha, hb) if key[0] == a else (hb, ha)
                    table.setdefault(key, []).append(_PairRule(hashes, c))

    def __len__(self) -> int:
        return len(self.constraints)

    def __iter__(self) -> Iterator[Constraint]:
        return iter(self.constraints)

    @property
    def has_pairs(self) -> bool:
        """Whether any keep-apart or conflict-pick decision exists (else pair checks are free)."""
        return bool(self._apart or self._picks)

    @property
    def paired_ids(self) -> frozenset[str]:
        """Every memory id named by a keep-apart or conflict-pick decision."""
        return frozenset(m for key in (*self._apart, *self._picks) for m in key)

    def kept(self, memory_id: str) -> Constraint | None:
        """The keep decision holding ``memory_id``, or ``None``."""
        return self._keep.get(memory_id)

    @staticmethod
    def _match(
        rules: list[_PairRule] | None, key: tuple[str, str], a: str, ha: str | None, hb: str | None
    ) -> Constraint | None:
        if not rules:
            return None
        h0, h1 = (ha, hb) if key[0] == a else (hb, ha)
        for r in rules:
            if (h0 is None or h0 == r.hashes[0]) and (h1 is None or h1 == r.hashes[1]):
                return r.constraint
        return None

    def apart(self, a: str, a_hash: str | None, b: str, b_hash: str | None) -> Constraint | None:
        """The keep-apart decision covering memories ``a`` and ``b`` at these content hashes
        (``None`` for a hash: not checked, for a memory that stands for one merged into it),
        or ``None``."""
        key = _pair(a, b)
        return self._match(self._apart.get(key), key, a, a_hash, b_hash)

    def pick(self, a: str, a_hash: str, b: str, b_hash: str) -> Constraint | None:
        """The conflict-pick decision on ``a`` and ``b`` at exactly these hashes, or ``None``."""
        key = _pair(a, b)
        return self._match(self._picks.get(key), key, a, a_hash, b_hash)

    def touching(self, memory_ids: Iterable[str]) -> list[Constraint]:
        """The decisions naming any of ``memory_ids`` (each once, in the order given)."""
        ids = set(memory_ids)
        return [c for c in self.constraints if ids.intersection(c.memory_ids)]

    def to_list(self) -> list[dict[str, Any]]:
        """JSON-ready list of the constraints (:meth:`Constraint.to_dict`)."""
        return [c.to_dict() for c in self.constraints]

    @classmethod
    def from_list(cls, data: Iterable[Mapping[str, Any]] | None) -> StandingDecisions:
        """Inverse of :meth:`to_list`."""
        return cls([Constraint.from_dict(d) for d in data or ()])


def signature(
    *,
    kind: str,
    sources: Iterable[tuple[str, str]],
    removes: Iterable[str] = (),
    result_document: str | None = None,
    result_metadata: Mapping[str, Any] | None = None,
) -> str:
    """The signature of an operation: ``"<kind>:"`` + 32 hex of SHA-256 over what it does.

    Hashed: the kind, the sorted ``(source id, content hash)`` pairs (same memories with the
    same content), the sorted ids it removes (which side of a reconcile goes), the result text
    exactly as written and the result metadata (JSON, sorted keys). So the same operation
    planned again in a later pass — same sources unchanged, same result — has the same
    signature; any edit of a source, another winner or another merged text gives another one.
    Planner metadata is derived from the sources' (:mod:`consolidation.planning.metadata`), so
    it only differs when they do. Compute it from the operation as planned, before a reviewer
    edits its text. Raises ``TypeError`` for metadata JSON cannot hold.
    """
    h = hashlib.sha256()
    h.update(str(getattr(kind, "value", kind)).encode())
    h.update(b"\x00")
    for sid, sh in sorted((str(s), str(x)) for s, x in sources):
        h.update(f"{sid}\x1f{sh}\x1e".encode())
    h.update(b"\x00")
    for rid in sorted(str(r) for r in removes):
        h.update(f"{rid}\x1e".encode())
    h.update(b"\x00")
    if result_document is not None:
        h.update(b"\x01" + result_document.encode())
    h.update(b"\x00")
    if result_metadata is not None:
        h.update(json.dumps(result_metadata, sort_keys=True, ensure_ascii=False).encode())
    return f"{getattr(kind, 'value', kind)}:{h.hexdigest()[:32]}"


def operation_signature(op: Any) -> str:
    """:func:`signature` of an engine :class:`~consolidation.plans.Operation` (or any object
    with ``kind``, ``source_ids``, ``source_hashes``, ``removes``, ``result_document`` and
    ``result_metadata``)."""
    return signature(
        kind=op.kind,
        sources=zip(op.source_ids, op.source_hashes, strict=True),
        removes=op.removes,
        result_document=op.result_document,
        result_metadata=op.result_metadata,
    )
