"""Embedding throughput: OnnxMiniLMEmbedder vs chromadb's stock ONNXMiniLM_L6_V2.

Both embed the same LoCoMo dialog turns (default: the first 1,000 of locomo7.json, in file
order) with the same all-MiniLM-L6-v2 weights; the stock function runs offline from the layout
made by ``prepare_chroma_stock_layout``. Prints texts/s of each, the ratio, the worst cosine
between the two, CPU seconds and the load average (this box is shared: figures under load are
lower). Targets (docs/ARCHITECTURE.md "Embeddings"): ours ≥ 300 texts/s and ≥ 12× the stock
function.

    .venv/bin/python bench/embed_bench.py [--texts 1000] [--repeat 3] [--threads 2]

Exit status 0 always (a benchmark reports; it does not gate).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from consolidation.adapters.embedder import (  # noqa: E402
    OnnxMiniLMEmbedder,
    prepare_chroma_stock_layout,
)

LOCOMO = Path(
    os.environ.get(
        "LOCOMO_PATH",
        Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo" / "locomo7.json",
    )
)
TARGET_TEXTS_PER_S = 300.0
TARGET_RATIO = 12.0


def locomo_turns(path: Path, n: int) -> list[str]:
    """The first ``n`` dialog turn texts of a LoCoMo file, in file order."""
    samples = json.loads(path.read_text(encoding="utf-8"))
    turns: list[str] = []
    for sample in samples:
        conv = sample["conversation"]
        sessions = sorted(
            (k for k, v in conv.items() if k.startswith("session_") and isinstance(v, list)),
            key=lambda k: int(k.split("_")[1]),
        )
        for key in sessions:
            turns.extend(t["text"] for t in conv[key])
    if len(turns) < n:
        raise SystemExit(f"{path} has only {len(turns)} dialog turns, {n} requested")
    return turns[:n]


def timed(
    fn: Callable[[list[str]], Any], texts: list[str], repeat: int
) -> tuple[float, float, np.ndarray]:
    """Best wall seconds and its CPU seconds over ``repeat`` runs, and the last output."""
    best_wall, best_cpu, out = float("inf"), 0.0, None
    for _ in range(repeat):
        wall, cpu = time.perf_counter(), time.process_time()
        out = fn(texts)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        if wall < best_wall:
            best_wall, best_cpu = wall, cpu
    return best_wall, best_cpu, np.asarray(out, dtype=np.float32)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--texts", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=3, help="runs of ours (best is reported)")
    ap.add_argument("--stock-repeat", type=int, default=1, help="runs of the stock function")
    ap.add_argument("--batch-size", type=int, default=None)
    ap.add_argument("--max-batch-tokens", type=int, default=None)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--skip-stock", action="store_true")
    args = ap.parse_args()

    texts = locomo_turns(LOCOMO, args.texts)
    kwargs = {
        k: v
        for k, v in {
            "batch_size": args.batch_size,
            "max_batch_tokens": args.max_batch_tokens,
            "threads": args.threads,
        }.items()
        if v is not None
    }
    ours = OnnxMiniLMEmbedder(**kwargs)
    lengths = np.array([len(t) for t in ours.tokenize(texts)])
    print(
        f"{len(texts)} LoCoMo dialog turns: tokens mean {lengths.mean():.1f}, "
        f"median {np.median(lengths):.0f}, max {lengths.max()}, total {lengths.sum()}"
    )
    print(
        f"ours: batch_size={ours.batch_size} max_batch_tokens={ours.max_batch_tokens} "
        f"threads={ours.threads}"
    )

    ours.embed(texts[:64])  # warm-up: session arenas, thread pool
    wall, cpu, ours_vecs = timed(ours.embed, texts, args.repeat)
    ours_rate = len(texts) / wall
    print(
        f"ours : {ours_rate:8.1f} texts/s  ({wall:.2f} s wall, {cpu:.2f} s CPU, "
        f"best of {args.repeat})"
    )

    if not args.skip_stock:
        from chromadb.utils.embedding_functions.onnx_mini_lm_l6_v2 import ONNXMiniLM_L6_V2

        with tempfile.TemporaryDirectory(prefix="chroma-stock-") as tmp:
            stock = ONNXMiniLM_L6_V2(preferred_providers=["CPUExecutionProvider"])
            stock.DOWNLOAD_PATH = prepare_chroma_stock_layout(tmp)
            stock(texts[:32])  # warm-up
            s_wall, s_cpu, stock_vecs = timed(stock, texts, args.stock_repeat)
        stock_rate = len(texts) / s_wall
        cos = (ours_vecs * stock_vecs).sum(axis=1)
        print(f"stock: {stock_rate:8.1f} texts/s  ({s_wall:.2f} s wall, {s_cpu:.2f} s CPU)")
        print(
            f"ratio: {ours_rate / stock_rate:8.1f}x   cosine ours vs stock: min {cos.min():.7f}"
            f", mean {cos.mean():.7f}"
        )
        print(
            f"target ratio >= {TARGET_RATIO:.0f}x: "
            f"{'met' if ours_rate / stock_rate >= TARGET_RATIO else 'NOT met'}"
        )
    print(
        f"target >= {TARGET_TEXTS_PER_S:.0f} texts/s: "
        f"{'met' if ours_rate >= TARGET_TEXTS_PER_S else 'NOT met'}"
    )
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"load average (1/5/15 min): {load}; cores: {os.cpu_count()}")


if __name__ == "__main__":
    main()
