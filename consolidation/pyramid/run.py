"""The pyramid pass: cluster each scope's memories level by level, match the clusters to the
summaries already in the store, and propose SUMMARIZE operations for what is new or changed."""

from __future__ import annotations

import json
import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import numpy as np

from ..plans import Operation, OpKind
from ..policy import Policy
from ..protocols import JSONWriter, LLMOutputError
from ..records import FieldMap, MemoryRecord
from .abstractive import LEVEL_WORDS, abstractive_summary
from .clusters import cluster_rows
from .extractive import EXTRACTIVE, Draft, extractive_summary
from .layout import (
    CHILDREN_KEY,
    CITATIONS_KEY,
    DIGEST_KEY,
    LEVEL_KEY,
    MAX_LEVEL,
    SUMMARY_LAYER,
    WRITER_KEY,
    children_digest,
    summary_id,
    summary_level,
)

__all__ = ["EXTRACTIVE_RULE", "LLM_RULE", "MATCH_JACCARD", "PyramidResult", "build_pyramid"]

EXTRACTIVE_RULE = "extractive_summary"
LLM_RULE = "llm_summary"
"""``Operation.rule`` of a summary written by the extractive writer / by the LLM."""

MATCH_JACCARD = 0.5
"""A cluster is the same topic as an existing summary of its level and scope when their child
sets overlap by at least this Jaccard index (the pair with the largest overlap first, one summary
per cluster): a topic that gained or lost fewer members than it kept is rewritten in place rather
than summarised twice."""

_EPOCH = datetime.min.replace(tzinfo=UTC)

LEVEL_COUNTS = ("clusters", "new", "rewritten", "unchanged", "deferred", "no_draft", "unmatched")
"""The per-level counts of :attr:`PyramidResult.levels`."""


@dataclass
class PyramidResult:
    """What :func:`build_pyramid` proposed.

    ``operations``: SUMMARIZE operations, scope by scope, level by level. ``levels``: per level,
    ``clusters`` found, ``new`` and ``rewritten`` summaries proposed, ``unchanged`` (a summary
    already in the store says it), ``deferred`` (a child is rewritten by this pass: the summary
    over it waits for the next pass), ``no_draft`` (no text fits the budget while citing two
    children, or the LLM's reply was rejected), ``unmatched`` (summaries of the store no cluster
    matches any more: kept, a reviewer may delete them). ``requests`` and ``tokens``
    (``prompt``/``completion``, estimated) of the LLM writer; ``errors``: one line per rejected
    reply; ``seconds``: ``cluster`` and ``write``.
    """

    operations: list[Operation]
    writer: str
    method: str
    levels: dict[int, dict[str, int]] = field(default_factory=dict)
    requests: int = 0
    tokens: dict[str, int] = field(default_factory=lambda: {"prompt": 0, "completion": 0})
    dropped: dict[str, int] = field(
        default_factory=lambda: {"dropped_unknown_cites": 0, "dropped_over_budget": 0}
    )
    errors: list[str] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=lambda: {"cluster": 0.0, "write": 0.0})

    def count(self, level: int, key: str, n: int = 1) -> None:
        """Add ``n`` to ``levels[level][key]``."""
        row = self.levels.setdefault(level, dict.fromkeys(LEVEL_COUNTS, 0))
        row[key] += n

    def to_context(self) -> dict[str, Any]:
        """JSON-ready telemetry for ``Plan.context["pyramid"]``."""
        return {
            "writer": self.writer,
            "method": self.method,
            "levels": {str(k): dict(v) for k, v in sorted(self.levels.items())},
            "operations": len(self.operations),
            "requests": self.requests,
            "tokens": dict(self.tokens),
            "dropped": dict(self.dropped),
            "errors": list(self.errors),
            "seconds": {k: round(v, 4) for k, v in self.seconds.items()},
        }


def _unit_rows(records: Sequence[MemoryRecord]) -> np.ndarray:
    embs = [r.embedding for r in records if r.embedding is not None]
    if len(embs) < len(records):
        raise ValueError("every memory of a summary level needs an embedding")
    m = np.stack(embs).astype(np.float32)
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    return m / np.where(norms > 0, norms, 1.0)


def _cohesion(rows: np.ndarray) -> float:
    """Mean pairwise cosine of unit ``rows`` (n ≥ 2)."""
    n = len(rows)
    s = rows.sum(axis=0)
    return float((s @ s - n) / (n * (n - 1)))


def _match(
    clusters: list[list[MemoryRecord]], existing: list[MemoryRecord], fm: FieldMap
) -> list[MemoryRecord | None]:
    """For each cluster, the existing summary it continues (:data:`MATCH_JACCARD`), or None."""
    owner: dict[str, list[int]] = {}
    kids = [set(fm.get_list(e.metadata, CHILDREN_KEY)) for e in existing]
    for ei, ks in enumerate(kids):
        for k in ks:
            owner.setdefault(k, []).append(ei)
    pairs: list[tuple[float, int, str, int]] = []
    for ci, cluster in enumerate(clusters):
        ids = {c.id for c in cluster}
        overlap: dict[int, int] = {}
        for cid in ids:
            for ei in owner.get(cid, ()):
                overlap[ei] = overlap.get(ei, 0) + 1
        for ei, both in overlap.items():
            jac = both / len(ids | kids[ei])
            if jac >= MATCH_JACCARD:
                pairs.append((-jac, ci, existing[ei].id, ei))
    pairs.sort()
    out: list[MemoryRecord | None] = [None] * len(clusters)
    taken: set[int] = set()
    for _, ci, _, ei in pairs:
        if out[ci] is None and ei not in taken:
            out[ci] = existing[ei]
            taken.add(ei)
    return out


def _metadata(
    children: list[MemoryRecord],
    draft: Draft,
    level: int,
    digest: str,
    old: MemoryRecord | None,
    fm: FieldMap,
) -> dict[str, Any]:
    """The summary's metadata: the rewritten summary's own (pinned, access counts …) with the
    pyramid's keys set; the children's scope values; ``created_at`` = the latest child's raw
    value (omitted when no child has one). Chroma-valid: no ``None``, lists of strings."""
    meta = {k: v for k, v in (old.metadata if old else {}).items() if not k.startswith("summary_")}
    for k in fm.scope:
        v = children[0].metadata.get(k)
        if v not in (None, ""):
            meta[k] = v
    meta[fm.layer] = SUMMARY_LAYER
    meta[LEVEL_KEY] = level
    meta[CHILDREN_KEY] = [c.id for c in children]
    meta[DIGEST_KEY] = digest
    meta[WRITER_KEY] = draft.writer
    meta[CITATIONS_KEY] = json.dumps([list(c) for c in draft.citations], ensure_ascii=False)
    latest: tuple[datetime, Any] | None = None
    for c in children:
        dt = fm.get_created_at(c.metadata)
        if dt is not None and (latest is None or dt > latest[0]):
            latest = (dt, c.metadata[fm.created_at])
    if latest is not None:
        meta[fm.created_at] = latest[1]
    return meta


def _reason(
    children: list[MemoryRecord],
    draft: Draft,
    level: int,
    cohesion: float,
    old: MemoryRecord | None,
    fm: FieldMap,
) -> str:
    n, k = len(children), len(draft.cited)
    who = "extractive: its most central sentences" if draft.writer == EXTRACTIVE else draft.writer
    text = (
        f"level-{level} summary ({LEVEL_WORDS[level]}) of {n} related memories "
        f"(mean cosine {cohesion:.2f}), {who}, citing {k} of them"
    )
    if old is None:
        return text[0].upper() + text[1:]
    before = set(fm.get_list(old.metadata, CHILDREN_KEY))
    now = {c.id for c in children}
    added, gone = len(now - before), len(before - now)
    change = (
        f"{added} {'child' if added == 1 else 'children'} added, {gone} gone"
        if added or gone
        else "the children's texts changed since it was written"
    )
    return f"Rewrites {old.id} ({change}): {text}"


@dataclass
class _Ctx:
    policy: Policy
    fm: FieldMap
    writer: JSONWriter | None
    method: str
    res: PyramidResult


def _draft(ctx: _Ctx, children: list[MemoryRecord], level: int, label: str) -> Draft | None:
    """The text of one summary, from the LLM writer when there is one, else extractive."""
    budget = ctx.policy.summary_max_chars
    if ctx.writer is None:
        return extractive_summary(children, budget)
    res = ctx.res
    res.requests += 1
    try:
        draft, dropped = abstractive_summary(children, level, budget, ctx.writer)
    except LLMOutputError as exc:
        for k, v in (getattr(exc, "tokens", None) or {}).items():
            res.tokens[k] += v
        res.errors.append(f"{label}: {exc}")
        return None
    for k, v in draft.tokens.items():
        res.tokens[k] += v
    for k, v in dropped.items():
        res.dropped[k] += v
    return draft


def _clusters(ctx: _Ctx, pool: list[MemoryRecord], level: int) -> list[list[MemoryRecord]]:
    policy = ctx.policy
    lo, hi = policy.summary_min_cluster, policy.summary_max_cluster
    if len(pool) < lo:
        return []
    if level == MAX_LEVEL and len(pool) <= hi:
        return [pool]  # the profile: every theme of the scope
    rows = cluster_rows(
        _unit_rows(pool),
        threshold=policy.summary_threshold,
        min_size=lo,
        max_size=hi,
        method=ctx.method,
    )
    return [[pool[i] for i in c] for c in rows]


def _level(
    ctx: _Ctx,
    scope: tuple[str, ...],
    level: int,
    pool: list[MemoryRecord],
    existing: list[MemoryRecord],
    busy: Collection[str],
) -> list[Operation]:
    """SUMMARIZE operations for one scope and level; ``busy``: ids this pass removes or
    rewrites (a cluster holding one waits, except at level 1 where they are left out)."""
    fm, res = ctx.fm, ctx.res
    t0 = time.perf_counter()
    clusters = _clusters(ctx, pool, level)
    matches = _match(clusters, existing, fm)
    res.seconds["cluster"] += time.perf_counter() - t0
    res.count(level, "clusters", len(clusters))
    res.count(level, "unmatched", len(existing) - sum(m is not None for m in matches))
    ops: list[Operation] = []
    t0 = time.perf_counter()
    for cluster, old in zip(clusters, matches, strict=True):
        if any(c.id in busy for c in cluster):
            res.count(level, "deferred")
            continue
        children = sorted(cluster, key=lambda r: (fm.get_created_at(r.metadata) or _EPOCH, r.id))
        ids = [c.id for c in children]
        digest = children_digest((c.id, c.document) for c in children)
        if (
            old is not None
            and set(fm.get_list(old.metadata, CHILDREN_KEY)) == set(ids)
            and old.metadata.get(DIGEST_KEY) == digest
        ):
            res.count(level, "unchanged")
            continue
        sid = old.id if old is not None else summary_id(scope, level, ids)
        draft = _draft(ctx, children, level, f"level {level} summary {sid}")
        if draft is None:
            res.count(level, "no_draft")
            continue
        cohesion = _cohesion(_unit_rows(children))
        sources = children + ([old] if old is not None else [])
        ops.append(
            Operation(
                kind=OpKind.SUMMARIZE,
                source_ids=[s.id for s in sources],
                source_hashes=[s.content_hash for s in sources],
                removes=[],
                reason=_reason(children, draft, level, cohesion, old, fm),
                rule=EXTRACTIVE_RULE if draft.writer == EXTRACTIVE else LLM_RULE,
                scores={
                    "level": level,
                    "children": len(children),
                    "cited": len(draft.cited),
                    "cohesion": round(cohesion, 4),
                    "chars": len(draft.text),
                    "rewrites": old is not None,
                    **({"tokens": dict(draft.tokens)} if draft.tokens else {}),
                },
                result_id=sid,
                result_document=draft.text,
                result_metadata=_metadata(children, draft, level, digest, old, fm),
            )
        )
        res.count(level, "rewritten" if old is not None else "new")
    res.seconds["write"] += time.perf_counter() - t0
    return ops


def build_pyramid(
    records: Sequence[MemoryRecord],
    policy: Policy,
    *,
    fields: FieldMap | None = None,
    writer: JSONWriter | None = None,
    busy: Collection[str] = (),
    checkpoint: Mapping[str, str] | None = None,
    method: str = "average",
) -> PyramidResult:
    """SUMMARIZE operations for the snapshot ``records`` (each with an embedding).

    Per scope (:meth:`FieldMap.scope_key`: a cluster never spans two scopes) and per level
    ``1..policy.summary_levels``: the memories of the level below (level 0: every memory that
    is not a pyramid summary, :func:`~.layout.summary_level`) are clustered
    (:func:`~.clusters.cluster_rows`, ``method``; level 3 takes every level-2 summary of the scope
    as one cluster when they fit ``summary_max_cluster``), each cluster is matched to the
    existing summary of its level it continues (:data:`MATCH_JACCARD`), and

    - a matched summary with the same children and the same texts (its ``summary_digest``) is
      left alone: the same memories give no operation, pass after pass;
    - a matched summary whose children changed is rewritten in place (same id, listed last in
      the sources, so apply archives its previous version and rollback restores it);
    - an unmatched cluster gets a new summary (id :func:`~.layout.summary_id`).

    ``busy``: ids this pass removes or rewrites. They are no level-1 children (they leave the
    store, or change); a higher-level cluster holding a summary this pass rewrites waits for the
    next pass. A level builds only over summaries already in the store, so a pyramid grows one
    level per applied pass. With a ``checkpoint`` (id → content hash of the last applied pass), a
    scope and level whose memories and summaries are all unchanged is not clustered again.

    ``writer``: the LLM (:func:`~.abstractive.abstractive_summary`); ``None`` writes extractive
    summaries (:func:`~.extractive.extractive_summary`). ``LLMUnavailable`` propagates (nothing is
    proposed); a rejected reply is recorded in ``errors`` and the cluster waits for the next pass.
    Raises ``ValueError`` for a record without an embedding or an unknown ``method``.
    """
    fm = fields or FieldMap()
    if any(r.embedding is None for r in records):
        raise ValueError("every memory needs an embedding to be clustered")
    name = EXTRACTIVE if writer is None else str(getattr(writer, "model", "") or "LLM")
    res = PyramidResult(operations=[], writer=name, method=method)
    ctx = _Ctx(policy, fm, writer, method, res)
    scopes: dict[tuple[str, ...], dict[int, list[MemoryRecord]]] = {}
    for r in sorted(records, key=lambda r: r.id):
        if not r.document.strip():
            continue
        lv = summary_level(r.metadata) or 0
        scopes.setdefault(fm.scope_key(r.metadata), {}).setdefault(lv, []).append(r)
    busy = set(busy)
    for scope in sorted(scopes):
        by_level = scopes[scope]
        for level in range(1, policy.summary_levels + 1):
            pool = by_level.get(level - 1, [])
            if level == 1:
                pool = [r for r in pool if r.id not in busy]
            existing = by_level.get(level, [])
            if (
                checkpoint is not None
                and existing
                and all(checkpoint.get(r.id) == r.content_hash for r in [*pool, *existing])
            ):
                continue
            ops = _level(ctx, scope, level, pool, existing, busy)
            res.operations.extend(ops)
            busy.update(op.result_id for op in ops if op.result_id)
    return res
