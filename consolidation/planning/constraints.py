"""Standing decisions inside a pass: the checks the stages make, and what they held back.

:class:`Decided` binds :class:`~consolidation.decisions.StandingDecisions` to one snapshot
(positions in the id-sorted :class:`~.state.PlanState`). The stages ask it at three kinds of
point, each a dict lookup:

- a join — :func:`held_apart` in :func:`~.grouping.linked` (merges of exact and near
  duplicates) and :func:`~.grouping.conflicts` (evidence folds, session and semantic windows):
  a kept-apart pair, a pair with a conflict pick, or a pair with a kept memory is never joined;
- a reconcile — :meth:`Decided.pick` (the reviewer's pick decides the winner) and
  :func:`held_apart` (a kept-apart pair is neither reconciled nor offered as a conflict);
- a removal — :func:`held_kept` before a prune or a supersede removes a kept memory.

Each check runs only after the stage's own rules said yes, so what is recorded is what the
decision changed. Records go to ``plan.context`` (:meth:`Decided.telemetry`):

- ``held_back``: at most :data:`HELD_BACK_LIMIT` entries ``{"decision", "kind",
  "memory_ids", "would_have", "reason"}`` — ``would_have`` is ``"merge"``, ``"evidence_fold"``,
  ``"session_window"``, ``"semantic_window"``, ``"reconcile"``, ``"conflict"`` or ``"prune"``;
  one entry per decision, memories and ``would_have`` (a keep that held back a prune or a
  reconcile lists the kept memory, one that held back a join the pair; a pair decision the two
  memories as they are now);
- ``held_back_count``: all entries, listed or not; ``held_back_by_decision``: ``{decision id
  (as a string): entries}``; ``held_back_keys``: ``{decision id: [key]}``, one 16-hex key per
  entry (:func:`held_key`: what it would have done to which memories), so the console counts a
  re-planned operation once across passes ("held back N later operations");
- ``decided``: ``{decision id: operations}`` of the reconciles a conflict pick decided.
"""

from __future__ import annotations

import hashlib
from typing import Any, Protocol

from ..decisions import Constraint, StandingDecisions


class PlanState(Protocol):
    """What the stages' checks read of :class:`~.state.PlanState` (its bound decisions); a
    protocol, so this module does not import the state that imports it."""

    decided: Decided


__all__ = ["HELD_BACK_LIMIT", "Decided", "held_apart", "held_key", "held_kept"]


def held_key(memory_ids: list[str], would_have: str) -> str:
    """16 hex of SHA-256 over what a decision held back (``would_have`` on the sorted
    ``memory_ids``): the same operation planned again by a later pass has the same key."""
    text = "\x1f".join([would_have, *sorted(memory_ids)])
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


HELD_BACK_LIMIT = 200
"""Most ``held_back`` entries a plan lists (the count says how many there were): a page of a
proposal shows them all, and a plan of 1M memories stays a plan, not a log."""


class Decided:
    """:class:`~consolidation.decisions.StandingDecisions` bound to one snapshot.

    ``ids``/``hashes``/``merged_from`` are the snapshot's columns (``merged_from(i)``: the ids
    memory ``i`` was merged from). Nothing is computed per memory up front: a memory's
    *identity* — the decided ids it stands for, its own (at its hash) and those it was merged
    from (hash unknown) — is a lazy column, read only for the pairs a stage asks about.
    """

    def __init__(
        self,
        decisions: StandingDecisions | None,
        ids: list[str],
        hashes: Any,
        merged_from: Any,
    ) -> None:
        self.decisions = decisions or StandingDecisions()
        self.ids, self.hashes = ids, hashes
        self.active = len(self.decisions) > 0
        self.pairs = self.decisions.has_pairs
        named = self.decisions.paired_ids if self.pairs else frozenset()

        self._named = named
        self._merged_from = merged_from
        self._identity: dict[int, tuple[tuple[str, str | None], ...]] = {}
        self._held: dict[tuple[Any, ...], dict[str, Any]] = {}
        self._by_decision: dict[str, int] = {}
        self._keys: dict[str, list[str]] = {}
        self.decided: dict[str, int] = {}

    def identity(self, i: int) -> tuple[tuple[str, str | None], ...]:
        """The decided ``(id, hash)`` memory ``i`` stands for: its own at its hash, and those
        it was merged from with hash ``None`` (unknown); ``()`` for most memories."""
        got = self._identity.get(i)
        if got is None:
            mid, named = self.ids[i], self._named
            own = ((mid, self.hashes[i]),) if mid in named else ()
            inherited = tuple((m, None) for m in self._merged_from(i) if m in named and m != mid)
            got = self._identity[i] = own + inherited
        return got

    def kept(self, i: int) -> Constraint | None:
        """The keep decision on memory ``i``, or ``None``."""
        return self.decisions.kept(self.ids[i]) if self.active else None

    def _pair(self, a: int, b: int, lookup: str) -> Constraint | None:
        ia, ib = self.identity(a), self.identity(b)
        if not ia or not ib:
            return None
        find = getattr(self.decisions, lookup)
        for x, hx in ia:
            for y, hy in ib:
                if x != y and (c := find(x, hx, y, hy)) is not None:
                    return c
        return None

    def apart(self, a: int, b: int) -> Constraint | None:
        """The keep-apart decision on memories ``a`` and ``b`` (or on what they were merged
        from), or ``None``."""
        return self._pair(a, b, "apart") if self.pairs else None

    def pick(self, a: int, b: int) -> tuple[Constraint, int] | None:
        """``(decision, index of the memory kept)`` when a conflict pick covers ``a`` and ``b``
        at their current hashes, else ``None``."""
        if not self.pairs or not self.identity(a) or not self.identity(b):
            return None
        c = self.decisions.pick(self.ids[a], self.hashes[a], self.ids[b], self.hashes[b])
        if c is None:
            return None
        return c, (a if c.keep == self.ids[a] else b)

    def hold(self, c: Constraint, members: list[int], would_have: str, reason: str) -> None:
        """Record that decision ``c`` held back ``would_have`` on ``members`` (deduplicated)."""
        mids = sorted(self.ids[k] for k in members)
        key = (str(c.decision), tuple(mids), would_have)
        if key in self._held:
            return
        self._held[key] = {
            "decision": c.decision,
            "kind": c.kind.value,
            "memory_ids": mids,
            "would_have": would_have,
            "reason": f"left out by {c.label}: {reason}",
        }
        d = str(c.decision)
        self._by_decision[d] = self._by_decision.get(d, 0) + 1
        self._keys.setdefault(d, []).append(held_key(mids, would_have))

    def telemetry(self) -> dict[str, Any]:
        """The plan's ``context`` entries (see the module docstring); ``{}`` without
        decisions."""
        if not self.active:
            return {}
        entries = list(self._held.values())
        return {
            "held_back": entries[:HELD_BACK_LIMIT],
            "held_back_count": len(entries),
            "held_back_by_decision": dict(self._by_decision),
            "held_back_keys": {d: list(keys) for d, keys in self._keys.items()},
            "decided": dict(self.decided),
            "decisions": len(self.decisions),
        }


_JOIN_TEXT = {
    "merge": "would have merged them",
    "evidence_fold": "would have folded one into the other",
    "session_window": "would have merged them into one session window",
    "semantic_window": "would have merged them into one semantic window",
    "reconcile": "would have superseded one by the other",
    "conflict": "would have asked again which one to keep",
}


def held_apart(st: PlanState, a: int, b: int, would_have: str) -> bool:
    """Whether a decision forbids joining memories ``a`` and ``b`` in ``would_have`` (a join
    the stage's own rules allow): kept apart, a conflict pick on the pair (a pick settles a
    contradiction: never merged), or either memory kept (a join removes both). Records it."""
    d = st.decided
    if not d.active:
        return False
    c = d.apart(a, b)
    if c is None and (p := d.pick(a, b)) is not None and would_have != "reconcile":
        c = p[0]
    if c is not None:
        d.hold(c, [a, b], would_have, _JOIN_TEXT.get(would_have, would_have))
        return True
    if would_have in ("reconcile", "conflict"):
        return False  # a reconcile removes one side only: held_kept() decides
    for k in (a, b):
        if (c := d.kept(k)) is not None:  # both are listed: the kept one and what it joins
            kept = f"{_JOIN_TEXT.get(would_have, would_have)}, removing the kept {d.ids[k]}"
            d.hold(c, [a, b], would_have, kept)
            return True
    return False


def held_kept(st: PlanState, i: int, would_have: str, why: str = "") -> bool:
    """Whether a keep decision forbids removing memory ``i`` by ``would_have`` (``"prune"``,
    ``"reconcile"``); records it with ``why`` (the rule that fired)."""
    d = st.decided
    if not d.active:
        return False
    c = d.kept(i)
    if c is None:
        return False
    d.hold(c, [i], would_have, f"would have removed it ({why or would_have})")
    return True
