"""Recall check: does a store still answer the agent's probe queries?

Pure (numpy only). Definitions:

- **Answer recall@k**: the fraction of probes for which at least half of the answer's *content
  words* appear in the texts of the top-k memories retrieved for the question. Content words are
  the lowercased alphanumeric tokens of the answer minus :data:`STOPWORDS`; numbers are kept.
  "Appear" means the word is one of the tokens of the concatenated top-k texts (whole-word match,
  so "art" does not hit "party").
- **Retrieval**: cosine top-k of the question embedding against the ``(n, 384) float32`` matrix
  of L2-normalised memory embeddings (so cosine = dot product); ties are broken by store order,
  which keeps the figures deterministic.
- **Context size**: mean over probes of the total characters of the top-k texts (what an agent
  pays in prompt tokens to read its memory).
- **Evidence recall@k** (secondary): for probes with evidence ids, the mean fraction of those ids
  found in the ``evidence`` metadata of the retrieved memories, counting only turns and
  observations: a memory whose ``layer`` is ``"summary"`` is not counted, because a session
  summary covers a whole session and would make any summary-only store look perfect.

:func:`simulate_after` builds the store as it would be after a plan (merged memories with their new
text and a fresh embedding, removed ones gone, promoted metadata updated) so a pass can show recall
before and after without writing anything. :func:`recall_guard` is the policy's
``min_recall_retention`` check.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .plans import Operation, Plan
from .protocols import Embedder
from .records import EMBEDDING_DIM, FieldMap, MemoryRecord

__all__ = [
    "STOPWORDS",
    "Probe",
    "RecallReport",
    "answer_hit",
    "content_words",
    "evaluate_recall",
    "recall_guard",
    "recall_hold_reason",
    "recall_holds",
    "simulate_after",
    "top_k_indices",
]

_STOPWORDS_TEXT = """
    a about above after again against all am an and any are aren as at be because been before
    being below between both but by can could couldn d did didn do does doesn doing don
    down during each few for from further had hadn has hasn have haven having he her here hers
    herself him himself his how i if in into is isn it its itself just ll m ma me mightn more most
    mustn my myself needn no nor not now o of off on once only or other our ours ourselves out
    over own re s same shan she should shouldn so some such t than that the their theirs them
    themselves then there these they this those through to too under until up ve very was wasn
    we were weren what when where which while who whom why will with won would wouldn y you your
    yours yourself yourselves
"""
STOPWORDS: frozenset[str] = frozenset(_STOPWORDS_TEXT.split())
"""English stopwords: NLTK's ``stopwords.words("english")`` list (179 entries), with its
contraction forms reduced to the tokens :func:`content_words` produces ("don't" → "don", "t"),
which leaves 154 unique words. Fixed here so the figures never depend on an installed corpus."""

_TOKEN = re.compile(r"[^\W_]+", re.UNICODE)
_SUMMARY_LAYER = "summary"


def _tokens(text: str) -> list[str]:
    return _TOKEN.findall(text.lower())


def content_words(text: str) -> list[str]:
    """Content words of ``text``: lowercased alphanumeric tokens minus :data:`STOPWORDS`,
    unique, in first-seen order. Numbers are kept ("2022", "7"). Non-str input is ``str()``-ed
    (LoCoMo has integer answers)."""
    seen: dict[str, None] = {}
    for tok in _tokens(str(text)):
        if tok not in STOPWORDS:
            seen.setdefault(tok, None)
    return list(seen)


def answer_hit(answer: str, texts: Iterable[str]) -> bool | None:
    """True when at least half of ``answer``'s content words are tokens of the joined ``texts``.

    An answer made only of stopwords ("no") falls back to all its tokens; an answer with no token
    at all returns ``None`` (not scorable; left out of the recall denominator).
    """
    words = content_words(answer) or list(dict.fromkeys(_tokens(str(answer))))
    if not words:
        return None
    vocab = set(_tokens(" ".join(texts)))
    found = sum(1 for w in words if w in vocab)
    return found * 2 >= len(words)


def top_k_indices(matrix: np.ndarray, queries: np.ndarray, k: int) -> np.ndarray:
    """Row indices of the ``k`` memories most cosine-similar to each query.

    ``matrix``: ``(n, d) float32`` L2-normalised memory embeddings; ``queries``: ``(m, d)``
    L2-normalised. Returns ``(m, min(k, n)) int64``, best first; ties by ascending row index.
    Raises ``ValueError`` on a dimension mismatch or ``k < 1``.
    """
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k!r}")
    matrix = np.asarray(matrix, dtype=np.float32)
    queries = np.atleast_2d(np.asarray(queries, dtype=np.float32))
    n = matrix.shape[0] if matrix.ndim == 2 else 0
    if n == 0:
        return np.zeros((queries.shape[0], 0), dtype=np.int64)
    if matrix.shape[1] != queries.shape[1]:
        raise ValueError(f"dimension mismatch: memories {matrix.shape}, queries {queries.shape}")
    kk = min(k, n)
    out = np.empty((queries.shape[0], kk), dtype=np.int64)
    # Blocks of queries keep the (block, n) score matrix small on big stores.
    block = max(1, 4_000_000 // max(n, 1))
    for start in range(0, queries.shape[0], block):
        scores = queries[start : start + block] @ matrix.T
        for row, s in enumerate(scores):
            # Stable sort on -score: equal scores keep store order (determinism).
            out[start + row] = np.argsort(-s, kind="stable")[:kk]
    return out


@dataclass(frozen=True)
class Probe:
    """A recall probe: ``question``, expected ``answer``, optional ``evidence`` ids (LoCoMo
    dia_ids such as ``"D1:3"``) and ``category`` (LoCoMo QA category 1–4, informational)."""

    question: str
    answer: str
    evidence: tuple[str, ...] = ()
    category: int | None = None
    key: str = ""


@dataclass
class RecallReport:
    """Recall figures for one store.

    - ``k``: retrieval depth; ``entries``: memories in the store; ``probes``: scorable probes.
    - ``answer_recall``: answer recall@k in [0, 1] (``None`` when no probe is scorable).
    - ``context_chars``: mean total characters of the top-k texts per probe (characters).
    - ``evidence_recall``: evidence recall@k in [0, 1] over ``evidence_probes`` probes that have
      evidence ids (``None`` when there are none).
    - ``hits``: per-probe answer hit (``None`` = not scorable), in probe order.
    """

    k: int
    entries: int
    probes: int
    answer_recall: float | None
    context_chars: float
    evidence_recall: float | None
    evidence_probes: int
    hits: list[bool | None] = field(default_factory=list)

    def to_dict(self, *, include_hits: bool = False) -> dict[str, Any]:
        """JSON-ready dict (``hits`` only when asked: it grows with the probe set)."""
        d: dict[str, Any] = {
            "k": self.k,
            "entries": self.entries,
            "probes": self.probes,
            "answer_recall": self.answer_recall,
            "context_chars": self.context_chars,
            "evidence_recall": self.evidence_recall,
            "evidence_probes": self.evidence_probes,
        }
        if include_hits:
            d["hits"] = list(self.hits)
        return d


def _as_probe(p: Probe | Any) -> Probe:
    if isinstance(p, Probe):
        return p
    if isinstance(p, dict):
        return Probe(
            question=str(p["question"]),
            answer=str(p["answer"]),
            evidence=tuple(str(e) for e in p.get("evidence") or p.get("evidence_ids") or ()),
            category=p.get("category"),
        )
    return Probe(
        question=str(p.question),
        answer=str(p.answer),
        evidence=tuple(str(e) for e in (getattr(p, "evidence_ids", None) or ())),
        category=getattr(p, "category", None),
    )


def _matrix(records: Sequence[MemoryRecord], embedder: Embedder | None) -> np.ndarray:
    missing = [i for i, r in enumerate(records) if r.embedding is None]
    mat = np.zeros((len(records), EMBEDDING_DIM), dtype=np.float32)
    for i, r in enumerate(records):
        if r.embedding is not None:
            mat[i] = r.embedding
    if missing:
        if embedder is None:
            raise ValueError(
                f"{len(missing)} memories have no embedding and no embedder was given "
                f"(first: {records[missing[0]].id!r})"
            )
        mat[missing] = embedder.embed([records[i].document for i in missing])
    return mat


def evaluate_recall(
    records: Sequence[MemoryRecord],
    probes: Sequence[Probe | Any],
    *,
    k: int = 10,
    embedder: Embedder | None = None,
    query_embeddings: np.ndarray | None = None,
    fieldmap: FieldMap | None = None,
    context_budget: int | None = None,
) -> RecallReport:
    """Answer recall@k, context size and evidence recall@k of ``records`` on ``probes``.

    ``context_budget`` (characters) restricts retrieval to what an agent with that much room in
    its prompt reads: of the top-k ranking, the memories in rank order whose texts still fit
    (one that does not fit is skipped, a shorter one after it may fit), so ``context_chars`` is
    at most the budget. ``None`` reads the whole top-k.

    ``probes`` are :class:`Probe`, dicts with question/answer/evidence, or objects with
    ``question``/``answer``/``evidence_ids`` (the console's ``ProbeQuery``). Question embeddings
    come from ``query_embeddings`` (``(len(probes), 384) float32``; pass them to evaluate
    before/after stores on identical queries) or from ``embedder``. Records without an embedding
    are embedded with ``embedder``. Raises ``ValueError`` when an embedding is needed and no
    embedder is given, or when ``k < 1``.
    """
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k!r}")
    if context_budget is not None and (
        isinstance(context_budget, bool)
        or not isinstance(context_budget, int)
        or context_budget < 1
    ):
        raise ValueError(
            f"context_budget must be a positive number of characters, got {context_budget!r}"
        )
    fm = fieldmap or FieldMap()
    ps = [_as_probe(p) for p in probes]
    if not ps:
        return RecallReport(k, len(records), 0, None, 0.0, None, 0, [])
    if query_embeddings is None:
        if embedder is None:
            raise ValueError("question embeddings need an embedder or query_embeddings")
        query_embeddings = embedder.embed([p.question for p in ps])
    q = np.asarray(query_embeddings, dtype=np.float32)
    if q.shape[0] != len(ps):
        raise ValueError(f"{q.shape[0]} query embeddings for {len(ps)} probes")
    idx = top_k_indices(_matrix(records, embedder), q, k)

    evidence_sets: list[set[str] | None] = []
    for r in records:
        layers = fm.get_list(r.metadata, fm.layer)
        evidence_sets.append(
            None if _SUMMARY_LAYER in layers else set(fm.get_list(r.metadata, fm.evidence))
        )

    hits: list[bool | None] = []
    chars: list[int] = []
    ev_scores: list[float] = []
    for p, row in zip(ps, idx, strict=True):
        if context_budget is not None:
            row = _within(records, row, context_budget)
        texts = [records[i].document for i in row]
        chars.append(sum(len(t) for t in texts))
        hits.append(answer_hit(p.answer, texts))
        if p.evidence:
            covered: set[str] = set()
            for i in row:
                s = evidence_sets[i]
                if s:
                    covered |= s
            want = set(p.evidence)
            ev_scores.append(len(want & covered) / len(want))
    scored = [h for h in hits if h is not None]
    return RecallReport(
        k=k,
        entries=len(records),
        probes=len(scored),
        answer_recall=(sum(scored) / len(scored)) if scored else None,
        context_chars=float(np.mean(chars)) if chars else 0.0,
        evidence_recall=(sum(ev_scores) / len(ev_scores)) if ev_scores else None,
        evidence_probes=len(ev_scores),
        hits=hits,
    )


def _within(records: Sequence[MemoryRecord], row: np.ndarray, budget: int) -> list[int]:
    """The indices of ``row`` (rank order) whose texts fit in ``budget`` characters, greedily."""
    out, used = [], 0
    for i in row.tolist():
        size = len(records[i].document)
        if used + size <= budget:
            out.append(i)
            used += size
    return out


def simulate_after(
    records: Sequence[MemoryRecord],
    plan: Plan | Iterable[Operation],
    embedder: Embedder | None,
) -> list[MemoryRecord]:
    """The store as it would be after applying ``plan`` (nothing is written).

    Removed ids (``op.removes``) disappear; each operation's result record (merge/distill: a new
    memory; promote: the same id with new metadata) is written. A result whose text equals the
    live text of the same id, or of one of the operation's sources (the text a merge kept),
    keeps that record's embedding (the same text has the same embedding); any new text gets a
    fresh embedding from ``embedder`` (one batch). Order: surviving records in store order,
    then new records in plan order. ``plan`` may be a :class:`Plan` or the operations actually
    included (review). Raises ``ValueError`` when a new text needs embedding and ``embedder``
    is ``None``.
    """
    ops = plan.operations if isinstance(plan, Plan) else list(plan)
    by_id: dict[str, MemoryRecord] = {r.id: r for r in records}
    removed: set[str] = set()
    results: dict[str, tuple[str, dict[str, Any]]] = {}
    # result id → {text: embedding} of its operation's sources, for a result that keeps one
    same_text: dict[str, dict[str, np.ndarray]] = {}
    for op in ops:
        removed.update(op.removes)
        if op.result_id:
            same_text[op.result_id] = {
                src.document: e
                for sid in reversed(op.source_ids)
                if (src := by_id.get(sid)) is not None and (e := src.embedding) is not None
            }
            base = by_id.get(op.result_id)
            doc = (
                op.result_document
                if op.result_document is not None
                else (base.document if base else "")
            )
            meta = (
                op.result_metadata
                if op.result_metadata is not None
                else (base.metadata if base else {})
            )
            results[op.result_id] = (doc, dict(meta))
            removed.discard(op.result_id)

    to_embed: list[str] = []
    fresh: dict[str, np.ndarray] = {}
    for rid, (doc, _meta) in results.items():
        base = by_id.get(rid)
        if base is None or base.embedding is None or base.document != doc:
            kept = same_text.get(rid, {}).get(doc)
            if kept is not None:
                fresh[rid] = np.asarray(kept, dtype=np.float32)
            else:
                to_embed.append(rid)
    if to_embed:
        if embedder is None:
            raise ValueError(f"{len(to_embed)} new texts need embedding and no embedder was given")
        vecs = embedder.embed([results[rid][0] for rid in to_embed])
        fresh.update(
            (rid, np.asarray(v, dtype=np.float32)) for rid, v in zip(to_embed, vecs, strict=True)
        )

    out: list[MemoryRecord] = []
    for r in records:
        if r.id in removed:
            continue
        if r.id in results:
            doc, meta = results[r.id]
            out.append(MemoryRecord(r.id, doc, fresh.get(r.id, r.embedding), meta))
        else:
            out.append(r)
    for rid, (doc, meta) in results.items():
        if rid not in by_id:
            out.append(MemoryRecord(rid, doc, fresh[rid], meta))
    return out


def recall_guard(
    before: float | None, after: float | None, min_recall_retention: float | None
) -> tuple[bool, float | None, str]:
    """The policy's recall guard: ``(passed, ratio, reason)``.

    ``ratio = after / before`` (answer recall@k). Passes when ``min_recall_retention`` is
    ``None`` (disabled), when there is nothing to measure (no scorable probe, or a baseline of
    0), or when ``ratio >= min_recall_retention``. Fail-closed: a threshold that is not a number
    in [0, 1] raises ``ValueError``. The reason carries the figures.
    """
    if min_recall_retention is None:
        return True, _ratio(before, after), "recall guard disabled (min_recall_retention is empty)"
    if (
        isinstance(min_recall_retention, bool)
        or not isinstance(min_recall_retention, int | float)
        or not math.isfinite(min_recall_retention)
        or not 0 <= min_recall_retention <= 1
    ):
        raise ValueError(f"min_recall_retention must be in [0, 1], got {min_recall_retention!r}")
    if before is None or after is None:
        return True, None, "no scorable probe queries: recall not measured"
    if before <= 0:
        return True, None, f"baseline answer recall is {before:.3f}: nothing to retain"
    ratio = after / before
    if ratio + 1e-12 < min_recall_retention:
        return (
            False,
            ratio,
            f"answer recall would fall from {before:.3f} to {after:.3f} "
            f"({ratio:.1%} retained < minimum {min_recall_retention:.1%})",
        )
    return (
        True,
        ratio,
        f"answer recall {before:.3f} → {after:.3f} ({ratio:.1%} retained ≥ "
        f"minimum {min_recall_retention:.1%})",
    )


def _ratio(before: float | None, after: float | None) -> float | None:
    if before is None or after is None or before <= 0:
        return None
    return after / before


class _Memo:
    """An embedder that remembers what it embedded (the rounds of :func:`recall_holds` embed
    the same merged texts again)."""

    def __init__(self, inner: Embedder | None) -> None:
        self.inner = inner
        self.dim = inner.dim if inner is not None else EMBEDDING_DIM
        self.seen: dict[str, np.ndarray] = {}

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        todo = list(dict.fromkeys(t for t in texts if t not in self.seen))
        if todo:
            if self.inner is None:
                raise ValueError(f"{len(todo)} new texts need embedding and no embedder was given")
            for t, v in zip(todo, self.inner.embed(todo), strict=True):
                self.seen[t] = np.asarray(v, dtype=np.float32)
        return np.stack([self.seen[t] for t in texts]) if texts else np.zeros((0, EMBEDDING_DIM))


def recall_holds(
    records: Sequence[MemoryRecord],
    operations: Sequence[Operation],
    probes: Sequence[Probe | Any],
    *,
    k: int = 10,
    embedder: Embedder | None = None,
    query_embeddings: np.ndarray | None = None,
    fieldmap: FieldMap | None = None,
    rounds: int = 3,
) -> dict[int, list[int]]:
    """Which of ``operations`` cost a probe its answer: ``{operation index: [probe index, …]}``.

    A probe is lost when it is answered by ``records`` (answer recall@k, :func:`answer_hit`)
    and not by the store after the operations (:func:`simulate_after`). It is blamed on the
    operations that took one of its answering memories (a memory of its top-k before whose
    text holds an answer content word) as a source; when none did, on the operations whose
    result entered its top-k after (they pushed the answer out). The blamed operations are left
    out and the rest measured again, up to ``rounds`` times, so what is left loses no probe
    the rounds could find (operations interact: a merge that was harmless beside another can
    cost a probe once the other is held). Pure: nothing is written; new texts are embedded
    once with ``embedder``. Raises as :func:`evaluate_recall`.
    """
    ps = [_as_probe(p) for p in probes]
    if not ps or not operations:
        return {}
    memo = _Memo(embedder)
    if query_embeddings is None:
        query_embeddings = memo.embed([p.question for p in ps])
    q = np.asarray(query_embeddings, dtype=np.float32)
    before = evaluate_recall(records, ps, k=k, embedder=memo, query_embeddings=q, fieldmap=fieldmap)
    top_before = top_k_indices(_matrix(records, memo), q, k)
    held: dict[int, list[int]] = {}
    for _ in range(max(1, rounds)):
        kept = [i for i in range(len(operations)) if i not in held]
        after_records = simulate_after(records, [operations[i] for i in kept], memo)
        after = evaluate_recall(
            after_records, ps, k=k, embedder=memo, query_embeddings=q, fieldmap=fieldmap
        )
        lost = [j for j, (hb, ha) in enumerate(zip(before.hits, after.hits, strict=True)) if hb]
        lost = [j for j in lost if not after.hits[j]]
        if not lost:
            break
        top_after = top_k_indices(_matrix(after_records, memo), q, k)
        blamed = _blame(records, after_records, operations, kept, ps, lost, top_before, top_after)
        if not blamed:
            break
        for i, js in blamed.items():
            held.setdefault(i, []).extend(js)
    return held


def _blame(
    records: Sequence[MemoryRecord],
    after_records: Sequence[MemoryRecord],
    operations: Sequence[Operation],
    kept: list[int],
    probes: list[Probe],
    lost: list[int],
    top_before: np.ndarray,
    top_after: np.ndarray,
) -> dict[int, list[int]]:
    """``{operation index: [lost probe index, …]}`` for one round of :func:`recall_holds`."""
    by_source: dict[str, list[int]] = {}
    by_result: dict[str, list[int]] = {}
    for i in kept:
        op = operations[i]
        for sid in op.source_ids:
            by_source.setdefault(sid, []).append(i)
        if op.result_id:
            by_result.setdefault(op.result_id, []).append(i)
    out: dict[int, list[int]] = {}
    for j in lost:
        words = set(content_words(probes[j].answer))
        holders = [
            records[r].id
            for r in top_before[j].tolist()
            if not words or words & set(_tokens(records[r].document))
        ]
        culprits = {i for rid in holders for i in by_source.get(rid, ())}
        if not culprits:
            culprits = {
                i for r in top_after[j].tolist() for i in by_result.get(after_records[r].id, ())
            }
        for i in culprits:
            out.setdefault(i, []).append(j)
    return out


def recall_hold_reason(probes: Sequence[Probe | Any], lost: Sequence[int]) -> str:
    """The sentence shown on an operation :func:`recall_holds` held: the probes it costs
    (``lost``: indices into ``probes``; the first one quoted, numbered from 1)."""
    first = _as_probe(probes[lost[0]])
    more = len(set(lost)) - 1
    return f"costs probe query {lost[0] + 1} its answer: {first.question[:100]!r}" + (
        f" (and {more} more)" if more else ""
    )
