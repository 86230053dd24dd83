"""Does the memory pyramid help an agent answer? LoCoMo without its session summaries.

For each conversation of ``../shared/data/locomo/locomo7.json`` (or ``--file``) the store is what
an agent writes itself — the dialog turns and the observations, *not* LoCoMo's session summaries
— with all-MiniLM-L6-v2 embeddings (cached under ``var/cache/`` like bench/quality_locomo.py).
Then:

1. **Clusterers** (level 1 over the plain store), per ``--method``: clusters, memories covered,
   mean size, mean cohesion (mean pairwise cosine), seconds; and stability: the pyramid built
   over the store without its last session, applied, then planned again with the last session
   added — how many summaries stay unchanged, are rewritten in place, or are new. The planner's
   own complete-link grouping (near-duplicate merges with ``link_threshold`` set to the
   clustering threshold) is shown beside them.
2. **Pyramid** per writer (``extractive``, and ``stub``: the LLM path through
   ``consolidation.adapters.llm.LLMWriter`` against the loopback stub server of
   ``tests/llm_stub.py``, whose reply quotes each child's first sentence and cites it): passes
   are planned and applied in memory (:func:`consolidation.recall.simulate_after`) until one
   proposes nothing (one level per pass; the last pass shows the pyramid is stable: the same
   memories give no operation); then answer recall@10 and context characters (mean of the
   top-10 texts) without and with the pyramid, and the probes answered when retrieval is cut
   to a context budget (``--budgets`` characters, taken in rank order from the top 50, a text
   that does not fit skipped). LLM requests and estimated tokens are printed for ``stub``.

Retrieval over the pyramid is one pool (RAPTOR's "collapsed tree": summaries of every level
and the memories ranked together by cosine), which is what an agent's vector search does.

Usage: ``.venv/bin/python bench/pyramid_bench.py [--file PATH] [--conversation conv-26 ...]
[--method average ...] [--writer extractive|stub ...] [--set FIELD=VALUE ...] [--json]``.

Figures (7 conversations, 5,879 memories, 1,035 scorable probes; default values with
``summarize=true``: average linkage at 0.55, clusters of 3–12, 400 characters, two levels):

- clusterers: ``average`` 816 clusters covering 78.9 % of the memories (mean size 5.7, cohesion
  0.67, 10 s); ``complete`` 857, 68.1 % (4.7, 0.70, 2.7 s); ``hdbscan`` 266, 22.1 % (4.9, 0.74,
  20 s); the planner's judged complete-link grouping 664 groups of ≥ 3, 47.6 % (77 s: the whole
  pass). When the last session arrives, of 785 ``average`` summaries 644 stay unchanged and 103
  are rewritten in place; 69 new topics.
- answer recall@10 without → with the pyramid (extractive, average): 52.9 % → 52.9 % (548 →
  547 probes), context 906 → 1,105 characters (1.22×); within a context budget of 500 / 1,000 /
  1,500 / 2,000 characters: 46.7 / 53.1 / 57.8 / 60.0 % → 45.7 / 51.7 / 56.1 / 59.3 %. The LLM
  path against the stub (each child's first sentence): 52.8 %, 1,087 characters, 911 requests,
  ≈ 513K prompt + 110K completion tokens (estimated), no rejected reply. ``complete`` and
  ``hdbscan`` pyramids: 52.8 % and 52.7 %, both also below the plain store within every budget.
- tuning (extractive, average): 200-character summaries 52.0 %, threshold 0.7 52.7 %: no
  setting tried answers more probes, with or without a budget.

So the pyramid stays off by default (``Policy.summarize``): on a plain conversational store,
extractive summaries repeat what their children say and take top-k places and characters from
them. An abstractive writer (a real model) may do better; measure it before turning it on.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.quality_locomo import CachedEmbedder  # noqa: E402
from consolidation import MemoryRecord, Policy  # noqa: E402
from consolidation.locomo import LocomoConversation, load_locomo  # noqa: E402
from consolidation.planning import plan as make_plan  # noqa: E402
from consolidation.pyramid import (  # noqa: E402
    METHODS,
    PyramidResult,
    build_pyramid,
    cluster_rows,
    extract_quoted_data,
)
from consolidation.recall import evaluate_recall, simulate_after  # noqa: E402
from consolidation.text import split_sentences  # noqa: E402

DEFAULT_FILE = ROOT / ".." / "shared" / "data" / "locomo" / "locomo7.json"
BUDGET_POOL = 50  # budgeted retrieval packs from this many top-ranked memories
OVERRIDES: dict[str, Any] = {}


def plain_store(conv: LocomoConversation, embedder: CachedEmbedder) -> list[MemoryRecord]:
    """The turns and observations of ``conv`` (no session summaries), embedded."""
    mems = [m for m in conv.memories if m.metadata.get("layer") != "summary"]
    vecs = embedder.embed([m.document for m in mems])
    return [m.with_embedding(v) for m, v in zip(mems, vecs, strict=True)]


def stub_responder(budget: int):
    """What the stub LLM answers: each child's first sentence, citing it, within ``budget``."""

    def answer(body: dict[str, Any]) -> str:
        user = next(m["content"] for m in body["messages"] if m["role"] == "user")
        data = extract_quoted_data(user)
        out, used = [], 0
        for mem in data["memories"]:
            first = (split_sentences(mem["text"]) or [mem["text"]])[0]
            if used + len(first) + 1 > budget:
                continue
            out.append({"text": first, "cites": [mem["id"]]})
            used += len(first) + 1
        return json.dumps({"sentences": out})

    return answer


def grow(
    base: list[MemoryRecord], policy: Policy, writer: Any, embedder: CachedEmbedder, method: str
) -> tuple[list[MemoryRecord], list[PyramidResult], float]:
    """Plan and apply (in memory) pyramid passes until one proposes nothing."""
    store, passes, t0 = list(base), [], time.perf_counter()
    for _ in range(policy.summary_levels + 2):
        res = build_pyramid(store, policy, writer=writer, method=method)
        passes.append(res)
        if not res.operations:
            break
        store = simulate_after(store, res.operations, embedder)
    return store, passes, time.perf_counter() - t0


def recall_row(
    store: Sequence[MemoryRecord], conv: LocomoConversation, queries: Any, budgets: list[int]
) -> dict[str, Any]:
    """Hits at k=10 and per budget, context chars, per-category hits."""
    rep = evaluate_recall(store, conv.probes, k=10, query_embeddings=queries)
    cats: dict[str, list[int]] = {}
    for p, h in zip(conv.probes, rep.hits, strict=True):
        if h is not None:
            c = cats.setdefault(str(p.category), [0, 0])
            c[0] += int(h)
            c[1] += 1
    row: dict[str, Any] = {
        "entries": len(store),
        "probes": rep.probes,
        "hits": sum(1 for h in rep.hits if h),
        "context": rep.context_chars,
        "categories": cats,
        "budget": {},
    }
    for b in budgets:
        r = evaluate_recall(
            store, conv.probes, k=BUDGET_POOL, query_embeddings=queries, context_budget=b
        )
        row["budget"][b] = {"hits": sum(1 for h in r.hits if h), "context": r.context_chars}
    return row


def clusterer_row(
    base: list[MemoryRecord], conv: LocomoConversation, policy: Policy, method: str, embedder
) -> dict[str, Any]:
    """Level-1 clusters of one method and their stability when the last session arrives."""
    import numpy as np

    m = np.stack([r.embedding for r in sorted(base, key=lambda r: r.id)])
    m = m / np.linalg.norm(m, axis=1, keepdims=True)
    t0 = time.perf_counter()
    clusters = cluster_rows(
        m,
        threshold=policy.summary_threshold,
        min_size=policy.summary_min_cluster,
        max_size=policy.summary_max_cluster,
        method=method,
    )
    seconds = time.perf_counter() - t0
    cohesion = []
    for c in clusters:
        s = m[c].sum(axis=0)
        cohesion.append(float((s @ s - len(c)) / (len(c) * (len(c) - 1))))
    last = max(conv.sessions)
    early = [r for r in base if r.metadata.get("session") != last]
    one = policy.with_(summary_levels=1)
    first = build_pyramid(early, one, method=method)
    store = simulate_after(early, first.operations, embedder)
    store += [r for r in base if r.metadata.get("session") == last]
    second = build_pyramid(store, one, method=method).levels.get(1, {})
    return {
        "method": method,
        "clusters": len(clusters),
        "covered": sum(len(c) for c in clusters),
        "memories": len(base),
        "mean_size": float(np.mean([len(c) for c in clusters])) if clusters else 0.0,
        "cohesion": float(np.mean(cohesion)) if cohesion else 0.0,
        "seconds": seconds,
        "stability": {
            "before": len(first.operations),
            "unchanged": second.get("unchanged", 0),
            "rewritten": second.get("rewritten", 0),
            "new": second.get("new", 0),
        },
    }


def planner_grouping(
    base: list[MemoryRecord], conv: LocomoConversation, policy: Policy
) -> dict[str, Any]:
    """The planner's own complete-link grouping (near-duplicate merge groups, judged pairs, at
    most ``max_group_size``) with ``link_threshold`` at the clustering threshold: groups of at
    least ``summary_min_cluster`` memories, memories in them, seconds."""
    from datetime import timedelta

    p = Policy(
        link_threshold=policy.summary_threshold,
        merge_exact=False,
        fold_evidence=False,
        window_max_size=1,
        prune=False,
        promote=False,
        trim_to_guard=False,
        reconcile=False,
    )
    now = max(conv.sessions.values()) + timedelta(days=1)
    t0 = time.perf_counter()
    groups = [op.source_ids for op in make_plan(base, p, now=now).by_kind("merge")]
    groups = [g for g in groups if len(g) >= policy.summary_min_cluster]
    return {
        "groups": len(groups),
        "covered": sum(len(g) for g in groups),
        "seconds": time.perf_counter() - t0,
    }


def run_conversation(conv, args, embedder, stub) -> dict[str, Any]:
    policy = Policy(summarize=True).with_(**OVERRIDES)
    base = plain_store(conv, embedder)
    queries = embedder.embed([p.question for p in conv.probes])
    out: dict[str, Any] = {"conversation": conv.sample_id, "memories": len(base)}
    out["clusterers"] = [clusterer_row(base, conv, policy, m, embedder) for m in args.method]
    out["planner_grouped"] = planner_grouping(base, conv, policy)
    out["base"] = recall_row(base, conv, queries, args.budgets)
    out["pyramid"] = {}
    for writer_name in args.writer:
        writer = None
        if writer_name == "stub":
            from consolidation.adapters.llm import LLMWriter

            writer = LLMWriter(stub.base_url, None, "stub-model", timeout_seconds=30)
        for method in args.method:
            store, passes, seconds = grow(base, policy, writer, embedder, method)
            row = recall_row(store, conv, queries, args.budgets)
            row.update(
                passes=len(passes),
                last_pass_operations=len(passes[-1].operations),
                levels={
                    lv: sum(p.levels.get(lv, {}).get("new", 0) for p in passes)
                    for lv in range(1, policy.summary_levels + 1)
                },
                requests=sum(p.requests for p in passes),
                tokens={k: sum(p.tokens[k] for p in passes) for k in ("prompt", "completion")},
                errors=sum(len(p.errors) for p in passes),
                seconds=seconds,
            )
            out["pyramid"][f"{writer_name}/{method}"] = row
    return out


def _pct(a: int, b: int) -> str:
    return f"{a / b:.1%}" if b else "—"


def print_report(rows: list[dict[str, Any]], budgets: list[int]) -> None:
    print("Clusterers, level 1 over the plain store (all conversations):")
    methods = [c["method"] for c in rows[0]["clusterers"]]
    total = sum(r["memories"] for r in rows)
    for i, method in enumerate(methods):
        cs = [r["clusterers"][i] for r in rows]
        n = sum(c["clusters"] for c in cs)
        st = {k: sum(c["stability"][k] for c in cs) for k in cs[0]["stability"]}
        print(
            f"  {method:<9} {n:>4} clusters, {_pct(sum(c['covered'] for c in cs), total)} of "
            f"{total} memories, mean size {sum(c['covered'] for c in cs) / max(n, 1):.1f}, "
            f"cohesion {sum(c['cohesion'] * c['clusters'] for c in cs) / max(n, 1):.2f}, "
            f"{sum(c['seconds'] for c in cs):.2f} s; last session added: "
            f"{st['before']} summaries → {st['unchanged']} unchanged, {st['rewritten']} "
            f"rewritten, {st['new']} new"
        )
    pg = [r["planner_grouped"] for r in rows]
    n = sum(g["groups"] for g in pg)
    covered = sum(g["covered"] for g in pg)
    print(
        f"  planner   {n:>4} groups (its complete-link near-duplicate grouping, judged pairs), "
        f"{_pct(covered, total)} of {total} memories, mean size {covered / max(n, 1):.1f}, "
        f"{sum(g['seconds'] for g in pg):.2f} s"
    )
    probes = sum(r["base"]["probes"] for r in rows)
    w = [r["base"]["probes"] for r in rows]

    def line(name: str, rs: list[dict[str, Any]]) -> None:
        hits = sum(x["hits"] for x in rs)
        ctx = sum(x["context"] * wi for x, wi in zip(rs, w, strict=True)) / max(probes, 1)
        parts = [
            f"{name:<20} {sum(x['entries'] for x in rs):>6} entries  R@10 {_pct(hits, probes)} "
            f"({hits}/{probes})  ctx {ctx:>6.0f}"
        ]
        for b in budgets:
            bh = sum(x["budget"][b]["hits"] for x in rs)
            parts.append(f"@{b} {_pct(bh, probes)}")
        print("  " + "  ".join(parts))

    print("\nAnswer recall (all conversations; @N = answered within N characters of context):")
    line("without pyramid", [r["base"] for r in rows])
    for key in rows[0]["pyramid"]:
        rs = [r["pyramid"][key] for r in rows]
        line(key, rs)
        levels: dict[str, int] = {}
        for x in rs:
            for lv, n in x["levels"].items():
                levels[str(lv)] = levels.get(str(lv), 0) + n
        print(
            f"  {'':<20} summaries by level {levels}; passes {max(x['passes'] for x in rs)}, "
            f"last pass operations {sum(x['last_pass_operations'] for x in rs)}; "
            f"LLM requests {sum(x['requests'] for x in rs)}, tokens (estimated) "
            f"{sum(x['tokens']['prompt'] for x in rs)} prompt + "
            f"{sum(x['tokens']['completion'] for x in rs)} completion, rejected replies "
            f"{sum(x['errors'] for x in rs)}; {sum(x['seconds'] for x in rs):.1f} s"
        )
    print("\nAnswer recall@10 by LoCoMo category (without → with, per pyramid):")
    cats = sorted({c for r in rows for c in r["base"]["categories"]})
    for c in cats:
        b = [sum(r["base"]["categories"].get(c, [0, 0])[i] for r in rows) for i in (0, 1)]
        cells = [f"{b[0]}/{b[1]}"]
        for key in rows[0]["pyramid"]:
            cells.append(
                f"{key} {sum(r['pyramid'][key]['categories'].get(c, [0, 0])[0] for r in rows)}"
            )
        print(f"  category {c}: " + ", ".join(cells))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--file", type=Path, default=DEFAULT_FILE)
    ap.add_argument("--conversation", action="append", default=None)
    ap.add_argument("--method", action="append", default=None, choices=METHODS)
    ap.add_argument("--writer", action="append", default=None, choices=("extractive", "stub"))
    ap.add_argument("--budgets", default="500,1000,1500,2000")
    ap.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    args.method = args.method or ["average"]
    args.writer = args.writer or ["extractive", "stub"]
    args.budgets = [int(b) for b in args.budgets.split(",") if b.strip()]
    for item in args.set:
        name, _, value = item.partition("=")
        OVERRIDES[name] = json.loads(value)
    if not args.file.exists():
        print(f"LoCoMo file not found: {args.file}", file=sys.stderr)
        return 2
    convs = load_locomo(args.file, conversations=args.conversation)
    embedder = CachedEmbedder()
    budget = Policy(summarize=True).with_(**OVERRIDES).summary_max_chars
    from tests.llm_stub import StubLLM

    rows = []
    with StubLLM() as stub:
        stub.respond_with(stub_responder(budget))
        for conv in convs:
            rows.append(run_conversation(conv, args, embedder, stub))
            embedder.save()
            print(f"  {conv.sample_id}: done", file=sys.stderr)
    if args.json:
        print(json.dumps(rows, indent=1, default=str))
    else:
        print_report(rows, args.budgets)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
