"""Test helper: a proposed pass built row by row, as ``services.pass_run`` stores one.

The proposal page reads only our models, so these tests need no store. ``make_proposal`` writes
``merges`` merges of two sources each, ``prunes`` prunes and ``reconciles`` reconciles over a
snapshot of ``entries_before`` memories.
"""

from __future__ import annotations

from typing import Any

from consolidation import content_hash, merged_id
from memoryadmin.proposals.models import Operation, OperationSource, Pass


def _source(op: Operation, pos: int, mid: str, doc: str, removed: bool) -> None:
    meta = {"created_at": "2026-10-01T00:00:00+00:00", "importance": 0.5}
    OperationSource.objects.create(
        operation=op,
        position=pos,
        memory_id=mid,
        document=doc,
        metadata=meta,
        content_hash=content_hash(doc, meta),
        removed=removed,
    )


def make_proposal(
    agent: Any,
    *,
    entries_before: int = 20,
    merges: int = 2,
    prunes: int = 0,
    reconciles: int = 0,
    text: str = "Caroline moved to Boston",
    status: str = "proposed",
    max_loss_fraction: float = 0.25,
) -> Pass:
    """A pass of ``agent`` in ``status`` with the given operations (summary left to review)."""
    run = Pass.objects.create(
        agent=agent,
        trigger="operator",
        status=status,
        entries_before=entries_before,
        max_loss_fraction=max_loss_fraction,
        policy={},
    )
    index = 0
    for i in range(merges):
        ids = [f"m{i}-a", f"m{i}-b"]
        docs = [f"{text} ({i}a)", f"{text} ({i}b)"]
        op = Operation.objects.create(
            run=run,
            index=index,
            kind="merge",
            rule="near_duplicate",
            reason="near-duplicates",
            scores={"min_cosine": 0.93, "pairwise": [[1.0, 0.931], [0.931, 1.0]]},
            source_ids=ids,
            removes=ids,
            result_id=merged_id(ids, [content_hash(d, {}) for d in docs]),
            result_document=f"{text} (merged {i})",
            planned_document=f"{text} (merged {i})",
            result_metadata={"merged_from": ids},
        )
        for pos, (mid, doc) in enumerate(zip(ids, docs, strict=True)):
            _source(op, pos, mid, doc, True)
        index += 1
    for i in range(prunes):
        op = Operation.objects.create(
            run=run,
            index=index,
            kind="prune",
            rule="decay",
            reason="decayed below threshold",
            scores={"score": 0.012, "age_days": 120},
            source_ids=[f"p{i}"],
            removes=[f"p{i}"],
        )
        _source(op, 0, f"p{i}", f"old note {i}", True)
        index += 1
    for i in range(reconciles):
        ids = [f"r{i}-new", f"r{i}-old"]
        op = Operation.objects.create(
            run=run,
            index=index,
            kind="reconcile",
            rule="changed_value",
            reason="newer statement wins: the value changed",
            source_ids=ids,
            removes=[ids[1]],
        )
        _source(op, 0, ids[0], f"Jon lives in Paris now ({i})", False)
        _source(op, 1, ids[1], f"Jon lives in Rome ({i})", True)
        index += 1
    from memoryadmin.proposals.services.evaluation import pass_store_figures
    from memoryadmin.proposals.services.review import pass_score_operations

    pass_score_operations(run=run)
    pass_store_figures(run=run)  # the pass's figures, kept once (Pass.figures)
    run.refresh_from_db()
    return run
