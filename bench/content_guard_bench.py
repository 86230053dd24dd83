"""What typical passes lose, what harmful merges lose, and the risk of their operations.

The figures the content guard and ``auto_apply_max_risk`` defaults are chosen from
(``consolidation/policy.py``). Three sources:

- **LoCoMo** (``../shared/data/locomo/locomo7.json``): each conversation planned with the
  default policy for up to ``--passes`` nightly passes (each applied in memory when both
  guards pass, as ``bench/quality_locomo.py --mode converge`` does);
- **demo stores** (the console's three demo agents, texts of
  ``memoryadmin/ops/services/demo_texts.py`` built as
  ``memoryadmin.ops.services.demo`` builds them);
- **harmful merges**: pairs that differ in a path prefix, a comparison operator, a file
  extension, a flag, a version or a negation, merged the way the extractive merge would merge
  them (the text of the first kept, the second dropped), measured alone and inside the coding
  demo store; and whether the planner itself proposes them.

Every operation is measured with :func:`consolidation.review.content_loss` (the store after
the pass) and scored with :func:`consolidation.review.operation_risk`. Printed per rule: how
many operations, how many lose at least one content word, lost sentences, and risk
percentiles; per pass: lost sentences and lost content words against the store's size; then
the share of operations at or below each risk line.

Usage: ``.venv/bin/python bench/content_guard_bench.py [--passes 5] [--no-demo] [--json]``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from quality_locomo import DEFAULT_FILE, CachedEmbedder  # noqa: E402

from consolidation import FieldMap, MemoryRecord, Operation, OpKind, Policy  # noqa: E402
from consolidation.locomo import load_locomo  # noqa: E402
from consolidation.planning import plan as make_plan  # noqa: E402
from consolidation.recall import simulate_after  # noqa: E402
from consolidation.review import content_loss, operation_risk, operation_text  # noqa: E402
from consolidation.review.lost import sentences  # noqa: E402

HARMFUL = [
    ("path prefix", "Clear the cache with rm -rf ~/cache.", "Clear the cache with rm -rf /cache."),
    ("comparison", "The job retries if x >= 5.", "The job retries if x > 5."),
    (
        "extension",
        "The service reads config.yaml at start.",
        "The service reads config.yml at start.",
    ),
    ("flag", "Deploy with git push --force-with-lease.", "Deploy with git push --force."),
    ("version", "The build needs Python 3.11.", "The build needs Python 3.12."),
    ("negation", "The user likes jazz.", "The user does not like jazz."),
    (
        "url",
        "Docs live at https://docs.example.com/v2.",
        "Docs live at https://docs.example.com/v1.",
    ),
]
RISK_LINES = (0.1, 0.2, 0.25, 0.3, 0.35, 0.4, 0.5)


def rule_of(op: Operation) -> str:
    """The row an operation counts in: its rule for merges and prunes, else its kind."""
    return op.rule if op.kind in (OpKind.MERGE, OpKind.PRUNE) else op.kind.value


def measure(
    records: Sequence[MemoryRecord], ops: Sequence[Operation], policy: Policy
) -> tuple[list[tuple[Operation, Any, Any]], dict[str, int]]:
    """``[(op, OperationLoss, Risk)]`` of ``ops`` against ``records`` (the store before), and
    the set's unique lost sentences and content words with the store's sentence count."""
    fm = FieldMap()
    docs = {r.id: r.document for r in records}
    metas = {r.id: r.metadata for r in records}
    texts = [operation_text(op, docs, metas) for op in ops]
    scopes = {r.id: fm.scope_key(r.metadata) for r in records}
    loss = content_loss(texts, ((r.id, r.document) for r in records), scope_of=scopes)
    scored = [
        (op, lo, operation_risk(t, lo, policy=policy, fieldmap=fm))
        for op, t, lo in zip(ops, texts, loss.operations, strict=True)
    ]
    totals = {
        "lost_sentences": loss.totals.sentences,
        "lost_words": loss.totals.content_words,
        "store_sentences": sum(len(sentences(r.document)) for r in records),
        "removed_sentences": sum(len(sentences(s.document)) for t in texts for s in t.removed),
    }
    return scored, totals


def passes(
    name: str, records: list[MemoryRecord], policy: Policy, now: Any, embedder: Any, n: int
) -> list[dict[str, Any]]:
    """Up to ``n`` passes over ``records``; one row per pass with every operation measured."""
    out = []
    current = records
    for k in range(1, n + 1):
        p = make_plan(current, policy, now=now)
        if not any(op.removes for op in p.operations):
            break
        scored, totals = measure(current, p.operations, policy)
        out.append({"source": name, "pass": k, "store": len(current), "ops": scored, **totals})
        if p.result.exceeds_loss(policy.max_loss_fraction):
            break
        current = simulate_after(current, p, embedder)
    return out


def demo_records(embedder: Any) -> dict[str, list[MemoryRecord]]:
    """The three demo stores, as ``memoryadmin.ops.services.demo`` builds them (same seeds)."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memoryadmin.settings")
    import django

    django.setup()
    from django.utils import timezone

    from memoryadmin.ops.services.demo import DEMO_AGENTS

    now = timezone.now()
    out = {}
    for spec in DEMO_AGENTS:
        rng = random.Random(spec.slug)
        rows = spec.facts(rng)
        vecs = embedder.embed([t for _, t, _ in rows])
        recs = []
        for (key, text, flags), vec in zip(rows, vecs, strict=True):
            age = flags.get("age", rng.randint(1, 40))
            meta: dict[str, Any] = {
                "importance": round(rng.uniform(0.4, 0.7), 2),
                "session": rng.randint(1, 30),
                "access_count": rng.randint(0, 3),
            }
            if flags.get("stale"):
                age, meta["importance"], meta["layer"] = rng.randint(300, 420), 0.1, "episodic"
            else:
                meta["layer"] = "semantic"
            if flags.get("durable"):
                meta.update(
                    importance=0.9,
                    access_count=rng.randint(8, 30),
                    session=sorted(rng.sample(range(1, 30), 4)),
                )
            if flags.get("pinned"):
                meta.update(pinned=True, importance=1.0)
            meta["created_at"] = (now - timedelta(days=age, hours=rng.randint(0, 23))).isoformat()
            recs.append(MemoryRecord(f"{spec.slug}:{key}", text, vec, meta))
        out[spec.slug] = recs
    return out, now


def harmful(embedder: Any, policy: Policy, base: list[MemoryRecord], now: Any) -> list[dict]:
    """Each harmful pair merged as the extractive merge would (first text kept), measured
    alone and inside ``base``; and what the planner proposes for the pair in ``base``."""
    rows = []
    meta = {"layer": "semantic", "created_at": now.isoformat(), "importance": 0.5}
    for what, keep, drop in HARMFUL:
        va, vb = embedder.embed([keep, drop])
        a = MemoryRecord(f"h:{what}:a", keep, va, dict(meta))
        b = MemoryRecord(f"h:{what}:b", drop, vb, dict(meta))
        op = Operation(
            kind=OpKind.MERGE,
            source_ids=[a.id, b.id],
            source_hashes=[a.content_hash, b.content_hash],
            removes=[a.id, b.id],
            reason="harmful example",
            rule="near_duplicate",
            scores={"min_cosine": float(np.dot(va, vb)), "mean_cosine": float(np.dot(va, vb))},
            result_id="m-harm",
            result_document=keep,
        )
        store = [*base, a, b]
        ((_, lo, risk),), _ = measure(store, [op], policy)
        planned = make_plan(store, policy.with_(trim_to_guard=False), now=now)
        joined = [o for o in planned.operations if {a.id, b.id} <= set(o.source_ids)]
        rows.append(
            {
                "what": what,
                "cosine": round(float(np.dot(va, vb)), 3),
                "lost_words": lo.content_words,
                "lost_sentences": len(lo.sentences),
                "risk": risk.score,
                "planner": (
                    f"{joined[0].kind.value} ({joined[0].rule})" if joined else "kept apart"
                ),
            }
        )
    return rows


def pct(xs: list[float], q: float) -> float:
    return float(np.percentile(xs, q)) if xs else 0.0


def report(rows: list[dict[str, Any]], title: str) -> dict[str, Any]:
    """Print the per-rule table of ``rows`` (passes) and return its figures."""
    by_rule: dict[str, list[tuple[Any, Any]]] = {}
    for r in rows:
        for op, lo, risk in r["ops"]:
            by_rule.setdefault(rule_of(op), []).append((lo, risk.score))
    print(f"\n{title}: {len(rows)} passes, {sum(len(r['ops']) for r in rows)} operations")
    print(
        f"  {'rule':<16} {'ops':>6} {'lose≥1 word':>12} {'words/op':>9} {'sent/op':>8} "
        f"{'risk p50':>9} {'p90':>6} {'max':>6}"
    )
    figures: dict[str, Any] = {}
    for rule, items in sorted(by_rule.items(), key=lambda kv: -len(kv[1])):
        risks = [s for _, s in items]
        losing = sum(1 for lo, _ in items if lo.content_words)
        words = float(np.mean([len(lo.content_words) for lo, _ in items]))
        sent = float(np.mean([len(lo.sentences) for lo, _ in items]))
        print(
            f"  {rule:<16} {len(items):>6} {losing:>5} ({losing / len(items):>4.0%}) "
            f"{words:>9.2f} {sent:>8.2f} {pct(risks, 50):>9.2f} {pct(risks, 90):>6.2f} "
            f"{max(risks):>6.2f}"
        )
        figures[rule] = {"ops": len(items), "losing": losing, "risk_p50": pct(risks, 50)}
        shown = [w for lo, _ in items for w in lo.content_words][:8]
        if shown:
            print(f"  {'':<16} lost words, e.g.: {', '.join(shown)}")
    all_risk = [risk.score for r in rows for _, _, risk in r["ops"]]
    clean = [risk.score for r in rows for _, lo, risk in r["ops"] if not lo.content_words]
    line = "  share at or below: " + "  ".join(
        f"≤{x:g}: {np.mean([s <= x for s in all_risk]):.0%} (no word lost: "
        f"{np.mean([s <= x for s in clean]) if clean else 0:.0%})"
        for x in RISK_LINES
    )
    print(line)
    print("  per pass (lost sentences, of the store's / of the removed memories'; content words):")
    for r in rows:
        print(
            f"    {r['source']:<14} pass {r['pass']}: {r['lost_sentences']:>4} sentences "
            f"({r['lost_sentences'] / max(1, r['store_sentences']):.1%} of "
            f"{r['store_sentences']}, {r['lost_sentences'] / max(1, r['removed_sentences']):.1%}"
            f" of {r['removed_sentences']}), {r['lost_words']:>4} content words"
        )
    fr = [r["lost_sentences"] / max(1, r["store_sentences"]) for r in rows]
    print(f"  lost sentences per pass, of the store's: max {max(fr):.1%}, p90 {pct(fr, 90):.1%}")
    figures["risk_all"] = all_risk
    return figures


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--file", type=Path, default=DEFAULT_FILE)
    ap.add_argument("--passes", type=int, default=5)
    ap.add_argument("--no-demo", action="store_true")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    policy = Policy()
    embedder = CachedEmbedder()
    loco_rows: list[dict[str, Any]] = []
    for conv in load_locomo(args.file):
        vecs = embedder.embed([m.document for m in conv.memories])
        recs = [m.with_embedding(v) for m, v in zip(conv.memories, vecs, strict=True)]
        now = max(conv.sessions.values()) + timedelta(days=1)
        loco_rows += passes(conv.sample_id, recs, policy, now, embedder, args.passes)
    out = {"locomo": report(loco_rows, "LoCoMo, default policy")}
    if not args.no_demo:
        stores, now = demo_records(embedder)
        demo_rows: list[dict[str, Any]] = []
        for slug, recs in stores.items():
            demo_rows += passes(slug, recs, policy, now, embedder, args.passes)
        out["demo"] = report(demo_rows, "Demo stores, default policy")
        bad = harmful(embedder, policy, stores["demo-coding"], now)
        print("\nHarmful merges (first text kept, second dropped), inside the coding demo store:")
        for h in bad:
            print(
                f"  {h['what']:<12} cosine {h['cosine']:.3f}  lost words {h['lost_words']!s:<22} "
                f"sentences {h['lost_sentences']}  risk {h['risk']:.2f}  planner: {h['planner']}"
            )
        out["harmful"] = bad
    embedder.save()
    if args.json:
        print(json.dumps(out, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
