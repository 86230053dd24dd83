"""The one snapshot path of a pass: read the store, embed what is missing, plan with the checkpoint.

:func:`plan_snapshot` is what every caller runs — the console's pass (``services.pass_run``),
``manage.py consolidate --dry-run`` (the same pass with its writes switched off) and the
:class:`~consolidation.consolidator.Consolidator` — so a preview plans exactly what the pass
will propose:

1. read every memory (:func:`read_all`: the store's own page iterator, or PraisonAI's
   ``get_all_memories()``);
2. embed the memories stored without an embedding (:func:`embed_missing`; stored embeddings are
   reused, never recomputed);
3. plan (:func:`consolidation.planning.plan`) with the checkpoint, so only new or changed
   memories are searched, and with the agent's standing decisions
   (:mod:`consolidation.decisions`);
4. with an LLM ``writer``: when the policy asks for it (``llm_judge``), send the pairs the
   rules left unsure to the model (:func:`consolidation.llm_judge.judge_unsure`), then add
   DISTILL operations (:func:`consolidation.distill.distill`) for the episodic memories no
   live memory was derived from yet — each within its own time budget, and neither can cost
   the pass: whatever the endpoint does, the offline operations are proposed and every group
   or pair not done is recorded with its reason (``plan.context["llm"]``, :func:`llm_figures`);
5. with ``policy.summarize``, add SUMMARIZE operations (the memory pyramid,
   :func:`consolidation.pyramid.build_pyramid`) over the memories the plan keeps (an endpoint
   that does not answer costs the summaries, recorded in ``plan.context["pyramid"]``, never
   the pass);
6. leave out the operations whose result text the store says it cannot write
   (``store.unwritable(texts)``, when the store has it: :func:`consolidation.plans.leave_out`);
   the exact copies among a left-out merge's sources still merge, keeping one copy's text and
   stored vector (:func:`consolidation.copies.leave_out_keeping_copies`).

Pure apart from the store, embedder and writer it is handed (I-8: ``now`` is passed in).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

import numpy as np

from .copies import leave_out_keeping_copies
from .decisions import StandingDecisions
from .distill import distill
from .llm_cost import llm_cost_usd
from .llm_judge import VerdictCache, judge_unsure
from .planning import FeatureCache, RowCache
from .planning import plan as make_plan
from .planning.operations import trim_to_guard
from .plans import Fate, Plan, summarize
from .policy import Policy
from .protocols import Embedder, JSONWriter, LLMUnavailable, MemoryStore
from .pyramid import build_pyramid
from .records import FieldMap, MemoryRecord

__all__ = [
    "Progress",
    "Snapshot",
    "embed_missing",
    "in_layer",
    "llm_brief",
    "llm_figures",
    "plan_snapshot",
    "read_all",
    "records_from_memory",
]

Progress = Callable[[float, str], None]
"""``progress(fraction, label)``: ``fraction`` in [0, 1] of :func:`plan_snapshot`'s work."""


def _quiet(fraction: float, label: str) -> None:
    return None


@dataclass
class Snapshot:
    """What a pass planned over: ``records`` (every memory, each with a ``(384,) float32``
    embedding) and the ``plan`` made from them."""

    records: list[MemoryRecord]
    plan: Plan


def read_all(
    store: MemoryStore, *, include_embeddings: bool = True, progress: Progress | None = None
) -> list[MemoryRecord]:
    """Every memory of ``store``, read with its own page iterator (the adapter's page size, at
    most 5,000 rows: docs/ARCHITECTURE.md "Chroma facts") — the one whole-store read loop.
    ``progress`` (when given) gets the fraction read, from ``store.count()``."""
    total = max(1, store.count()) if progress is not None else 1
    out: list[MemoryRecord] = []
    for page in store.iter_pages(include_embeddings=include_embeddings):
        out.extend(page)
        if progress is not None:
            progress(
                min(1.0, len(out) / total), f"Reading the store: {len(out):,} of {total:,} memories"
            )
    return out


def embed_missing(records: Sequence[MemoryRecord], embedder: Embedder | None) -> list[MemoryRecord]:
    """``records`` with every embedding present: the ones stored without one are embedded with
    ``embedder``. Raises ``ValueError`` naming the first such memory when ``embedder`` is
    ``None``."""
    missing = [i for i, r in enumerate(records) if r.embedding is None]
    out = list(records)
    if not missing:
        return out
    if embedder is None:
        raise ValueError(
            f"memory {records[missing[0]].id!r} has no embedding; it needs an embedder: pass "
            "one, e.g. consolidation.adapters.get_default_embedder()"
        )
    vectors = embedder.embed([records[i].document for i in missing])
    for i, vec in zip(missing, vectors, strict=True):
        out[i] = records[i].with_embedding(vec)
    return out


_TEXT_KEYS = ("text", "memory", "content", "document")


def _record_from_dict(item: Mapping[str, Any], position: int) -> MemoryRecord:
    if not isinstance(item, Mapping):
        raise ValueError(f"get_all_memories() item {position} is not a dict: {item!r}")
    mid = item.get("id")
    if mid is None or mid == "":
        raise ValueError(f"get_all_memories() item {position} has no id")
    text = next((item[k] for k in _TEXT_KEYS if isinstance(item.get(k), str)), None)
    if text is None:
        raise ValueError(f"memory {mid!r} has no text/memory/content string")
    meta = item.get("metadata") or {}
    if not isinstance(meta, Mapping):
        raise ValueError(f"memory {mid!r}: metadata must be a dict")
    emb = item.get("embedding")
    return MemoryRecord(str(mid), text, None if emb is None else np.asarray(emb), dict(meta))


def records_from_memory(memory: Any, *, progress: Progress | None = None) -> list[MemoryRecord]:
    """Snapshot of ``memory`` as records (embeddings as stored, possibly ``None``).

    Accepts a :class:`MemoryStore` (read with :func:`read_all`) or any object with PraisonAI's
    ``get_all_memories()`` returning dicts with ``id``, ``text``/``memory``/``content`` and
    ``metadata`` (an ``embedding`` key is reused). Raises ``TypeError`` for anything else and
    ``ValueError`` for malformed items.
    """
    if isinstance(memory, MemoryStore):
        return read_all(memory, progress=progress)
    getter = getattr(memory, "get_all_memories", None)
    if callable(getter):
        return [_record_from_dict(item, i) for i, item in enumerate(getter() or [])]
    raise TypeError(
        "memory must implement MemoryStore (count/iter_pages/get) or have get_all_memories(), "
        f"got {type(memory).__name__}"
    )


def in_layer(record: MemoryRecord, layer: str, fieldmap: FieldMap) -> bool:
    """Whether ``record`` belongs to memory ``layer`` (FieldMap ``layer`` key, a scalar or list).

    A memory without a layer counts as ``"semantic"``: stores such as mem0's hold facts and
    write no layer, and seed 003's ``compact(layer=SEMANTIC)`` is the fact tier.
    """
    layers = fieldmap.get_list(record.metadata, fieldmap.layer)
    return layer in layers or (not layers and layer == "semantic")


def plan_snapshot(
    memory: Any,
    policy: Policy,
    *,
    now: datetime,
    fieldmap: FieldMap | None = None,
    embedder: Embedder | None = None,
    checkpoint: Mapping[str, str] | None = None,
    writer: JSONWriter | None = None,
    progress: Progress | None = None,
    layer: str | None = None,
    decisions: StandingDecisions | None = None,
    verdict_cache: VerdictCache | None = None,
    features: FeatureCache | None = None,
    rows: RowCache | None = None,
) -> Snapshot:
    """Read ``memory``, embed what is missing, plan with ``checkpoint`` — the pass's snapshot.

    - ``memory``: a :class:`MemoryStore`, or an object with PraisonAI's ``get_all_memories()``
      (see :func:`records_from_memory`).
    - ``checkpoint``: memory id → content hash of what the last applied pass saw; ``None`` or
      empty plans the whole store (never consolidated).
    - ``writer``: an LLM writer; when given, DISTILL operations are added, with
      ``policy.llm_judge`` the unsure pairs are judged first, and with ``policy.summarize`` it
      writes the summaries unless ``policy.summary_writer`` is ``"extractive"`` (network use
      is the caller's choice: no writer, no network, I-8). ``policy`` gives their budgets,
      group size, reply limit and context length.
    - ``progress``: ``progress(fraction, label)`` as the work advances (per distilled group).
    - ``verdict_cache``: where the LLM judge keeps its answers between passes.
    - ``features``: the per-memory features kept between passes over this store
      (:class:`~consolidation.planning.FeatureCache`; the plan is the same without it, an
      incremental pass reads no stored text again with it).
    - ``rows``: the stored rows' bounding rows kept between passes over this store
      (:class:`~consolidation.planning.RowCache`; the plan is the same without it, an
      incremental pass reads no stored vector for its search with it).
    - ``layer``: plan only the memories of this layer (:func:`in_layer`; seed 003's
      ``compact(layer=...)``): the others are not read into the snapshot, so they are neither
      compared nor touched, and the loss fraction is over the layer's memories.
    - ``decisions``: the agent's standing decisions
      (:class:`~consolidation.decisions.StandingDecisions`), planned with (what they held back
      is in ``plan.context["held_back"]``).

    Raises ``TypeError``/``ValueError`` for an unusable ``memory``, ``ValueError`` when a memory
    has no embedding and no ``embedder`` was given, or when ``policy.summary_writer`` is
    ``"llm"`` and no ``writer`` is given, and whatever the store raises when it cannot be read.
    Nothing the LLM endpoint does raises: it is recorded in ``plan.context["llm"]`` (and
    ``plan.context["pyramid"]``).
    """
    progress = progress or _quiet
    fieldmap = fieldmap or FieldMap()
    if policy.summarize and policy.summary_writer == "llm" and writer is None:
        raise ValueError(
            'summary_writer is "llm" but no LLM endpoint is configured: set one, or choose '
            '"auto" or "extractive"'
        )
    records = records_from_memory(memory, progress=lambda f, label: progress(0.5 * f, label))
    if layer is not None:
        records = [r for r in records if in_layer(r, layer, fieldmap)]
    if any(r.embedding is None for r in records):
        n = sum(r.embedding is None for r in records)
        progress(0.55, f"Embedding {n:,} memories without embeddings")
    records = embed_missing(records, embedder)
    progress(0.6, f"Planning over {len(records):,} memories")
    unwritable = getattr(memory, "unwritable", None)
    # A store that may refuse new texts is trimmed to the guard after the leave-out: a merge
    # trimmed first could not give up its exact copies, which always fit (copies.py).
    trim_late = callable(unwritable) and policy.trim_to_guard
    the_plan = make_plan(
        records,
        replace(policy, trim_to_guard=False) if trim_late else policy,
        now=now,
        fieldmap=fieldmap,
        checkpoint=dict(checkpoint or {}) or None,
        decisions=decisions,
        features=features,
        rows=rows,
    )
    if writer is not None:
        _add_llm_work(records, the_plan, writer, policy, fieldmap, progress, verdict_cache)
    if policy.summarize:
        progress(0.95, "Summarising clusters of related memories")
        pyramid_writer = None if policy.summary_writer == "extractive" else writer
        _add_summaries(records, the_plan, policy, pyramid_writer, fieldmap, checkpoint)
    texts = [op.result_document for op in the_plan.operations if op.result_document is not None]
    if callable(unwritable) and texts:
        the_plan = leave_out_keeping_copies(
            the_plan, unwritable(texts), records, policy, fieldmap, unwritable
        )
    if trim_late:
        _trim(the_plan, len(records), policy.max_loss_fraction)
    progress(1.0, f"Planned {len(the_plan.operations):,} operations")
    return Snapshot(records, the_plan)


def _trim(the_plan: Plan, n: int, max_loss: float) -> None:
    """The planner's budget stage (:func:`~consolidation.planning.operations.trim_to_guard`) on
    ``the_plan`` as it stands, in place: its result recomputed over ``n`` memories and
    ``context["trimmed"]`` set when something was deferred."""
    ops, trimmed = trim_to_guard(the_plan.operations, n, max_loss, the_plan.fates)
    the_plan.operations = ops
    context = the_plan.context
    result = summarize(n, ops)
    context["operations"] = result.context["operations"]
    context["loss_fraction"] = result.loss_fraction
    result.context = context
    the_plan.result = result
    if trimmed is not None:
        context["trimmed"] = trimmed


def llm_figures(context: dict[str, Any]) -> dict[str, Any]:
    """``plan.context["llm"]`` with its ``totals`` (requests, failed, tokens in and out,
    seconds over the judge and the distillation) computed: what a proposal shows and what a
    cost report reads. Shape: ``{"model", "totals", "judge"?, "distill"?}`` (see
    :meth:`consolidation.distill.Ledger.to_context` and
    :func:`consolidation.llm_judge.judge_unsure`)."""
    llm = context.setdefault("llm", {})
    keys = ("requests", "failed", "tokens_in", "tokens_out", "seconds")
    totals: dict[str, float] = dict.fromkeys(keys, 0)
    for part in ("judge", "distill"):
        for k in keys:
            totals[k] += (llm.get(part) or {}).get(k, 0)
    totals["seconds"] = round(float(totals["seconds"]), 2)
    llm["totals"] = totals
    return llm


def llm_brief(
    context: Mapping[str, Any] | None, prices: Mapping[str, Mapping[str, float]] | None = None
) -> dict[str, Any] | None:
    """What a person reads of a pass's model work: ``{"model", "totals", "judge", "distill",
    "cost_usd"}`` where ``judge``/``distill`` are each part's one sentence (``None`` when the
    part did not run) and ``cost_usd`` the totals at the model's price in ``prices``
    (:func:`consolidation.llm_cost.llm_cost_usd`; ``None`` without a price), from
    ``plan.context`` (or a pass's stored telemetry) after :func:`llm_figures`; ``None`` when the
    pass sent nothing to a model. The per-group and per-pair logs stay in the full figures."""
    llm = (context or {}).get("llm") or {}
    if not (llm.get("judge") or llm.get("distill")):
        return None
    totals = dict(llm.get("totals") or {})
    return {
        "model": llm.get("model", ""),
        "totals": totals,
        "judge": (llm.get("judge") or {}).get("summary"),
        "distill": (llm.get("distill") or {}).get("summary"),
        "cost_usd": llm_cost_usd(totals, llm.get("model", ""), prices or {}),
    }


def _add_llm_work(
    records: list[MemoryRecord],
    the_plan: Plan,
    writer: JSONWriter,
    policy: Policy,
    fieldmap: FieldMap,
    progress: Progress,
    cache: VerdictCache | None,
) -> None:
    """The LLM steps of a pass, in place: the judge (when ``policy.llm_judge``), then the
    distillation (additions only: the loss is unchanged). Episodic memories already distilled
    are skipped: the checkpoint is every id named in a live memory's ``derived_from``."""
    model = str(getattr(writer, "model", "") or "LLM")
    the_plan.context["llm"] = {"model": model}
    if policy.llm_judge:
        progress(0.72, f"Judging unsure pairs with {model}")
        the_plan.context["llm"]["judge"] = judge_unsure(
            the_plan,
            records,
            writer,
            policy=policy,
            fieldmap=fieldmap,
            cache=cache,
            progress=lambda done, total, label: progress(
                0.72 + 0.08 * done / max(1, total), f"{label}: {done} of {total}"
            ),
        )
    progress(0.8, f"Distilling episodic memories with {model}")
    done = {i for r in records for i in fieldmap.get_list(r.metadata, "derived_from")}
    res = distill(
        records,
        writer,
        policy=policy,
        fields=fieldmap,
        checkpoint=done,
        progress=lambda n, total, label: progress(
            0.8 + 0.15 * n / max(1, total), f"{label} ({n} of {total} groups)"
        ),
    )
    the_plan.context["llm"]["distill"] = res.to_context()
    llm_figures(the_plan.context)
    the_plan.operations.extend(res.operations)
    _resummarize(the_plan, len(records))


def _resummarize(the_plan: Plan, entries_before: int) -> None:
    """``the_plan.result`` recomputed after the LLM steps changed its operations; the plan's
    telemetry (``context``) stays the result's context, with its counts brought up to date."""
    result = summarize(entries_before, the_plan.operations)
    ctx = the_plan.context
    ctx["operations"] = result.context["operations"]
    ctx["reconciled"] = result.context["reconciled"]
    ctx["conflicts"] = result.context["operations"].get("conflict", 0)
    ctx["loss_fraction"] = result.loss_fraction
    result.context = ctx
    the_plan.result = result


def _add_summaries(
    records: list[MemoryRecord],
    the_plan: Plan,
    policy: Policy,
    writer: JSONWriter | None,
    fieldmap: FieldMap,
    checkpoint: Mapping[str, str] | None,
) -> None:
    """``the_plan`` plus SUMMARIZE operations, in place (additions and rewrites of summaries
    only: the loss is unchanged). Memories the plan removes are no children; a summary over one
    the plan rewrites waits for the next pass. An LLM endpoint that does not answer costs the
    summaries of this pass only: recorded as ``plan.context["pyramid"]["error"]``."""
    busy = {rid for rid, fate in the_plan.fates.items() if fate != Fate.KEPT}
    busy.update(op.result_id for op in the_plan.operations if op.result_id)
    try:
        res = build_pyramid(
            records,
            policy,
            fields=fieldmap,
            writer=writer,
            busy=busy,
            checkpoint=dict(checkpoint) if checkpoint else None,
        )
    except LLMUnavailable as exc:
        the_plan.context["pyramid"] = {"error": str(exc)[:500], "operations": 0}
        return
    the_plan.context["pyramid"] = res.to_context()
    if res.operations:
        the_plan.operations.extend(res.operations)
        _resummarize(the_plan, len(records))
