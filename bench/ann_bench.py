"""ANN benchmark: recall of planted pairs just above the link threshold, and CPU seconds, for
the candidate search's approximate index (consolidation/planning/ann.py) and its alternatives.

The vectors are ``plan_bench.py``'s kind: ``n`` random unit rows ``(n, 384) float32`` (random
directions are the hardest case for any index: no cluster structure to exploit) with 5 % of the
rows in planted pairs, half at cosine 0.95 (near-duplicates) and half at 0.78 (just above the
0.75 search threshold, ``min(link_threshold, contradiction_threshold)``; the target is that the
index finds ≥ 98 % of these). Every method is asked for all pairs ≥ 0.75; recall is
the share of each planted group found. CPU seconds are this process's (all threads:
``time.process_time``), wall seconds depend on the machine's other load (printed).

    .venv/bin/python bench/ann_bench.py     # 100K and 200K: before (ivf64) and now (ivf96)
    .venv/bin/python bench/ann_bench.py --sizes 20000 --methods ivf16,ivf64,hnsw32
    .venv/bin/python bench/ann_bench.py --sizes 100000 --methods exact   # the exact product

Methods (``--methods``, comma-separated):

- ``ivfP``: :func:`~consolidation.planning.ann.ann_candidate_pairs` with ``P`` probes (cells
  ``CELL_SCALE · √(P·n)``, the default); ``ivfP-iI``: with ``I`` k-means iterations instead
  of the default; ``ivfP-cX``: ``X · √(P·n)`` cells (``ivf16-c1``: the index until 2026-12);
  a ``-q8`` suffix (``ivf96-q8``): given onnxruntime's int8 product, as the console's workers
  plan (the probe ranks cells by the rows' int8 codes; the scan's bound is int8);
- ``hnswM``: faiss ``IndexHNSWFlat`` (inner product), ``M`` links per node, efConstruction 80,
  each row's 32 nearest searched at efSearch 128 and kept when ≥ the threshold (one thread
  adds, so the graph is deterministic);
- ``exact``: :func:`~consolidation.planning.candidate_pairs` ``method="split"`` (every pair).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from consolidation.adapters.int8_product import int8_product  # noqa: E402
from consolidation.planning import ann, candidate_pairs  # noqa: E402

DIM = 384
THRESHOLD = 0.75
PLANTED = (0.95, 0.78)
TARGET_RECALL = 0.98
"""The target: the index finds ≥ 98 % of the pairs just above the link threshold."""


def at_cosine(rng: np.random.Generator, base: np.ndarray, cos: float) -> np.ndarray:
    """``(k, 384) float32`` unit rows, each at cosine ``cos`` to its row of ``base`` (``(k,
    384)`` unit rows; exactly, before float32 rounding): ``base`` turned towards a random
    direction orthogonal to it."""
    noise = rng.standard_normal((len(base), DIM), dtype=np.float32)
    noise -= (noise * base).sum(1, keepdims=True) * base
    noise /= np.linalg.norm(noise, axis=1, keepdims=True)
    out = (cos * base + np.sqrt(1 - cos**2) * noise).astype(np.float32)
    return out / np.linalg.norm(out, axis=1, keepdims=True)


def planted_store(n: int, seed: int = 0, frac: float = 0.05) -> tuple[np.ndarray, dict]:
    """``(n, 384) float32`` unit rows and ``{cosine: (pairs, 2) int64}``: ``n · frac / 2`` pairs
    per planted cosine (disjoint rows), each ``(base, dup)`` with ``dup`` at exactly that
    cosine to ``base`` (before float32 rounding)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, DIM), dtype=np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    per = int(n * frac / 2)
    perm = rng.permutation(n)
    pairs = {}
    for g, cos in enumerate(PLANTED):
        rows = perm[2 * g * per : 2 * (g + 1) * per]
        base, dup = rows[:per], rows[per:]
        x[dup] = at_cosine(rng, x[base], cos)
        pairs[cos] = np.stack([np.minimum(base, dup), np.maximum(base, dup)], 1).astype(np.int64)
    return x, pairs


def hnsw_pairs(emb: np.ndarray, threshold: float, m: int, k: int = 32, ef: int = 128):
    """All pairs ≥ ``threshold`` among each row's ``k`` nearest by a faiss HNSW graph."""
    import faiss

    n, d = emb.shape
    index = faiss.IndexHNSWFlat(d, m, faiss.METRIC_INNER_PRODUCT)
    index.hnsw.efConstruction = 80
    threads = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)
    index.add(emb)
    faiss.omp_set_num_threads(threads)
    index.hnsw.efSearch = ef
    sims, nbr = index.search(emb, k)
    rows = np.repeat(np.arange(n, dtype=np.int64), k)
    nbr, sims = nbr.ravel().astype(np.int64), sims.ravel()
    keep = (sims >= threshold - 1e-3) & (nbr >= 0) & (nbr != rows)
    a, b = rows[keep], nbr[keep]
    code = np.unique(np.minimum(a, b) * n + np.maximum(a, b))
    return code // n, code % n


def run(method: str, emb: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(i, j)`` of the pairs ``method`` finds (see the module docstring)."""
    if method == "exact":
        i, j, _ = candidate_pairs(emb, THRESHOLD, method="split")
        return i, j
    if method.startswith("hnsw"):
        return hnsw_pairs(emb, THRESHOLD, int(method[4:]))
    if method.startswith("ivf"):
        spec, q8, _ = method[3:].partition("-q8")
        spec, _, mult = spec.partition("-c")
        probes, _, iters = spec.partition("-i")
        cells = round(float(mult) * (int(probes) * len(emb)) ** 0.5) if mult else None
        saved = ann._KMEANS_ITER
        ann._KMEANS_ITER = int(iters) if iters else saved
        try:
            i, j, _ = ann.ann_candidate_pairs(
                emb,
                THRESHOLD,
                probes=int(probes),
                cells=cells,
                product=int8_product() if q8 else None,
            )
        finally:
            ann._KMEANS_ITER = saved
        return i, j
    raise SystemExit(f"unknown method {method!r}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="100000,200000", help="rows, comma-separated (≤ 200K)")
    ap.add_argument("--methods", default="ivf64,ivf96", help="see the module docstring")
    ap.add_argument("--json", action="store_true", help="one JSON object per line instead")
    args = ap.parse_args()
    print(f"load average at start: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    for n in (int(s) for s in args.sizes.split(",")):
        emb, pairs = planted_store(n)
        for method in args.methods.split(","):
            w, c = time.perf_counter(), time.process_time()
            i, j = run(method, emb)
            wall, cpu = time.perf_counter() - w, time.process_time() - c
            found = set((i * n + j).tolist())
            rec = {
                str(cos): sum(int(a) * n + int(b) in found for a, b in p) / len(p)
                for cos, p in pairs.items()
            }
            row = {
                "n": n,
                "method": method,
                "cpu_s": round(cpu, 1),
                "wall_s": round(wall, 1),
                "pairs": len(found),
                "recall_0.95": round(rec["0.95"], 4),
                "recall_0.78": round(rec["0.78"], 4),
                "ratio_0.78_to_target": round(rec["0.78"] / TARGET_RECALL, 3),
                "met": rec["0.78"] >= TARGET_RECALL,
                "load": round(os.getloadavg()[0], 1),
            }
            if args.json:
                print(json.dumps(row), flush=True)
            else:
                print(
                    f"{n:>8} {method:<10} cpu {cpu:7.1f} s  wall {wall:7.1f} s  "
                    f"recall 0.95 {rec['0.95']:.4f}  0.78 {rec['0.78']:.4f} "
                    f"(÷ target {rec['0.78'] / TARGET_RECALL:.3f}, "
                    f"{'met' if row['met'] else 'MISSED'})  load {row['load']}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
