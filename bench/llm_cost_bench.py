"""What the distillation of one 20-message session costs: tokens in and out, and USD at a
small hosted model's published price, against the seed's "a typical session of 20 messages
costs ~$0.001".

The model answers come from the stub server (``tests/llm_stub.py``: prompt tokens = UTF-8
bytes / 4, about what an English BPE tokenizer counts), one fact per group citing its first
two messages; with ``--llama`` the same session also goes to the local llama.cpp server over
Gemma 3 270M when ``make test-llm`` installed it (its own token counts). The price is
gpt-4o-mini's ($0.15 / 1M input, $0.60 / 1M output; ``settings.LLM_PRICES``). The session is
LoCoMo conv-26's first session with 20 turns, or 20 made-up facts when the LoCoMo file is
missing. Only the distillation: the LLM judge sends nothing unless the plan has unsure pairs.

    .venv/bin/python bench/llm_cost_bench.py [--llama] [--group-size 16]

Exit status 0 always.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from consolidation import MemoryRecord, Policy  # noqa: E402
from consolidation.adapters.llm import LLMWriter  # noqa: E402
from consolidation.distill import distill  # noqa: E402
from consolidation.llm_cost import llm_cost_usd  # noqa: E402
from consolidation.locomo import load_locomo  # noqa: E402
from tests.llm_stub import StubLLM  # noqa: E402

PRICES = {"gpt-4o-mini": {"in": 0.15, "out": 0.60}}
"""OpenAI's published standard price of gpt-4o-mini, USD per 1M tokens (as in settings)."""
SEED_REFERENCE_USD = 0.001
FALLBACK = [
    "I moved from Sweden to Boston four years ago for work.",
    "Last Saturday I ran a charity race for mental health.",
    "Our planning meeting is on the first Monday of each month.",
    "My favourite board game is still Settlers of Catan.",
    "We finally adopted a grey rescue cat and named her Pixel.",
]
LOCOMO = Path(
    os.environ.get(
        "LOCOMO_PATH",
        Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo" / "locomo7.json",
    )
)


def session(n: int = 20) -> tuple[list[MemoryRecord], str]:
    """``n`` episodic memories of one session, and where they come from."""
    if LOCOMO.exists():
        (conv,) = load_locomo(LOCOMO, conversations=["conv-26"])
        by: dict[str, list[MemoryRecord]] = {}
        for m in conv.memories:
            if m.metadata.get("layer") == "episodic":
                by.setdefault(str(m.metadata["session"]), []).append(m)
        for _, turns in sorted(by.items(), key=lambda kv: int(kv[0])):
            if len(turns) >= n:
                return turns[:n], "LoCoMo conv-26"
    facts = [f"Turn {i}: {FALLBACK[i % len(FALLBACK)]}" for i in range(n)]
    return [
        MemoryRecord(f"m{i:02d}", t, None, {"session": "s1"}) for i, t in enumerate(facts)
    ], "made-up facts"


def run(writer: LLMWriter, records: list[MemoryRecord], group_size: int) -> dict[str, int]:
    """Distil ``records`` with ``writer``; ``{"requests", "tokens_in", "tokens_out"}``."""
    policy = Policy(distill_group_size=group_size, distill_budget_seconds=86_400)
    ctx = distill(records, writer, policy=policy).to_context()
    return {k: int(ctx.get(k, 0)) for k in ("requests", "tokens_in", "tokens_out")}


def report(label: str, t: dict[str, int]) -> None:
    usd = llm_cost_usd(t, "gpt-4o-mini", PRICES) or 0.0
    print(
        f"{label:<28} {t['requests']:>3} requests {t['tokens_in']:>6} in {t['tokens_out']:>5} out"
        f"  ${usd:.6f} at gpt-4o-mini  ({usd / SEED_REFERENCE_USD:.2f}× the seed's ~$0.001)"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--llama", action="store_true", help="also the local llama.cpp server")
    ap.add_argument("--group-size", type=int, default=Policy().distill_group_size)
    args = ap.parse_args()
    records, source = session()
    print(f"{len(records)} messages of one session ({source}), groups of {args.group_size}")
    with StubLLM() as stub:
        groups = -(-len(records) // args.group_size)
        for g in range(groups):
            ids = [r.id for r in records[g * args.group_size : (g + 1) * args.group_size]][:2]
            stub.push_facts([{"text": "A fact both messages state.", "evidence": ids}])
        writer = LLMWriter(stub.base_url, "bench-key", "gpt-4o-mini", 30.0)
        report("stub server", run(writer, records, args.group_size))
    if args.llama:
        from tests.llama_server import MODEL_ALIAS, LlamaServer, missing

        why = missing()
        if why:
            print(f"llama.cpp: skipped ({why})")
        else:
            with LlamaServer() as server:
                writer = LLMWriter(server.base_url, None, MODEL_ALIAS, 300.0)
                report(f"llama.cpp {MODEL_ALIAS}", run(writer, records, args.group_size))
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
