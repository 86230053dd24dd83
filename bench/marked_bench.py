"""The update channel's per-memory screen, :func:`~consolidation.planning.features.marked`,
and its shortcuts against the full lookups they stand in for: microseconds a text on
``bench/plan_bench.py``'s six-word texts (100K) and on LoCoMo's turns
(``../shared/data/locomo``), and the share of texts each shortcut lets through.

    .venv/bin/python bench/marked_bench.py

Prints one line per part: ``fold``; the three phrase tables' ``present`` against
``holds_any``; ``ATOM_HINT_RE.search`` against ``has_atom_hint``; ``canonical(t) != t``;
and ``marked`` itself.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from plan_bench import WORDS  # noqa: E402

from consolidation.aliases import canonical  # noqa: E402
from consolidation.atoms import ATOM_HINT_RE, fold, has_atom_hint  # noqa: E402
from consolidation.planning import features  # noqa: E402

LOCOMO = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo" / "locomo7.json"


def corpora() -> dict[str, list[str]]:
    rng = np.random.default_rng(0)
    words = rng.integers(0, len(WORDS), (100_000, 6))
    out = {"plan_bench six-word": [" ".join(WORDS[w] for w in row) for row in words]}
    if LOCOMO.exists():
        turns = [
            t["text"]
            for conv in json.loads(LOCOMO.read_text())
            for v in conv["conversation"].values()
            if isinstance(v, list)
            for t in v
            if isinstance(t, dict) and t.get("text")
        ]
        out["LoCoMo turns"] = turns
    return out


def per_text(texts: list[str], fn: Callable[[str], object]) -> tuple[float, float]:
    """(µs a text, share of truthy answers); ``canonical``'s cache is cleared first."""
    canonical.cache_clear()
    t = time.perf_counter()
    got = [fn(x) for x in texts]
    return (time.perf_counter() - t) / len(texts) * 1e6, sum(map(bool, got)) / len(texts)


def main() -> None:
    phrases = features._any_phrase()
    print(f"load {os.getloadavg()[0]:.1f}")
    for name, texts in corpora().items():
        folded = [fold(t) for t in texts]
        rows = [
            ("fold", texts, fold),
            ("phrases present", folded, phrases.present),
            ("phrases holds_any", folded, phrases.holds_any),
            ("ATOM_HINT_RE.search", folded, ATOM_HINT_RE.search),
            ("has_atom_hint", folded, has_atom_hint),
            ("canonical(t) != t", texts, lambda t: canonical(t) != t),
            ("marked", texts, features.marked),
        ]
        print(f"{name}: {len(texts)} texts")
        for label, xs, fn in rows:
            us, share = per_text(xs, fn)
            print(f"  {label:22s} {us:6.2f} µs a text, {share:6.1%} true")


if __name__ == "__main__":
    main()
