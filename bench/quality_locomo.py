"""Consolidation quality on real conversational memory: LoCoMo, both named policies.

For each conversation of ``../shared/data/locomo/locomo7.json`` (or ``--file``) and each named
policy, plans a pass with the pure engine (no Chroma: the store is the parsed conversation with
all-MiniLM-L6-v2 embeddings) and prints entries before/after, reduction %, answer recall@10
before/after and their ratio, context size (mean characters of the top-10 texts) before/after,
evidence recall@10 before/after, the conflicts asked per 1,000 memories (``ask/k``: distinct
pairs a person or the LLM judge is asked about over the row's plans — the reviewer load),
operations by kind and seconds (planning + simulating the store
after the plan); then totals (entries summed, recall micro-averaged over probes).

Two rows per conversation × policy:

- ``single``: one full plan (``trim_to_guard=False``); the guard column shows its loss fraction
  against the policy's ``max_loss_fraction`` (a pass over the threshold would be rejected by the
  console; the figures show what it would do if approved anyway);
- ``converge``: what scheduled passes with auto-apply ``all`` do: up to ``--passes`` plans
  (default 5) with
  the policy as it is (by default within the loss budget: each plan proposes its most certain
  operations that fit and defers the rest), each applied in memory
  (:func:`consolidation.recall.simulate_after`) only when the loss guard and the recall guard
  (``min_recall_retention``, this pass's after/before) pass, as the console would; it stops when
  a plan removes nothing (converged) or a guard trips — the recall guard across nights too
  (``recall drift``: the product of the applied passes' after/before ratios must stay at or
  above ``min_recall_retention``, as the console's auto-apply ``all`` requires). ``passes`` is
  the number applied,
  ``target@`` the first pass after which the conversation met the reduction goal, and the
  trajectory lists the memories after each pass.

- ``safe`` (``--mode safe``): auto-apply ``safe`` over ``--passes`` nightly passes (the clock
  one day later each night): each night's plan is split by
  :func:`consolidation.review.split_auto_apply` (risk, content guard, decisions, rejections,
  conflicts, and — as the console does — the operations of that safe part that cost a probe
  its answer, :func:`consolidation.recall.recall_holds`) and only its safe part is applied,
  when that part passes the loss and recall guards; the rest is left for review and planned
  again the next night (the console's next scheduled pass replaces a waiting part while the
  agent auto-applies). The probes the recall holds read are the ones recall is reported on,
  so the recall column is not a held-out figure: what holds it is that an answer the store
  had is never given up unattended. Printed per conversation: memories after each
  night, recall and context, and what the last night left for review (operations by reason,
  the most common reasons first).

``cur`` is the number of curated memories after (promotion must not lock the store up).
``--set FIELD=VALUE`` overrides a policy field for a tuning run (JSON value).

The clock (``now``) is one day after the conversation's last session, so "age" means the time
between a memory's session and the end of the conversation.

Goal: ``default`` ≥ 50 % fewer entries with ≥ 99 % of baseline answer recall;
``aggressive`` ≥ 80 % fewer with ≥ 95 %; context size ≤ 1.25× baseline in both. Scheduled passes:
with auto-apply ``safe`` (``--mode safe``) the default policy reaches its goal for each
conversation within 5 nights; ``converge`` (auto-apply ``all``: a pass whose whole plan fails
the recall guard is rejected whole) does not for every conversation (docs/BENCHMARKS.md).

Usage: ``.venv/bin/python bench/quality_locomo.py [--file PATH] [--conversation conv-26 ...]
[--policy default ...] [--passes N] [--mode single|converge|safe ...] [--set FIELD=VALUE ...]
[--holdout] [--json]``. ``--holdout``: the recall guard and its holds see the
even-numbered probes of each conversation, recall is reported on the odd-numbered ones.
Embeddings are cached
under ``var/cache/`` (keyed by text hash) so a rerun only pays for planning.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
import zipfile
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from consolidation import NAMED_POLICIES, FieldMap, MemoryRecord, summarize  # noqa: E402
from consolidation.locomo import LocomoConversation, load_locomo  # noqa: E402
from consolidation.planning import plan as make_plan  # noqa: E402
from consolidation.recall import (  # noqa: E402
    evaluate_recall,
    recall_guard,
    recall_hold_reason,
    recall_holds,
    simulate_after,
)
from consolidation.review import (  # noqa: E402
    content_loss,
    operation_risk,
    operation_text,
    split_auto_apply,
)

DEFAULT_FILE = ROOT / ".." / "shared" / "data" / "locomo" / "locomo7.json"
CACHE = ROOT / "var" / "cache" / "quality_locomo_embeddings.npz"
GOALS = {"default": (0.50, 0.99), "aggressive": (0.80, 0.95)}
MAX_CONTEXT_RATIO = 1.25
MODES = ("single", "converge", "safe")


class CachedEmbedder:
    """Wraps the default embedder with an on-disk cache keyed by SHA-1 of the text."""

    dim = 384

    def __init__(self) -> None:
        from consolidation.adapters.embedder import get_default_embedder

        self.inner = get_default_embedder()
        self.cache: dict[str, np.ndarray] = {}
        if CACHE.exists():
            try:
                with np.load(CACHE) as z:
                    self.cache = dict(zip(z["keys"].tolist(), z["vecs"], strict=True))
            except (OSError, ValueError, zipfile.BadZipFile):
                self.cache = {}  # a damaged cache is rebuilt, never trusted
        self.dirty = False

    def embed(self, texts):
        keys = [hashlib.sha1(t.encode("utf-8")).hexdigest() for t in texts]
        todo = sorted(
            {k: t for k, t in zip(keys, texts, strict=True) if k not in self.cache}.items()
        )
        if todo:
            vecs = self.inner.embed([t for _, t in todo])
            for (k, _), v in zip(todo, vecs, strict=True):
                self.cache[k] = v
            self.dirty = True
        return (
            np.stack([self.cache[k] for k in keys]).astype(np.float32)
            if keys
            else np.zeros((0, 384), np.float32)
        )

    def save(self) -> None:
        if self.dirty:
            CACHE.parent.mkdir(parents=True, exist_ok=True)
            keys = np.array(list(self.cache))
            tmp = CACHE.with_name(f"{CACHE.stem}.{os.getpid()}.tmp.npz")
            np.savez(tmp, keys=keys, vecs=np.stack(list(self.cache.values())))
            os.replace(tmp, CACHE)  # atomic: concurrent runs never leave a torn file


OVERRIDES: dict[str, Any] = {}
HOLDOUT = False  # --holdout: guards on the even-numbered probes, figures on the odd ones


def _asked(plans: list[Any]) -> int:
    """Conflict items asked over ``plans``: distinct pairs of memories (a conflict a later
    night proposes again is one question, as the console shows it once)."""
    return len(
        {
            frozenset(op.source_ids)
            for p in plans
            for op in p.operations
            if op.kind.value == "conflict"
        }
    )


def _ops(plans: list[Any]) -> dict[str, int]:
    ops: dict[str, int] = {}
    for p in plans:
        for op in p.operations:
            name = op.rule if op.kind.value in ("merge", "prune") else op.kind.value
            ops[name] = ops.get(name, 0) + 1
    return ops


@dataclass
class Case:
    """One conversation × policy: the store with embeddings, the probes' query embeddings,
    the clock and the figures before any pass."""

    conv: LocomoConversation
    policy_name: str
    policy: Any
    records: list[MemoryRecord]
    queries: np.ndarray
    now: datetime
    embedder: CachedEmbedder
    k: int
    base: dict[str, Any]
    guard_probes: list[Any]
    guard_queries: np.ndarray

    def guard_recall(self, recs: list[MemoryRecord]) -> float:
        """Answer recall@k of ``recs`` over the probes the guards see (all of them, or with
        ``--holdout`` the even-numbered half)."""
        return evaluate_recall(
            recs, self.guard_probes, k=self.k, query_embeddings=self.guard_queries
        ).answer_recall

    def recall(self, recs: list[MemoryRecord]) -> float:
        """Answer recall@k of ``recs`` over the conversation's probes."""
        return evaluate_recall(
            recs, self.conv.probes, k=self.k, query_embeddings=self.queries
        ).answer_recall

    def row(
        self,
        mode: str,
        after_records: list[MemoryRecord],
        plans: list[Any],
        guard: str,
        seconds: float,
        applied: int,
    ) -> dict[str, Any]:
        """The table row of ``mode`` with the store ``after_records``."""
        conv, k, queries = self.conv, self.k, self.queries
        after = evaluate_recall(after_records, conv.probes, k=k, query_embeddings=queries)
        curated = sum(
            1 for r in after_records if r.metadata.get("tier") == self.policy.curated_tier
        )
        before = self.base["recall_before"]
        return {
            **self.base,
            "mode": mode,
            "entries_after": len(after_records),
            "reduction": 1 - len(after_records) / len(self.records),
            "hits_after": sum(1 for h in after.hits if h),
            "recall_after": after.answer_recall,
            "recall_ratio": (after.answer_recall / before) if before else None,
            "context_after": after.context_chars,
            "evidence_after": after.evidence_recall,
            "operations": _ops(plans),
            "asked": _asked(plans),
            "asked_per_1k": 1000 * _asked(plans) / len(self.records) if self.records else 0.0,
            "guard": guard,
            "passes": applied,
            "curated": curated,
            "seconds": seconds,
        }


def make_case(conv: LocomoConversation, policy_name: str, embedder: CachedEmbedder, k: int) -> Case:
    """The :class:`Case` of ``conv`` under the named policy (with ``--set`` overrides)."""
    policy = NAMED_POLICIES[policy_name].with_(**OVERRIDES)
    vecs = embedder.embed([m.document for m in conv.memories])
    records = [m.with_embedding(v) for m, v in zip(conv.memories, vecs, strict=True)]
    queries = embedder.embed([p.question for p in conv.probes])
    guard_probes, guard_queries = list(conv.probes), queries
    if HOLDOUT:  # the guards see the even-numbered probes; the figures are the odd ones
        guard_probes, guard_queries = list(conv.probes[::2]), queries[::2]
        conv = replace(conv, probes=list(conv.probes[1::2]))
        queries = queries[1::2]
    now = max(conv.sessions.values()) + timedelta(days=1)
    before = evaluate_recall(records, conv.probes, k=k, query_embeddings=queries)
    base = {
        "conversation": conv.sample_id,
        "policy": policy_name,
        "entries_before": len(records),
        "probes": before.probes,
        "hits_before": sum(1 for h in before.hits if h),
        "recall_before": before.answer_recall,
        "context_before": before.context_chars,
        "evidence_before": before.evidence_recall,
    }
    return Case(
        conv,
        policy_name,
        policy,
        records,
        queries,
        now,
        embedder,
        k,
        base,
        guard_probes,
        guard_queries,
    )


def run_single(case: Case) -> dict[str, Any]:
    """One full plan (``trim_to_guard=False``), simulated whole whatever the guard says."""
    t0 = time.perf_counter()
    policy = case.policy
    p = make_plan(case.records, policy.with_(trim_to_guard=False), now=case.now)
    after_records: list[MemoryRecord] = simulate_after(case.records, p, case.embedder)
    loss_ok = not p.result.exceeds_loss(policy.max_loss_fraction)
    guard = (
        f"loss {p.result.loss_fraction:.0%} {'≤' if loss_ok else '>'} "
        f"{policy.max_loss_fraction:.0%}"
    )
    return case.row("single", after_records, [p], guard, time.perf_counter() - t0, int(loss_ok))


def run_converge(case: Case, passes: int) -> dict[str, Any]:
    """Up to ``passes`` plans with the policy as it is (within the loss budget by default),
    each applied only when both guards pass, as the console does; stops when nothing is left
    to remove."""
    t0 = time.perf_counter()
    policy, records, now = case.policy, case.records, case.now
    current, plans, stop, sizes, target_at = records, [], f"{passes} passes", [], None
    min_red = GOALS.get(case.policy_name, (0.0, 0.0))[0]
    kept = 1.0  # answer recall kept since the first pass (no person approves in between)
    for _ in range(passes):
        p = make_plan(current, policy, now=now)
        if not any(op.removes for op in p.operations):
            stop = "converged"
            break
        if p.result.exceeds_loss(policy.max_loss_fraction):
            stop = "loss guard"
            break
        nxt = simulate_after(current, p, case.embedder)
        ok, ratio, _why = recall_guard(
            case.guard_recall(current), case.guard_recall(nxt), policy.min_recall_retention
        )
        if not ok:
            stop = "recall guard"
            break
        least = policy.min_recall_retention
        if least is not None and ratio is not None and kept * ratio < least - 1e-12:
            stop = f"recall drift ({kept * ratio:.1%})"  # the console's cross-night guard
            break
        kept *= ratio if ratio is not None else 1.0
        current = nxt
        plans.append(p)
        sizes.append(len(current))
        if target_at is None and 1 - len(current) / len(records) >= min_red:
            target_at = len(plans)
    else:
        if not any(op.removes for op in make_plan(current, policy, now=now).operations):
            stop = "converged"
    deferred = (plans[-1].context.get("trimmed") or {}).get("dropped_operations", 0) if plans else 0
    r = case.row("converge", current, plans, f"stop: {stop}", time.perf_counter() - t0, len(plans))
    r.update(trajectory=sizes, target_at=target_at, deferred_last=deferred)
    return r


def safe_split(case: Case, current: list[MemoryRecord], p: Any, policy: Any) -> Any:
    """:func:`split_auto_apply` of plan ``p`` over the store ``current`` (risk and loss as the
    console computes them at proposal time)."""
    docs = {r.id: r.document for r in current}
    metas = {r.id: r.metadata for r in current}
    texts = [operation_text(op, docs, metas) for op in p.operations]
    scopes = {r.id: FieldMap().scope_key(r.metadata) for r in current}
    loss = content_loss(texts, ((r.id, r.document) for r in current), scope_of=scopes)
    risks = [
        operation_risk(t, lo, policy=policy) for t, lo in zip(texts, loss.operations, strict=True)
    ]
    split = split_auto_apply(
        p.operations, risks, loss.operations, policy, store_sentences=loss.store_sentences
    )
    if policy.min_recall_retention is None:
        return split
    safe = split.safe
    holds = recall_holds(
        current,
        [p.operations[i] for i in safe],
        case.guard_probes,
        k=case.k,
        embedder=case.embedder,
        query_embeddings=case.guard_queries,
    )
    if not holds:
        return split
    held = {safe[i]: recall_hold_reason(case.guard_probes, js) for i, js in holds.items()}
    return split_auto_apply(
        p.operations,
        risks,
        loss.operations,
        policy,
        store_sentences=loss.store_sentences,
        recall_held=held,
    )


def run_safe(case: Case, passes: int) -> dict[str, Any]:
    """Auto-apply ``safe`` for ``passes`` nights: each night plans afresh (clock one day
    later), applies the safe part when it passes the loss and recall guards, and leaves the
    rest for review."""
    t0 = time.perf_counter()
    policy, records = case.policy, case.records
    current, applied_plans, sizes, target_at = records, [], [], None
    min_red = GOALS.get(case.policy_name, (0.0, 0.0))[0]
    waiting: dict[str, int] = {}
    waiting_ops = 0
    examples: dict[str, str] = {}
    stop = f"{passes} nights"
    planned = []  # every night's whole plan: its conflicts are asked even when nothing applies
    for night in range(passes):
        p = make_plan(current, policy, now=case.now + timedelta(days=night))
        planned.append(p)
        split = safe_split(case, current, p, policy)
        waiting = split.counts()
        waiting_ops = len(split.waiting)
        examples = {}
        for g in split.waiting:
            for code, why in zip(g.codes, g.reasons, strict=True):
                examples.setdefault(code, why)
        ops = [p.operations[i] for i in split.safe]
        if not any(op.removes for op in ops):
            stop = "nothing safe left" if split.waiting else "converged"
            sizes.append(len(current))
            continue
        if summarize(len(current), ops).exceeds_loss(policy.max_loss_fraction):
            stop = "loss guard"
            waiting, waiting_ops = {"loss guard": len(p.operations)}, len(p.operations)
            sizes.append(len(current))
            continue
        nxt = simulate_after(current, ops, case.embedder)
        ok, _ratio, _why = recall_guard(
            case.guard_recall(current), case.guard_recall(nxt), policy.min_recall_retention
        )
        if not ok:
            stop = "recall guard"
            waiting, waiting_ops = {"recall guard": len(p.operations)}, len(p.operations)
            sizes.append(len(current))
            continue
        current = nxt
        applied_plans.append(SimpleNamespace(operations=ops))
        sizes.append(len(current))
        if target_at is None and 1 - len(current) / len(records) >= min_red:
            target_at = night + 1
    r = case.row(
        "safe",
        current,
        applied_plans,
        f"last: {stop}",
        time.perf_counter() - t0,
        len(applied_plans),
    )
    asked = _asked(planned)
    r.update(
        asked=asked,
        asked_per_1k=1000 * asked / len(records) if records else 0.0,
        trajectory=sizes,
        target_at=target_at,
        waiting=waiting,
        waiting_ops=waiting_ops,
        waiting_examples=examples,
    )
    return r


def run_one(
    conv: LocomoConversation,
    policy_name: str,
    embedder: CachedEmbedder,
    k: int,
    passes: int,
    modes: tuple[str, ...] = MODES,
) -> list[dict[str, Any]]:
    """The rows of ``modes`` for one conversation × policy: ``single`` (one full plan, guard
    verdict shown, the store simulated after the whole plan), ``converge`` (up to ``passes``
    plans, each applied only when both guards pass) and ``safe`` (auto-apply ``safe`` for
    ``passes`` nights)."""
    case = make_case(conv, policy_name, embedder, k)
    rows = []
    if "single" in modes:
        rows.append(run_single(case))
    if "converge" in modes:
        rows.append(run_converge(case, passes))
    if "safe" in modes:
        rows.append(run_safe(case, passes))
    return rows


def totals(rows: list[dict[str, Any]], policy_name: str, mode: str) -> dict[str, Any]:
    rs = [r for r in rows if r["policy"] == policy_name and r["mode"] == mode]
    eb = sum(r["entries_before"] for r in rs)
    ea = sum(r["entries_after"] for r in rs)
    probes = sum(r["probes"] for r in rs)
    hb = sum(r["hits_before"] for r in rs)
    ha = sum(r["hits_after"] for r in rs)
    w = [r["probes"] for r in rs]
    ops: dict[str, int] = {}
    for r in rs:
        for kk, v in r["operations"].items():
            ops[kk] = ops.get(kk, 0) + v
    return {
        "conversation": "TOTAL",
        "policy": policy_name,
        "mode": mode,
        "guard": "",
        "passes": sum(r["passes"] for r in rs),
        "max_passes": max((r["passes"] for r in rs), default=0),
        "target_at": (
            None
            if any(r.get("target_at") is None for r in rs)
            else max((r.get("target_at") or 0) for r in rs)
        )
        if mode in ("converge", "safe")
        else None,
        "curated": sum(r["curated"] for r in rs),
        "entries_before": eb,
        "entries_after": ea,
        "reduction": 1 - ea / eb if eb else 0.0,
        "probes": probes,
        "hits_before": hb,
        "hits_after": ha,
        "recall_before": hb / probes if probes else None,
        "recall_after": ha / probes if probes else None,
        "recall_ratio": ha / hb if hb else None,
        "context_before": float(np.average([r["context_before"] for r in rs], weights=w)),
        "context_after": float(np.average([r["context_after"] for r in rs], weights=w)),
        "evidence_before": float(np.average([r["evidence_before"] or 0 for r in rs], weights=w)),
        "evidence_after": float(np.average([r["evidence_after"] or 0 for r in rs], weights=w)),
        "operations": ops,
        "asked": sum(r["asked"] for r in rs),
        "asked_per_1k": 1000 * sum(r["asked"] for r in rs) / eb if eb else 0.0,
        "seconds": sum(r["seconds"] for r in rs),
    }


def verdict(t: dict[str, Any]) -> str:
    min_red, min_ratio = GOALS.get(t["policy"], (0, 0))
    checks = [
        ("reduction", t["reduction"] >= min_red, f"{t['reduction']:.1%} vs ≥{min_red:.0%}"),
        (
            "recall",
            (t["recall_ratio"] or 0) >= min_ratio,
            f"{(t['recall_ratio'] or 0):.1%} vs ≥{min_ratio:.0%}",
        ),
        (
            "context",
            t["context_after"] <= MAX_CONTEXT_RATIO * t["context_before"],
            f"{t['context_after'] / t['context_before']:.2f}× vs ≤{MAX_CONTEXT_RATIO}×",
        ),
    ]
    return f"{t['policy']} {t['mode']}: " + "; ".join(
        f"{name} {'MET' if ok else 'MISSED'} ({txt})" for name, ok, txt in checks
    )


def print_table(rows: list[dict[str, Any]]) -> None:
    head = (
        f"{'conv':<8} {'policy':<10} {'mode':<8} {'before':>6} {'after':>6} {'red.':>6} "
        f"{'R@10 b':>7} {'R@10 a':>7} "
        f"{'ratio':>6} {'ctx b':>6} {'ctx a':>6} {'ev b':>5} {'ev a':>5} {'cur':>4} {'ask/k':>5} "
        f"{'sec':>6}  "
        f"guard / operations"
    )
    print(head)
    print("-" * len(head))
    for r in rows:
        ops = " ".join(f"{k}={v}" for k, v in sorted(r["operations"].items()))
        print(
            f"{r['conversation']:<8} {r['policy']:<10} {r['mode']:<8} "
            f"{r['entries_before']:>6} {r['entries_after']:>6} "
            f"{r['reduction']:>6.1%} {r['recall_before']:>7.3f} {r['recall_after']:>7.3f} "
            f"{(r['recall_ratio'] or 0):>6.1%} "
            f"{r['context_before']:>6.0f} {r['context_after']:>6.0f} "
            f"{(r['evidence_before'] or 0):>5.2f} {(r['evidence_after'] or 0):>5.2f} "
            f"{r['curated']:>4} {r['asked_per_1k']:>5.1f} {r['seconds']:>6.1f}  "
            f"{r['guard']}{' / ' if r['guard'] else ''}{ops}"
        )


def print_convergence(rows: list[dict[str, Any]], mode: str = "converge") -> None:
    """Passes applied one after another per conversation and in total — memories after each
    pass, passes needed for the goal (``mode``: ``converge``, or ``safe`` with what each
    conversation's last night left for review)."""
    for policy_name in sorted({r["policy"] for r in rows}):
        rs = [r for r in rows if r["policy"] == policy_name and r["mode"] == mode]
        if not rs:
            continue
        min_red, min_ratio = GOALS.get(policy_name, (0.0, 0.0))
        how = (
            "each pass within the loss budget and under both guards"
            if mode == "converge"
            else "auto-apply safe: each night only the safe part, under both guards"
        )
        print(
            f"\n{'Convergence' if mode == 'converge' else 'Auto-apply safe'}, {policy_name} "
            f"policy ({how}; goal ≥{min_red:.0%} fewer at ≥{min_ratio:.0%} recall, "
            f"≤{MAX_CONTEXT_RATIO}× context):"
        )
        for r in rs:
            path = " → ".join(str(x) for x in [r["entries_before"], *r["trajectory"]])
            target = f"goal after pass {r['target_at']}" if r["target_at"] else "goal not reached"
            ctx = r["context_after"] / r["context_before"] if r["context_before"] else 0.0
            met = (
                r["reduction"] >= min_red
                and (r["recall_ratio"] or 0) >= min_ratio
                and ctx <= MAX_CONTEXT_RATIO
            )
            print(
                f"  {r['conversation']:<8} {r['passes']} passes: {path} "
                f"({r['reduction']:.1%} fewer, "
                f"recall {(r['recall_ratio'] or 0):.1%}, context {ctx:.2f}×; "
                f"{target}; {r['guard']}; {'MET' if met else 'MISSED'}; "
                f"conflicts asked {r['asked']} = {r['asked_per_1k']:.1f} per 1,000 memories)"
            )
            if mode == "safe":
                reasons = ", ".join(f"{c} {n}" for c, n in r["waiting"].items()) or "nothing"
                print(
                    f"           left for review after the last night: {r['waiting_ops']} "
                    f"operations ({reasons})"
                )
                for code, why in list(r["waiting_examples"].items())[:3]:
                    print(f"             e.g. {code}: {why[:110]}")
        _print_total(rows, policy_name, mode, rs, min_red)


def _print_total(
    rows: list[dict[str, Any]],
    policy_name: str,
    mode: str,
    rs: list[dict[str, Any]],
    min_red: float,
) -> None:
    t = totals(rows, policy_name, mode)
    before = t["entries_before"]
    sizes = []  # total memories after pass i (a conversation that stopped keeps its size)
    for i in range(1, max(len(r["trajectory"]) for r in rs) + 1):
        sizes.append(
            sum(
                (r["trajectory"][i - 1] if len(r["trajectory"]) >= i else r["entries_after"])
                for r in rs
            )
        )
    met = next((i for i, n in enumerate(sizes, 1) if 1 - n / before >= min_red), None)
    print(
        f"  TOTAL    {t['passes']} passes applied "
        f"(at most {t['max_passes']} per conversation): "
        f"{' → '.join(str(x) for x in [before, *sizes])} memories; "
        f"{t['reduction']:.1%} fewer, recall {(t['recall_ratio'] or 0):.1%}, context "
        f"{t['context_after'] / t['context_before']:.2f}×; reduction goal met in total after "
        f"{f'pass {met}' if met else '— (not met)'}; conflicts asked {t['asked']} = "
        f"{t['asked_per_1k']:.1f} per 1,000 memories"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--file", type=Path, default=DEFAULT_FILE)
    ap.add_argument("--conversation", action="append", default=None)
    ap.add_argument("--policy", action="append", default=None, choices=sorted(NAMED_POLICIES))
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument(
        "--passes",
        type=int,
        default=5,
        help="converge and safe modes: at most this many passes (nights)",
    )
    ap.add_argument(
        "--mode",
        action="append",
        default=None,
        choices=MODES,
        help="modes to run (default: all three)",
    )
    ap.add_argument(
        "--json", action="store_true", help="print one JSON object instead of the table"
    )
    ap.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="override a policy field for this run (JSON value), e.g. fold_max_chars=200",
    )
    ap.add_argument(
        "--holdout",
        action="store_true",
        help="the recall guard and holds see the even-numbered probes only; recall is "
        "reported on the odd-numbered ones (a figure the guards never saw)",
    )
    args = ap.parse_args(argv)
    global HOLDOUT
    HOLDOUT = args.holdout
    for item in args.set:
        name, _, value = item.partition("=")
        OVERRIDES[name] = json.loads(value)
    if not args.file.exists():
        print(f"LoCoMo file not found: {args.file}", file=sys.stderr)
        return 2
    convs = load_locomo(args.file, conversations=args.conversation)
    policies = args.policy or list(NAMED_POLICIES)
    modes = tuple(args.mode or MODES)
    embedder = CachedEmbedder()
    rows = []
    for policy_name in policies:
        for conv in convs:
            rows.extend(run_one(conv, policy_name, embedder, args.k, args.passes, modes))
            if not args.json:
                print(f"  {conv.sample_id} {policy_name}: done", file=sys.stderr)
    embedder.save()
    all_rows = []
    summary = {}
    for policy_name in policies:
        for mode in modes:
            t = totals(rows, policy_name, mode)
            all_rows += [r for r in rows if r["policy"] == policy_name and r["mode"] == mode] + [t]
            summary[f"{policy_name} {mode}"] = verdict(t)
    if args.json:
        print(json.dumps({"rows": all_rows, "goals": summary}, indent=1))
    else:
        print_table(all_rows)
        print_convergence(rows, "converge")
        print_convergence(rows, "safe")
        print()
        for v in summary.values():
            print(v)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
