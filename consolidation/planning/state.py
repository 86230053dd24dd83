"""`PlanState`: the one object the planning stages read and extend, and its `prepare` stage.

Indices (``int``) are positions in the id-sorted snapshot; every per-memory list has length
``n``. Stages (see :mod:`consolidation.planning.engine` for their order) fill the fields below
in turn; none of them touches a store, the network or the wall clock (I-8).
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np

from ..plans import Fate, Operation
from ..policy import Policy
from ..records import FieldMap, MemoryRecord
from .candidates import normalize_rows

__all__ = ["EPISODIC", "SEMANTIC", "SUMMARY", "PlanState", "Timer", "Units", "prepare", "short"]

EPISODIC, SEMANTIC, SUMMARY = "episodic", "semantic", "summary"
"""``layer`` values (FieldMap ``layer`` key): dialog turns/events, facts, session summaries."""

_DIGITS = re.compile(r"(\d+)")


def natural(s: str) -> tuple[tuple[int, Any], ...]:
    """Natural sort key: ``"D1:2" < "D1:10"`` (digit runs compare as numbers)."""
    return tuple((0, int(p)) if p.isdigit() else (1, p) for p in _DIGITS.split(s) if p)


def short(text: str, n: int = 80) -> str:
    """``text`` on one line, cut to ``n`` characters with an ellipsis (for reasons)."""
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


class Timer:
    """Lap timer: ``lap(name)`` stores the seconds since the previous lap in ``timings``."""

    def __init__(self) -> None:
        self.timings: dict[str, float] = {}
        self._t = time.perf_counter()

    def lap(self, name: str) -> None:
        """Record the seconds (6 decimals) spent since the previous lap under ``name``."""
        t = time.perf_counter()
        self.timings[name] = round(t - self._t, 6)
        self._t = t


class Units:
    """Merge units under construction: member indices, merged text and rule (None = dup group)."""

    def __init__(self, n: int) -> None:
        self.members: list[list[int]] = []
        self.text: list[str] = []
        self.rule: list[str | None] = []
        self.alive: list[bool] = []
        self.of: dict[int, int] = {}

    def add(self, members: list[int], text: str, rule: str | None) -> int:
        """A new unit of ``members`` with merged ``text``; returns its number."""
        u = len(self.members)
        self.members.append(list(members))
        self.text.append(text)
        self.rule.append(rule)
        self.alive.append(True)
        for k in members:
            self.of[k] = u
        return u

    def extend(self, u: int, more: list[int], text: str, rule: str) -> None:
        """Add ``more`` members to unit ``u``, replacing its text and rule."""
        self.members[u].extend(more)
        self.text[u] = text
        self.rule[u] = rule
        for k in more:
            self.of[k] = u

    def drop(self, u: int) -> None:
        """Retire unit ``u`` (its members belong to no unit any more)."""
        self.alive[u] = False
        for k in self.members[u]:
            if self.of.get(k) == u:
                del self.of[k]

    def live(self) -> list[int]:
        """Numbers of the units not dropped, in creation order."""
        return [u for u in range(len(self.members)) if self.alive[u]]


@dataclass
class PlanState:
    """Everything the planning stages share.

    Inputs (set by :func:`prepare`): ``policy``, ``fm``, ``now``, ``candidate_method``, the
    snapshot columns ``ids``/``docs``/``metas``/``hashes``/``scopes``, ``emb``
    (``(n, 384) float32``, L2-normalised rows), ``protected`` (pinned or curated),
    ``is_new`` / ``new_idx`` (not in the checkpoint), ``incremental`` (a checkpoint was given)
    and ``partial`` (only some records are new: only new × store pairs are searched).
    Outputs: ``fates``, ``removed`` and the operation lists (``ops_conflict``: contradictions
    for a reviewer); telemetry in ``candidates`` and ``contra_stats``. The rest is working
    state of the stages that fill it (similarities, keys, groups, units).
    """

    policy: Policy
    fm: FieldMap
    now: datetime
    candidate_method: str
    ids: list[str]
    docs: list[str]
    metas: list[Mapping[str, Any]]
    hashes: list[str]
    emb: np.ndarray
    protected: list[bool]
    is_new: list[bool]
    new_idx: np.ndarray
    incremental: bool
    partial: bool
    timer: Timer
    fates: dict[str, Fate]
    removed: list[bool]
    layers: list[frozenset[str]]
    ops_reconcile: list[Operation] = field(default_factory=list)
    ops_merge: list[Operation] = field(default_factory=list)
    ops_promote: list[Operation] = field(default_factory=list)
    ops_prune: list[Operation] = field(default_factory=list)
    ops_conflict: list[Operation] = field(default_factory=list)
    scopes: list[tuple[str, ...]] = field(default_factory=list)
    """:meth:`FieldMap.scope_key` of each memory: memories of different scopes are never
    compared (no merge, reconcile, fold or window across them)."""
    held: set[int] = field(default_factory=set)
    """Memories in a ``conflict`` item: kept as they are until a reviewer decides."""
    candidates: dict[str, int] = field(default_factory=dict)
    contra_stats: dict[str, Any] = field(
        default_factory=lambda: {
            "checked": 0,
            "found": {},
            "reconciled": 0,
            "unsure": 0,
            "blocked_protected": 0,
        }
    )
    decayed: dict[int, tuple[float, float]] = field(default_factory=dict)
    """Decayed memories without an explicit importance: ``{index: (score, age_days)}``."""
    pi: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    pj: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    sim: dict[tuple[int, int], float] = field(default_factory=dict)
    keys: list[str | None] = field(default_factory=list)
    exact_edges: list[tuple[int, int]] = field(default_factory=list)
    contra: dict[tuple[int, int], Any] = field(default_factory=dict)
    winners: set[int] = field(default_factory=set)
    eligible: list[bool] = field(default_factory=list)
    group_of: dict[int, list[int]] = field(default_factory=dict)
    merged_text: dict[int, str] = field(default_factory=dict)
    units: Units = field(default_factory=lambda: Units(0))
    speakers: list[list[str]] = field(default_factory=list)
    labels: list[str | None] = field(default_factory=list)
    sessions: list[tuple[str, ...]] = field(default_factory=list)
    order: list[tuple[Any, ...]] = field(default_factory=list)

    @property
    def n(self) -> int:
        """Number of memories in the snapshot."""
        return len(self.ids)


def prepare(
    records: Sequence[MemoryRecord],
    policy: Policy,
    fm: FieldMap,
    *,
    now: datetime,
    checkpoint: Mapping[str, str] | None,
    candidate_method: str,
) -> PlanState:
    """Stage ``prepare``: validate, sort by id (input order never matters), normalise embeddings.

    ``now`` must be aware (the caller makes a naive one UTC). Raises ``ValueError`` for a
    duplicate id or a record without an embedding (naming the id).
    """
    timer = Timer()
    recs = sorted(records, key=lambda r: r.id)
    n = len(recs)
    for a, b in zip(recs, recs[1:], strict=False):
        if a.id == b.id:
            raise ValueError(f"duplicate memory id {a.id!r}")
    for r in recs:
        if r.embedding is None:
            raise ValueError(f"memory {r.id!r} has no embedding; embed it before planning")
    ids = [r.id for r in recs]
    metas = [r.metadata for r in recs]
    hashes = [r.content_hash for r in recs]
    emb = (
        normalize_rows(
            np.stack([r.embedding for r in recs]).astype(np.float32, copy=False), copy=False
        )
        if n
        else np.zeros((0, 384), np.float32)
    )
    protected = [fm.is_pinned(m) or fm.get_tier(m) == policy.curated_tier for m in metas]
    if checkpoint is None:
        is_new = [True] * n
    else:
        is_new = [checkpoint.get(i) != h for i, h in zip(ids, hashes, strict=True)]
    new_idx = np.array([i for i in range(n) if is_new[i]], dtype=np.int64)
    incremental = checkpoint is not None
    return PlanState(
        policy=policy,
        fm=fm,
        now=now,
        candidate_method=candidate_method,
        ids=ids,
        docs=[r.document for r in recs],
        metas=metas,
        hashes=hashes,
        emb=emb,
        protected=protected,
        is_new=is_new,
        new_idx=new_idx,
        incremental=incremental,
        # only some records are new: search new × store; the rest of the pairs are unknown
        partial=incremental and len(new_idx) < n,
        timer=timer,
        fates=dict.fromkeys(ids, Fate.KEPT),
        removed=[False] * n,
        layers=[frozenset(fm.get_list(m, fm.layer)) for m in metas],
        scopes=[fm.scope_key(m) for m in metas],
    )
