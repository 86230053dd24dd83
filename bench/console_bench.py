"""Console page benchmark: server time per page at scale; prints ONE JSON object.

Builds, in a throw-away database and an in-process Chroma (``CHROMA_MODE=ephemeral``; a Chroma
server adds its HTTP round trip, ~2–5 ms per call here):

- an agent with ``--memories`` (50,000) memories: random unit vectors ``(n, 384) float32``,
  texts from a word list, tiers ``curated`` (10 %), ``working`` (30 %) or none (60 %), 5 %
  pinned — the memory list's first page, a text filter, a tier filter and a later page;
- ``--agents`` (50) agents with store samples and passes — the dashboard;
- ``--passes`` (10,000) passes spread over the agents — the audit page;
- one proposed pass with ``--operations`` (5,000) merges of two sources, every other one losing
  a sentence (risk and lost content scored, figures kept as the review services keep them) —
  the proposal page: summary and guard from the pass's stored figures, the Review tab's first
  page, the collapsed groups' counts. ``fragments`` times what that page loads with htmx (not
  pages, so not in ``all_met``): the stale check against the store (worst case: none of the
  sources is in the store, so every operation is listed or counted) and one group's rows
  when opened.

Server time = the Django test client's request (URL routing, middleware, view, template), the
median of ``--repeat`` (5) requests after one warm-up request (the cold figure is printed too).
``first_requests``: the start-up warm-up (``stores.warm_up``: the Chroma client and the
embedder, as ``wsgi.py`` runs it) and then the first agent page and first memory detail.
``cpu_ms`` is the same requests' process CPU time (this process and the in-process Chroma's
threads): on a shared, loaded machine wall time grows with the load, CPU time much less.
Target: each ≤ 150 ms.

    .venv/bin/python bench/console_bench.py                 # the issue's sizes (~2–3 min)
    .venv/bin/python bench/console_bench.py --memories 5000 --passes 1000 --operations 500
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TARGET_MS = 150.0
_WORD_LIST = (
    "apple river stone cloud garden violin harbor lantern meadow copper falcon orchard ribbon "
    "canyon velvet thunder maple island compass marble pepper saddle willow glacier trumpet "
    "cobalt poppy quartz tundra walnut zephyr bramble cinder dune ember fjord grove"
)
WORDS = _WORD_LIST.split()


def setup_django(var: Path) -> None:
    os.environ.update(
        {
            "DJANGO_SETTINGS_MODULE": "memoryadmin.settings",
            "MEMORYADMIN_VAR_DIR": str(var),
            "CHROMA_MODE": "ephemeral",
            "DEBUG": "0",
            "SECRET_KEY": "bench-only-secret",
            "ALLOWED_HOSTS": "testserver",
            "LOG_LEVEL": "WARNING",
        }
    )
    os.environ.setdefault("DATABASE_URL", f"sqlite:///{var / 'bench.sqlite3'}")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def build_store(agent, n: int) -> None:
    import numpy as np

    from memoryadmin.core import stores

    rng = np.random.default_rng(7)
    collection = stores.get_store(agent).collection
    words = rng.integers(0, len(WORDS), (n, 8))
    for start in range(0, n, 2000):
        stop = min(n, start + 2000)
        vecs = rng.standard_normal((stop - start, 384)).astype(np.float32)
        vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
        metas = []
        for i in range(start, stop):
            meta = {"created_at": "2026-10-01T00:00:00+00:00", "importance": 0.5}
            roll = i % 10
            if roll == 0:
                meta["tier"] = "curated"
            elif roll < 4:
                meta["tier"] = "working"
            if i % 20 == 7:
                meta["pinned"] = True
            metas.append(meta)
        docs = [f"Memory {i}: " + " ".join(WORDS[w] for w in words[i]) for i in range(start, stop)]
        collection.add(
            ids=[f"mem-{i:07d}" for i in range(start, stop)],
            embeddings=vecs,
            documents=docs,
            metadatas=metas,
        )


FIGURES = {
    "entries_after": 950,
    "merged": 50,
    "promoted": 0,
    "pruned": 0,
    "reconciled": 0,
    "loss_fraction": 0.05,
    "removed": 50,
    "written": 0,
}
"""The figures of the listed passes (``Pass.figures``; no per-kind counts: a page showing one
evaluates it afresh)."""


def build_rows(big, n_agents: int, n_passes: int, n_ops: int):
    from django.utils import timezone

    from consolidation import content_hash
    from memoryadmin.agents.models import StoreSample
    from memoryadmin.agents.services.agents import agent_create
    from memoryadmin.proposals.models import Operation, OperationSource, Pass
    from memoryadmin.proposals.services.evaluation import pass_store_figures
    from memoryadmin.proposals.services.review import pass_score_operations

    agents = [big] + [
        agent_create(
            name=f"Agent {i:02d}", slug=f"agent-{i:02d}", collection_name=f"bench-agent-{i:02d}"
        )
        for i in range(1, n_agents)
    ]
    StoreSample.objects.bulk_create(
        StoreSample(agent=a, count=1000 + i) for i, a in enumerate(agents) for _ in range(3)
    )
    statuses = ["applied", "rejected_by_guard", "dismissed", "failed", "proposed", "rolled_back"]
    now = timezone.now()
    Pass.objects.bulk_create(
        (
            Pass(
                agent=agents[i % len(agents)],
                trigger="schedule",
                status=statuses[i % 6],
                entries_before=1000,
                figures=FIGURES,  # 1,000 → 950: 50 merged away
                created_at=now,
                finished_at=now,
            )
            for i in range(n_passes)
        ),
        batch_size=2000,
    )
    run = Pass.objects.create(
        agent=big,
        trigger="operator",
        status="proposed",
        policy={},
        entries_before=2 * n_ops,
        max_loss_fraction=1.0,
    )
    meta = {"created_at": "2026-10-01T00:00:00+00:00", "importance": 0.5}
    ops = Operation.objects.bulk_create(
        (
            Operation(
                run=run,
                index=i,
                kind="merge",
                rule="exact_duplicate",
                reason="duplicates",
                scores={"min_cosine": 1.0},
                source_ids=[f"m{i}-a", f"m{i}-b"],
                removes=[f"m{i}-a", f"m{i}-b"],
                result_id=f"merged-{i}",
                result_document=f"Merged note {i}.",
                planned_document=f"Merged note {i}.",
                result_metadata=meta,
            )
            for i in range(n_ops)
        ),
        batch_size=2000,
    )

    def doc(i: int, side: str) -> str:  # every other merge loses a sentence of its B side
        lost = f" Moved to {WORDS[i % len(WORDS)]} in {1900 + i % 120}." if i % 2 else ""
        return f"Merged note {i}." + (lost if side == "b" else "")

    OperationSource.objects.bulk_create(
        (
            OperationSource(
                operation=op,
                position=p,
                memory_id=f"m{op.index}-{s}",
                document=doc(op.index, s),
                metadata=meta,
                removed=True,
                content_hash=content_hash(doc(op.index, s), meta),
            )
            for op in ops
            for p, s in enumerate("ab")
        ),
        batch_size=4000,
    )
    pass_score_operations(run=run)  # risk and lost content, as a planned pass has
    pass_store_figures(run=run)  # as the review services keep them
    return run


def first_request(client, url: str, params: dict) -> float:
    """Milliseconds of one request (the first of its kind in this process)."""
    t0 = time.perf_counter()
    r = client.get(url, params)
    assert r.status_code == 200, (url, r.status_code)
    return (time.perf_counter() - t0) * 1000


def time_page(client, url: str, params: dict, repeat: int, headers: dict | None = None) -> dict:
    cpu: list[float] = []

    def once() -> float:
        t0, c0 = time.perf_counter(), time.process_time()
        r = client.get(url, params, **(headers or {}))
        ms = (time.perf_counter() - t0) * 1000
        cpu.append((time.process_time() - c0) * 1000)
        assert r.status_code == 200, (url, r.status_code)
        return ms

    cold = once()
    runs = [once() for _ in range(repeat)]
    median = statistics.median(runs)
    return {
        "ms": round(median, 1),
        "cpu_ms": round(statistics.median(cpu[1:]), 1),
        "cold_ms": round(cold, 1),
        "max_ms": round(max(runs), 1),
        "met": median <= TARGET_MS,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--memories", type=int, default=50_000)
    ap.add_argument("--agents", type=int, default=50)
    ap.add_argument("--passes", type=int, default=10_000)
    ap.add_argument("--operations", type=int, default=5_000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="console-bench-") as tmp:
        setup_django(Path(tmp))
        from django.contrib.auth.models import User
        from django.test import Client
        from django.urls import reverse

        from memoryadmin.agents.services.agents import agent_create
        from memoryadmin.core.roles import ensure_roles

        t0 = time.perf_counter()
        ensure_roles()
        user = User.objects.create_superuser("bench", "bench@example.org", "bench-password")
        big = agent_create(name="Big agent", slug="big", collection_name="bench-big")
        build_store(big, args.memories)
        run = build_rows(big, args.agents, args.passes, args.operations)
        built = time.perf_counter() - t0
        client = Client()
        client.force_login(user)
        # What a fresh web process does before its first request (wsgi.py), then the first
        # agent page and the first memory detail, each once: what an operator waits for first.
        from memoryadmin.core.stores import warm_up

        t0 = time.perf_counter()
        warmed = warm_up()
        first = {
            "warm_up_s": round(time.perf_counter() - t0, 2),
            "warm_up_parts_s": {k: round(v, 2) for k, v in warmed.items()},
            **{
                name: round(first_request(client, url, params), 1)
                for name, url, params in (
                    ("agent_page_ms", reverse("agent_detail", args=["big"]), {}),
                    (
                        "memory_detail_ms",
                        reverse("memory_detail", args=["big"]),
                        {"id": "mem-0000000"},
                    ),
                )
            },
        }
        mem = reverse("memory_list", args=["big"])
        later = max(1, args.memories // 50 // 2)
        pages = {
            "proposal_page": (reverse("pass_detail", args=[run.pk]), {}),
            "memory_list_first_page": (mem, {}),
            "memory_list_text_filter": (mem, {"contains": "violin harbor"}),
            "memory_list_tier_filter": (mem, {"tier": "curated"}),
            "memory_list_default_tier_filter": (mem, {"tier": "working"}),
            "memory_list_later_page": (mem, {"page": later}),
            "dashboard": (reverse("dashboard"), {}),
            "audit_page": (reverse("audit"), {}),
        }
        results = {
            name: time_page(client, url, params, args.repeat)
            for name, (url, params) in pages.items()
        }
        htmx = {"HTTP_HX_REQUEST": "true"}
        fragments = {  # what the proposal page loads with htmx once shown or opened
            "proposal_stale_check": (reverse("pass_stale", args=[run.pk]), {}),
            "proposal_group_opened": (
                reverse("pass_detail", args=[run.pk]),
                {"kind": "merge", "merge_page": 1},
            ),
        }
        loaded = {
            name: time_page(client, url, params, args.repeat, htmx)
            for name, (url, params) in fragments.items()
        }
        print(
            json.dumps(
                {
                    "sizes": {
                        "memories": args.memories,
                        "agents": args.agents,
                        "passes": args.passes,
                        "operations": args.operations,
                    },
                    "load_average": round(os.getloadavg()[0], 1),
                    "cpus": os.cpu_count(),
                    "target_ms": TARGET_MS,
                    "setup_s": round(built, 1),
                    "first_requests": first,
                    "pages": results,
                    "all_met": all(r["met"] for r in results.values()),
                    "fragments": loaded,
                }
            )
        )


if __name__ == "__main__":
    main()
