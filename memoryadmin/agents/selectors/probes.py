"""Reads of the probe queries: a page of them, the recall check of a pass, and recall figures of
a live store.

Definitions are the engine's (:mod:`consolidation.recall`): answer recall@k over the agent's
probe queries, context size (mean characters of the top-k texts) and evidence recall@k. A pass
computes them on its snapshot and on the store as it would be after its plan
(:func:`recall_check`); the policy's ``min_recall_retention`` rejects a pass whose after/before
ratio falls below it, like the loss guard.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from django.core.paginator import Page, Paginator

from consolidation import MemoryRecord, Operation, Plan, Policy
from consolidation.recall import (
    Probe,
    RecallReport,
    evaluate_recall,
    recall_guard,
    recall_hold_reason,
    recall_holds,
    simulate_after,
)
from consolidation.snapshot import read_all
from memoryadmin.agents.models import Agent
from memoryadmin.core import stores
from memoryadmin.proposals.models import Pass

if TYPE_CHECKING:
    from consolidation.protocols import Embedder

__all__ = [
    "PROBE_PAGE_SIZE",
    "agent_probes",
    "probe_page",
    "probe_set_digest",
    "read_records",
    "recall_check",
    "recall_drift",
    "recall_drift_shown",
    "recall_evaluate",
    "recall_held",
]

MAX_LOST_LISTED = 50
"""At most this many lost probes are listed on a pass (the count is always complete)."""


def _embedder(embedder: Embedder | None) -> Embedder:
    if embedder is not None:
        return embedder
    from consolidation.adapters.embedder import get_default_embedder

    return get_default_embedder()


def agent_probes(agent: Agent) -> list[Probe]:
    """The agent's probe queries as engine :class:`Probe` objects (``key`` = the row's pk)."""
    return [
        Probe(
            question=p.question,
            answer=p.answer,
            evidence=tuple(str(e) for e in (p.evidence_ids or [])),
            category=p.category,
            key=str(p.pk),
        )
        for p in agent.probes.order_by("id")
    ]


def probe_set_digest(probes: Sequence[Probe]) -> str:
    """SHA-256 (hex) of the probe set: each probe's key, question and answer. Two recall
    figures are comparable only when measured on the same set (:func:`recall_drift`)."""
    rows = [[p.key, p.question, p.answer] for p in probes]
    return hashlib.sha256(json.dumps(rows, ensure_ascii=False).encode()).hexdigest()


DRIFT_LOOKBACK = 200
"""At most this many of the agent's latest applied passes are read by :func:`recall_drift`."""


def recall_drift(agent: Agent, probe_set: str) -> dict[str, Any]:
    """What the passes auto-apply ``all`` applied since a person last approved one did to answer
    recall: ``{"retention": product of their after/before answer-recall ratios (1.0 for
    none), "passes": [their ids, newest first], "since": the person-approved pass the run
    stops at, or None}``.

    Walks the agent's applied (or approved, applying) passes newest first and stops at one a
    person approved, at one measured on another probe set (``probe_set``:
    :func:`probe_set_digest`; passes stored before the set was recorded count as another set)
    or after :data:`DRIFT_LOOKBACK`. Each pass keeps its own recall guard (after/before ≥
    ``min_recall_retention``), so a run of passes each losing just under 1 % would otherwise
    lose 5 % in five nights unseen. A pass auto-apply ``safe`` applied counts 1.0: it holds
    every operation that costs a probe its answer for review (``recall_held``), so it loses no
    answer of this set unattended. Rolled-back passes are not counted."""
    retention, passes, since = 1.0, [], None
    applied = (Pass.Status.APPLIED, Pass.Status.PARTIALLY_APPLIED, Pass.Status.APPROVED,
               Pass.Status.APPLYING)  # fmt: skip
    rows = agent.passes.filter(status__in=applied).order_by("-pk")
    for run in rows.only("pk", "recall", "telemetry", "decided_actor")[:DRIFT_LOOKBACK]:
        if (run.recall or {}).get("probe_set") != probe_set:
            break
        if run.decided_actor != "policy":
            since = run.pk
            break
        ratio = run.telemetry_data.recall_ratio
        if ratio is not None:
            retention *= ratio
            passes.append(run.pk)
    return {"retention": retention, "passes": passes, "since": since}


def recall_drift_shown(agent: Agent) -> dict[str, Any] | None:
    """:func:`recall_drift` on the agent's current probes, for the agent page, plus
    ``"min"`` (the policy's ``min_recall_retention``); ``None`` unless the agent auto-applies
    ``all`` with probes and the recall guard on."""
    if agent.auto_apply != Agent.AutoApply.ALL:
        return None
    probes = agent_probes(agent)
    least = agent.get_policy().min_recall_retention
    if not probes or least is None:
        return None
    return {**recall_drift(agent, probe_set_digest(probes)), "min": least}


def read_records(agent: Agent, *, include_embeddings: bool = True) -> list[MemoryRecord]:
    """Every memory of the agent's store (:func:`consolidation.snapshot.read_all`, the one
    whole-store read). Raises ``StoreUnavailable``."""

    return read_all(stores.get_store(agent), include_embeddings=include_embeddings)


def recall_evaluate(
    *,
    agent: Agent,
    k: int | None = None,
    records: Sequence[MemoryRecord] | None = None,
    embedder: Embedder | None = None,
) -> RecallReport:
    """Recall figures of the agent's live store (or of ``records``) on its probes.

    ``k`` defaults to the agent policy's ``recall_k``. Raises ``StoreUnavailable`` when the store
    cannot be read, ``ValueError`` for ``k < 1``.
    """
    k = k or agent.get_policy().recall_k
    probes = agent_probes(agent)
    recs = list(records) if records is not None else read_records(agent)
    if not probes:
        return evaluate_recall(recs, [], k=k)
    return evaluate_recall(
        recs, probes, k=k, embedder=_embedder(embedder), fieldmap=agent.get_field_map()
    )


def recall_check(
    agent: Agent,
    records: Sequence[MemoryRecord],
    plan: Plan | Iterable[Operation],
    policy: Policy | None = None,
    *,
    embedder: Embedder | None = None,
) -> dict[str, Any]:
    """Recall before (``records``, the pass's snapshot) and after ``plan``, and the recall guard.

    ``plan`` is a :class:`Plan` or the operations currently included. ``policy`` defaults to the
    agent's. Returns a JSON-ready dict for ``Pass.recall``::

        {"k", "probes", "answer_recall_before", "answer_recall_after", "ratio",
         "context_chars_before", "context_chars_after", "evidence_recall_before",
         "evidence_recall_after", "evidence_probes", "min_recall_retention", "passed", "reason",
         "probe_set": probe_set_digest(...), "lost": int,
         "lost_probes": [{"id", "number", "question", "answer"}...], "seconds"}

    ``passed`` is ``False`` when after/before answer recall falls below
    ``policy.min_recall_retention`` (the reason carries the figures); with no probes the check
    passes and says so. Nothing is written. Raises ``ValueError`` from the embedder on bad input.
    """
    t0 = time.perf_counter()
    policy = policy or agent.get_policy()
    probes = agent_probes(agent)
    k = policy.recall_k
    fm = agent.get_field_map()
    if not probes:
        return {
            "k": k,
            "probes": 0,
            "probe_set": probe_set_digest(probes),
            "answer_recall_before": None,
            "answer_recall_after": None,
            "ratio": None,
            "context_chars_before": None,
            "context_chars_after": None,
            "evidence_recall_before": None,
            "evidence_recall_after": None,
            "evidence_probes": 0,
            "min_recall_retention": policy.min_recall_retention,
            "passed": True,
            "reason": "no probe queries: recall not measured",
            "lost": 0,
            "lost_probes": [],
            "seconds": time.perf_counter() - t0,
        }
    emb = _embedder(embedder)
    queries = np.asarray(emb.embed([p.question for p in probes]), dtype=np.float32)
    before = evaluate_recall(
        records, probes, k=k, embedder=emb, query_embeddings=queries, fieldmap=fm
    )
    after_records = simulate_after(records, plan, emb)
    after = evaluate_recall(
        after_records, probes, k=k, embedder=emb, query_embeddings=queries, fieldmap=fm
    )
    passed, ratio, reason = recall_guard(
        before.answer_recall, after.answer_recall, policy.min_recall_retention
    )
    lost = [p for p, hb, ha in zip(probes, before.hits, after.hits, strict=True) if hb and not ha]
    numbers = {
        pk: i for i, pk in enumerate(agent.probes.order_by("id").values_list("pk", flat=True), 1)
    }
    return {
        "k": k,
        "probes": before.probes,
        "probe_set": probe_set_digest(probes),
        "answer_recall_before": before.answer_recall,
        "answer_recall_after": after.answer_recall,
        "ratio": ratio,
        "context_chars_before": before.context_chars,
        "context_chars_after": after.context_chars,
        "evidence_recall_before": before.evidence_recall,
        "evidence_recall_after": after.evidence_recall,
        "evidence_probes": before.evidence_probes,
        "min_recall_retention": policy.min_recall_retention,
        "passed": passed,
        "reason": reason,
        "lost": len(lost),
        "lost_probes": [
            {
                "id": int(p.key),
                "number": numbers.get(int(p.key)),
                "question": p.question,
                "answer": p.answer,
            }
            for p in lost[:MAX_LOST_LISTED]
        ],
        "seconds": time.perf_counter() - t0,
    }


def recall_check_then(
    agent: Agent,
    records: Sequence[MemoryRecord],
    first: Iterable[Operation],
    then: Iterable[Operation],
    policy: Policy | None = None,
    *,
    embedder: Embedder | None = None,
) -> dict[str, Any]:
    """:func:`recall_check` of operations ``then`` on the store as operations ``first`` leave
    ``records`` (nothing is written): the waiting part of an auto-apply split, measured from
    the store its applied part leaves. Same dict and errors as :func:`recall_check`."""
    emb = _embedder(embedder)
    base = simulate_after(records, list(first), emb)
    return recall_check(agent, base, list(then), policy, embedder=emb)


def recall_held(
    agent: Agent,
    records: Sequence[MemoryRecord],
    operations: Sequence[Operation],
    policy: Policy,
    *,
    embedder: Embedder | None = None,
) -> dict[int, str]:
    """``{index into operations: sentence}`` of the operations that cost one of the agent's
    probe queries its answer (:func:`consolidation.recall.recall_holds` over ``records``, the
    pass's snapshot); auto-apply ``safe`` leaves them for review. Empty when the recall guard
    is off (``min_recall_retention`` empty), the agent has no probes or nothing is given.
    The probes are numbered as on the probes page. Nothing is written."""
    probes = agent_probes(agent)
    if policy.min_recall_retention is None or not probes or not operations:
        return {}
    holds = recall_holds(
        records,
        list(operations),
        probes,
        k=policy.recall_k,
        embedder=_embedder(embedder),
        fieldmap=agent.get_field_map(),
    )
    return {i: recall_hold_reason(probes, lost) for i, lost in holds.items()}


PROBE_PAGE_SIZE = 25
"""Probe queries per page on the probes page."""


def probe_page(*, agent: Agent, page: int | str = 1) -> Page[Any]:
    """One page of the agent's probe queries (:data:`PROBE_PAGE_SIZE`), oldest first; a page
    number out of range gives the nearest page, ``"last"`` the last one."""
    paginator = Paginator(agent.probes.order_by("id"), PROBE_PAGE_SIZE)
    return paginator.get_page(paginator.num_pages if page == "last" else page)
