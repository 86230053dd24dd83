"""Design input, not the engine's path: what an incremental pass's candidate search would cost
and find if it reused the last full pass's IVF cells (consolidation/planning/ann.py) instead of
today's exact product of the new rows with every stored row (``vectors.query_pairs`` over the
kept bounding rows of :mod:`~consolidation.planning.rowcache`).

The store is ``plan_bench.py``'s kind of vectors: ``n`` random unit rows ``(n, 384) float32``
(the hardest case for an index). 1,000 new rows: 250 planted at cosine 0.95 to a stored row,
250 at 0.78 (just above the 0.75 search threshold), 500 random. Untimed, as a previous pass
would have left them: the stored rows' k-means cells and inverted lists (ann.py's defaults:
``CELL_SCALE · √(PROBES · n)`` cells) and their bounding rows (the row cache's head). Timed:

- ``exact``: ``query_pairs`` with the kept bounding rows (what an incremental pass runs today);
- ``ivfP``: the new rows probe their ``P`` nearest cells; each probed cell's members are
  compared with the new rows probing it (bounding rows, then the exact cosine of the pairs
  that pass); the new rows with each other exactly.

Prints one JSON line per method: wall seconds, pairs found, recall of the exact method's pairs
and of each planted group, and the load average.

    .venv/bin/python bench/ivf_incremental_bench.py            # n = 1,000,000
    .venv/bin/python bench/ivf_incremental_bench.py 200000

Measured 2026-12-07 (2 cores, load average 1.5–1.6), n = 1M, recall of the 0.78 plants over
two draws of the plants' noise (250 pairs each, so ±1 pair is 0.4 %): exact 1.66–1.86 s,
1.000; ivf96 0.54–0.67 s, 0.872 / 0.884; ivf192 0.66–0.71 s, 0.940 / 0.936; ivf384 0.90–0.97
s, 0.988 / 0.976; ivf768 1.31–1.41 s, 1.000 / 1.000 (every 0.95 plant found from 192 probes
on). Only the new rows search here (a stored row's probes are not kept), so ``PROBES`` finds
far fewer pairs than the full search, where a pair is found from either end (98.3 % at
0.78): ≥ 98 % needs 384–768 probes, for about ½–¾ of the exact product's time. Reusing the
cells would make an incremental pass's search approximate, as a full pass of
≥ ``ANN_MIN_ROWS`` rows already is: that decision is the planning-at-scale issue's.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from ann_bench import at_cosine  # noqa: E402

from consolidation.planning import ann  # noqa: E402
from consolidation.planning.rowcache import SPREADS  # noqa: E402
from consolidation.planning.vectors import (  # noqa: E402
    CachedBounds,
    UnitRows,
    bound_head,
    bounding_rows,
    query_pairs,
)

THRESHOLD = 0.75
D = 384


def unit(rng: np.random.Generator, k: int) -> np.ndarray:
    v = rng.standard_normal((k, D)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def ivf_pairs(emb, q, cent, members, slab, probes) -> set[int]:
    """Codes ``lo · N + hi`` of the pairs at cosine ≥ THRESHOLD with an end in ``q``."""
    N = len(emb)
    mrows, mb = members
    probed = ann._probe(cent, emb, q, probes, 2)[0]
    srows, sb = ann._lists(probed, q.astype(np.int32), len(cent), 2)
    lo, hi = [], []
    for c in range(len(cent)):
        s_rows = srows[sb[c] : sb[c + 1]]
        if not len(s_rows):
            continue
        m_rows = mrows[mb[c] : mb[c + 1]]
        r, k = np.nonzero(slab[s_rows] @ slab[m_rows].T >= THRESHOLD - 1e-3)
        if len(r):
            a, b = s_rows[r].astype(np.int64), m_rows[k].astype(np.int64)
            ok = np.einsum("ij,ij->i", emb[a], emb[b]) >= THRESHOLD
            lo.append(a[ok])
            hi.append(b[ok])
    a, b = np.nonzero(np.triu(emb[q] @ emb[q].T >= THRESHOLD, 1))
    lo.append(q[a])
    hi.append(q[b])
    lo_all, hi_all = np.concatenate(lo), np.concatenate(hi)
    return set((np.minimum(lo_all, hi_all) * N + np.maximum(lo_all, hi_all)).tolist())


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    rng = np.random.default_rng(n)
    stored = unit(rng, n)
    bases = rng.choice(n, 500, replace=False)
    new = np.concatenate(
        [
            at_cosine(rng, stored[bases[:250]], 0.95),
            at_cosine(rng, stored[bases[250:]], 0.78),
            unit(rng, 500),
        ]
    )
    emb = np.concatenate([stored, new])
    del stored
    N = len(emb)
    q = np.arange(n, N)
    planted = {
        0.95: {int(b) * N + n + i for i, b in enumerate(bases[:250])},
        0.78: {int(b) * N + n + 250 + i for i, b in enumerate(bases[250:])},
    }
    # what the last full pass leaves (untimed): cells and lists of the stored rows, bounds
    cells = round(ann.CELL_SCALE * (ann.PROBES * n) ** 0.5)
    cent = ann._centroids(emb[:n], cells, 0)
    home = ann._probe(cent, emb[:n], None, 1, 2)[1]
    members = ann._lists(home, np.arange(n, dtype=np.int32), cells, 2)
    head = bound_head(THRESHOLD, D, SPREADS)
    rest = np.linalg.norm(emb[:, head:], axis=1)
    slab = bounding_rows(emb[:, :head], rest)
    rows = UnitRows(list(emb))
    kept = CachedBounds(slab, np.arange(N, dtype=np.int64), head)

    t = time.perf_counter()
    i, j, _ = query_pairs(rows, THRESHOLD, q, bounds=kept)
    exact_s = time.perf_counter() - t
    exact = set((i * N + j).tolist())
    results = [("exact", exact_s, exact)]
    for probes in (ann.PROBES, 2 * ann.PROBES, 4 * ann.PROBES, 8 * ann.PROBES):
        t = time.perf_counter()
        found = ivf_pairs(emb, q, cent, members, slab, probes)
        results.append((f"ivf{probes}", time.perf_counter() - t, found))
    for name, wall, found in results:
        line = {
            "n": n,
            "method": name,
            "wall_s": round(wall, 2),
            "pairs": len(found),
            "recall_of_exact": round(len(found & exact) / max(1, len(exact)), 4),
            "recall_0.95": round(len(found & planted[0.95]) / 250, 4),
            "recall_0.78": round(len(found & planted[0.78]) / 250, 4),
            "load_average": round(os.getloadavg()[0], 2),
        }
        print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
