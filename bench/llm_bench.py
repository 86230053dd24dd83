"""Distillation against a real local model: per-group prompt tokens, seconds and outcome.

Starts llama-cpp-python's server over the Gemma 3 270M model (``make test-llm`` / ``make
bench-llm`` install both) on a free port, then distils LoCoMo sessions (conv-26 by default) in
groups of each size asked for, once with the facts schema sent as ``response_format`` (the
server's grammar) and once without any (``--formats schema,none``), and prints one line per
group: memories, response format, prompt and completion tokens, seconds, outcome and reason,
facts proposed. These are the figures behind the policy defaults ``distill_group_size``,
``llm_max_tokens`` and ``distill_budget_seconds`` (docstring of ``consolidation.policy``).

    .venv/bin/python bench/llm_bench.py [--sizes 8,16] [--groups 1] [--formats schema,none]
        [--sample conv-26] [--max-tokens 768] [--json out.json]

The box is shared: the load average is printed with the figures. Exit status 0 always.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from consolidation import Policy  # noqa: E402
from consolidation.adapters.llm import LLMWriter  # noqa: E402
from consolidation.distill import distill  # noqa: E402
from consolidation.locomo import load_locomo  # noqa: E402
from tests.llama_server import CONTEXT_TOKENS, MODEL_ALIAS, LlamaServer, missing  # noqa: E402

LOCOMO = Path(
    os.environ.get(
        "LOCOMO_PATH",
        Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo" / "locomo7.json",
    )
)


def _sessions(sample: str, size: int, groups: int) -> list:
    """The first ``size`` turns of the first ``groups`` sessions with at least that many."""
    (conv,) = load_locomo(LOCOMO, conversations=[sample])
    by: dict[int, list] = {}
    for m in conv.memories:
        if m.metadata.get("layer") == "episodic":
            by.setdefault(int(m.metadata["session"]), []).append(m)
    picked = [turns[:size] for _, turns in sorted(by.items()) if len(turns) >= size][:groups]
    return [m for turns in picked for m in turns]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="8,16")
    ap.add_argument("--groups", type=int, default=1)
    ap.add_argument("--formats", default="schema,none")
    ap.add_argument("--sample", default="conv-26")
    ap.add_argument("--max-tokens", type=int, default=768)
    ap.add_argument("--timeout", type=float, default=300.0)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    why = missing()
    if why:
        print(f"skipped: {why}")
        return
    rows = []
    with LlamaServer() as server:
        print(f"llama.cpp server {server.base_url}, model {MODEL_ALIAS}, n_ctx {CONTEXT_TOKENS}")
        cols = ("mem", "format", "in", "out", "s", "outcome", "reason", "facts")
        print("{:>3} {:<18} {:>5} {:>5} {:>7} {:<8} {:<14} {:>5}".format(*cols))
        for size in (int(s) for s in args.sizes.split(",")):
            records = _sessions(args.sample, size, args.groups)
            for fmt in args.formats.split(","):
                writer = LLMWriter(
                    server.base_url, None, MODEL_ALIAS, args.timeout, json_mode=(fmt != "none")
                )
                policy = Policy(
                    distill_group_size=max(3, size),
                    llm_max_tokens=args.max_tokens,
                    llm_context_tokens=CONTEXT_TOKENS,
                    distill_budget_seconds=86_400,
                )
                result = distill(records, writer, policy=policy)
                sent = result.ledger.response_format or writer.response_format
                for r in result.ledger.rows:
                    row = {**r.to_dict(), "size": size, "format": sent}
                    rows.append(row)
                    print(
                        f"{r.memories:>3} {sent:<18} {r.prompt_tokens:>5} "
                        f"{r.completion_tokens:>5} {r.seconds:>7.1f} {r.outcome:<8} "
                        f"{r.reason:<14} {r.facts:>5}"
                    )
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
