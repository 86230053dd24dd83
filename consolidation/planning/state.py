"""`PlanState`: the one object the planning stages read and extend, and its `prepare` stage.

Indices (``int``) are positions in the id-sorted snapshot; every per-memory list has length
``n``. Stages (see :mod:`consolidation.planning.engine` for their order) fill the fields below
in turn; none of them touches a store, the network or the wall clock (I-8).

Memory at 1M memories: the planner adds the lists of ids, texts, metadata, fates
and flags (8 bytes a memory each, plus the fates dict), the norms (4 bytes) and the lazy
columns of the memories a stage reads; the embeddings stay the caller's matrix when its rows
are settled unit rows (:mod:`.vectors`), else one normalised copy (1.5 GB at 1M × 384).
Texts that are their own normalised key share their string.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache
from itertools import compress, count, islice, repeat
from operator import attrgetter, eq, is_, ne
from typing import Any, TypeVar, cast, overload

import numpy as np

from ..decisions import StandingDecisions
from ..plans import Fates, Operation
from ..policy import Policy
from ..pyramid.layout import summary_level
from ..records import FieldMap, MemoryRecord
from .constraints import Decided
from .vectors import UnitRows

__all__ = [
    "EPISODIC",
    "SEMANTIC",
    "SUMMARY",
    "Column",
    "PlanState",
    "Timer",
    "Units",
    "prepare",
    "shared_tuple",
    "short",
]

T = TypeVar("T")
_UNSET: Any = object()

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


def equal_runs(codes: np.ndarray) -> tuple[np.ndarray, list[tuple[int, int]]]:
    """Group equal values of ``codes`` (``(k,) int64`` hashes) by one stable sort: returns the
    sort order and the ``(start, stop)`` spans, into that order, of every run of ≥ 2 equal
    values. Callers check each run's members exactly (a hash collision must never decide)."""
    order = np.argsort(codes, kind="stable")
    h = codes[order]
    cut = np.flatnonzero(np.diff(h)) + 1
    starts, stops = np.concatenate(([0], cut)), np.concatenate((cut, [len(h)]))
    multi = stops - starts >= 2
    return order, list(zip(starts[multi].tolist(), stops[multi].tolist(), strict=True))


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


class Column(Sequence[T]):
    """A per-memory column computed on first use: ``col[i]`` is ``compute(i)``, computed once.

    A stage reads the columns (tier, layer, scope, sessions …) of the memories it looks at
    only: an incremental pass reads those of its new memories and the few they meet, not the
    whole store's (one pass over 1M metadata dicts costs seconds). Iterating computes all.
    """

    __slots__ = ("_compute", "_values")

    def __init__(self, n: int, compute: Callable[[int], T]) -> None:
        self._values: list[Any] = [_UNSET] * n
        self._compute = compute

    @overload
    def __getitem__(self, i: int) -> T: ...
    @overload
    def __getitem__(self, i: slice) -> list[T]: ...
    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self._values)))]
        v = self._values[i]
        if v is _UNSET:
            v = self._values[i] = self._compute(i)
        return v

    def __len__(self) -> int:
        return len(self._values)


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
    snapshot columns ``ids``/``docs``/``metas``/``hashes``/``scopes``/``layers``, ``emb``
    (:class:`~.vectors.UnitRows`: ``emb[i]`` is the L2-normalised ``(384,) float32`` row,
    ``emb.matrix()`` the ``(n, 384)`` matrix), ``protected`` (pinned, curated, or a summary of
    the memory pyramid: its children are its meaning, it is rewritten by its own operation),
    ``is_new`` / ``new_idx`` (not in the checkpoint), ``incremental`` (a checkpoint was given)
    and ``partial`` (only some records are new: only new × store pairs are searched).
    Outputs: ``fates``, ``removed`` and the operation lists (``ops_conflict``: contradictions
    for a reviewer); telemetry in ``candidates`` and ``contra_stats``. The rest is working
    state of the stages that fill it (similarities, keys, groups, units). Columns derived
    from metadata are :class:`Column` (lazy); ``ids``, ``docs``, ``metas``, ``is_new`` and
    ``removed`` are lists.
    """

    policy: Policy
    fm: FieldMap
    now: datetime
    candidate_method: str
    ids: list[str]
    docs: list[str]
    metas: list[Mapping[str, Any]]
    hashes: Sequence[str]
    emb: UnitRows
    protected: Sequence[bool]
    is_new: list[bool]
    new_idx: np.ndarray
    incremental: bool
    partial: bool
    timer: Timer
    fates: Fates
    removed: list[bool]
    layers: Sequence[frozenset[str]]
    ops_reconcile: list[Operation] = field(default_factory=list)
    ops_merge: list[Operation] = field(default_factory=list)
    ops_promote: list[Operation] = field(default_factory=list)
    ops_prune: list[Operation] = field(default_factory=list)
    ops_conflict: list[Operation] = field(default_factory=list)
    scopes: Sequence[tuple[str, ...]] = field(default_factory=list)
    """:meth:`FieldMap.scope_key` of each memory: memories of different scopes are never
    compared (no merge, reconcile, fold or window across them)."""
    held: set[int] = field(default_factory=set)
    """Memories in a ``conflict`` item: kept as they are until a reviewer decides."""
    decided: Decided = field(default_factory=lambda: Decided(None, [], [], lambda i: []))
    """The standing decisions bound to this snapshot (:mod:`.constraints`): what reviewers
    decided earlier, checked at every join, reconcile and removal."""
    candidates: dict[str, int] = field(default_factory=dict)
    bounds: dict[str, int] = field(default_factory=dict)
    """Each stage's bound on its pairs or work (name → limit), reported in the plan."""
    bounds_hit: dict[str, dict[str, int]] = field(default_factory=dict)
    """The bounds a stage reached (name → figures): what it could not judge was left as is."""
    templates: Any = None
    """Template groups (:class:`~.templates.Templates`): texts that differ only in numbers."""
    features: Any = None
    """The caller's :class:`~.features.FeatureCache` (per-memory features kept between
    passes), or ``None``: each feature is then computed where it is read."""
    rows: Any = None
    """The caller's :class:`~.rowcache.RowCache` (the stored rows' bounding rows kept between
    passes), or ``None``: an incremental search then reads every stored vector."""
    kept: Any = None
    """This pass's :class:`~.rowcache.KeptRows` from ``rows`` (set by the candidate search of
    an incremental pass), or ``None``."""
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
    eligible: Sequence[bool] = field(default_factory=list)
    group_of: dict[int, list[int]] = field(default_factory=dict)
    merged_text: dict[int, str] = field(default_factory=dict)
    units: Units = field(default_factory=lambda: Units(0))
    speakers: Sequence[list[str]] = field(default_factory=list)
    labels: Sequence[str | None] = field(default_factory=list)
    sessions: Sequence[tuple[str, ...]] = field(default_factory=list)
    order: Sequence[tuple[Any, ...]] = field(default_factory=list)

    @property
    def n(self) -> int:
        """Number of memories in the snapshot."""
        return len(self.ids)

    def new_and_partners(self) -> list[int]:
        """The new rows and every row in a searched pair, ascending: what a partial
        incremental pass looks at beyond the embedding search."""
        return sorted(set(self.new_idx.tolist()) | set(self.pi.tolist()) | set(self.pj.tolist()))

    @property
    def new_rows(self) -> Sequence[int]:
        """Indices of the new memories, ascending: the only ones a stage prunes, promotes,
        folds or windows (all of them unless the pass is partial)."""
        return self.new_idx.tolist() if self.partial else range(self.n)


@lru_cache(maxsize=1024)
def _layer_set(values: tuple[str, ...]) -> frozenset[str]:
    """One frozenset object per distinct layer list (an empty frozenset is 216 bytes, not a
    singleton: 0.2 GB at 1M memories without a layer)."""
    return frozenset(values)


@lru_cache(maxsize=4096)
def shared_tuple(value: tuple[str, ...]) -> tuple[str, ...]:
    """One object per distinct tuple (scopes, sessions: most memories of a store share a few)."""
    return value


def prepare(
    records: Sequence[MemoryRecord],
    policy: Policy,
    fm: FieldMap,
    *,
    now: datetime,
    checkpoint: Mapping[str, str] | None,
    candidate_method: str,
    decisions: StandingDecisions | None = None,
    features: Any = None,
    rows: Any = None,
) -> PlanState:
    """Stage ``prepare``: validate, sort by id (input order never matters), embeddings as
    :class:`~.vectors.UnitRows` (norms only; no normalised copy yet).

    ``now`` must be aware (the caller makes a naive one UTC). Raises ``ValueError`` for a
    duplicate id or a record without an embedding (naming the id). Per-record work is what
    every later stage needs: ids, texts, metadata, the embeddings' norms and, for a checkpoint,
    each content hash (cached on the record); the other columns are lazy (:class:`Column`).
    ``decisions`` are bound to the snapshot (:class:`~.constraints.Decided`; nothing is read
    per memory until a stage asks about one). ``features``: a
    :class:`~.features.FeatureCache` or ``None`` (kept as ``PlanState.features``); ``rows``
    a :class:`~.rowcache.RowCache` or ``None`` (``PlanState.rows``).
    """
    timer = Timer()
    recs = sorted(records, key=attrgetter("id"))
    n = len(recs)
    ids = [r.id for r in recs]
    # sorted: a duplicate id is next to its twin (C-level maps: a third of a Python loop's time)
    twin = next(compress(count(), map(eq, ids, islice(ids, 1, None))), None)
    if twin is not None:
        raise ValueError(f"duplicate memory id {ids[twin]!r}")
    embs = [r.embedding for r in recs]
    missing = next(compress(count(), map(is_, embs, repeat(None))), None)
    if missing is not None:
        r = recs[missing]
        raise ValueError(f"memory {r.id!r} has no embedding; embed it before planning")
    metas: list[Mapping[str, Any]] = [r.metadata for r in recs]
    hashes: Sequence[str]
    if checkpoint is None:
        is_new = [True] * n
        hashes = Column(n, lambda i: recs[i].content_hash)
    else:
        hashes = list(map(attrgetter("content_hash"), recs))
        # map over C-level callables: a third of a list comprehension's time at 1M
        is_new = list(map(ne, map(checkpoint.get, ids), hashes))
    new_idx = np.flatnonzero(np.array(is_new, dtype=bool)).astype(np.int64)
    incremental = checkpoint is not None
    curated = policy.curated_tier
    decided = Decided(decisions, ids, hashes, lambda i: fm.get_list(metas[i], fm.merged_from))
    return PlanState(
        policy=policy,
        fm=fm,
        now=now,
        candidate_method=candidate_method,
        ids=ids,
        docs=[r.document for r in recs],
        metas=metas,
        hashes=hashes,
        emb=UnitRows(cast("list[np.ndarray]", embs)),  # none is None: checked above
        protected=Column(
            n,
            lambda i: (
                fm.is_pinned(metas[i])
                or fm.get_tier(metas[i]) == curated
                or summary_level(metas[i]) is not None
            ),
        ),
        is_new=is_new,
        new_idx=new_idx,
        incremental=incremental,
        # only some records are new: search new × store; the rest of the pairs are unknown
        partial=incremental and len(new_idx) < n,
        timer=timer,
        fates=Fates(ids),
        removed=[False] * n,
        layers=Column(n, lambda i: _layer_set(tuple(fm.get_list(metas[i], fm.layer)))),
        scopes=Column(n, lambda i: shared_tuple(fm.scope_key(metas[i]))),
        decided=decided,
        features=features,
        rows=rows,
    )
