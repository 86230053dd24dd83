"""What ``GET /metrics`` exposes, read from the database at each scrape by one
:class:`ConsoleCollector` (no counter lives in the web process: every figure is a query over
stored rows, so all web processes answer the same and a restart loses nothing).

Names: the OpenTelemetry GenAI conventions define ``gen_ai.memory.*`` only as span attributes
(``gen_ai.memory.store.id``, ``gen_ai.memory.record.id``…) and no memory metric, so every
metric is ``memoryadmin_*``; labels take the conventions' attribute names where one exists
(``gen_ai_request_model``, ``gen_ai_token_type`` = ``input`` / ``output``, dots as
underscores). ``agent`` is the agent's slug.

Memories per agent come from the newest :class:`~memoryadmin.agents.models.StoreSample`
(written after every apply, import and census), not from Chroma: a scrape never opens a
collection.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from django.conf import settings
from django.db.models import Count, Max, Min, OuterRef, Subquery, Sum
from django.utils import timezone
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from consolidation.llm_cost import llm_cost_usd
from memoryadmin.agents.models import StoreSample
from memoryadmin.core.models import AuditEvent
from memoryadmin.ops.selectors.health import oldest_queued_task_age, worker_beat_age
from memoryadmin.proposals.models import Operation, Pass
from memoryadmin.proposals.telemetry import LLM_MODEL_LOOKUP, LLM_TOTALS_LOOKUP

__all__ = [
    "DURATION_BUCKETS",
    "LOSS_BUCKETS",
    "LOST_SENTENCE_BUCKETS",
    "ConsoleCollector",
    "operation_state",
]

LOSS_BUCKETS = (0.0, 0.01, 0.02, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.5, 1.0)
"""Loss fraction bucket bounds: fine below the default guard (0.25), coarse above."""
LOST_SENTENCE_BUCKETS = (0, 1, 2, 5, 10, 20, 50, 100, 500)
"""Lost sentences per pass (included operations)."""
DURATION_BUCKETS = (1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600)
"""Seconds: planning a pass (start → proposal), applying it (applying → finished)."""


OPEN_PASS = frozenset(
    {
        Pass.Status.QUEUED,
        Pass.Status.RUNNING,
        Pass.Status.PROPOSED,
        Pass.Status.APPROVED,
        Pass.Status.APPLYING,
    }
)
"""Pass states in which an operation still waiting is truly ``pending``."""


def operation_state(status: str, run_status: str) -> str:
    """The state an operation is in for a reader: its own ``status``, except that an operation
    still ``pending`` in a pass that is over (rejected, rejected by the guard, failed, stale,
    superseded…) takes its pass's status, since it will never be applied."""
    if status == Operation.Status.PENDING and run_status not in OPEN_PASS:
        return run_status
    return status


def _histogram(
    name: str, doc: str, values: Mapping[str, Sequence[float]], bounds: Iterable[float]
) -> HistogramMetricFamily:
    """One histogram per agent from raw observations (cumulative buckets, sum, count)."""
    bounds = list(bounds)
    family = HistogramMetricFamily(name, doc, labels=["agent"])
    for agent, observed in sorted(values.items()):
        buckets = [(repr(float(b)), sum(1 for v in observed if v <= b)) for b in bounds]
        buckets.append(("+Inf", len(observed)))
        family.add_metric([agent], buckets, sum_value=float(sum(observed)))
    return family


class ConsoleCollector(Collector):
    """The console's figures as Prometheus metric families, one pass of queries per scrape.

    Register it on a fresh ``CollectorRegistry`` per request (``views.metrics``); ``collect``
    reads the database and raises what the database raises."""

    def collect(self) -> Iterator[Metric]:
        yield from self._passes()
        yield from self._operations()
        yield from self._loss()
        yield from self._durations()
        yield from self._proposals()
        yield from self._memories()
        yield from self._llm()
        yield from self._worker()

    def _passes(self) -> Iterator[Metric]:
        family = GaugeMetricFamily(
            "memoryadmin_passes",
            "Passes by agent, status and trigger (every stored pass).",
            labels=["agent", "status", "trigger"],
        )
        rows = Pass.objects.values_list("agent__slug", "status", "trigger").annotate(n=Count("id"))
        for agent, status, trigger, n in sorted(rows):
            family.add_metric([agent, status, trigger], n)
        yield family

    def _operations(self) -> Iterator[Metric]:
        family = GaugeMetricFamily(
            "memoryadmin_operations",
            "Planned operations by agent, kind and status (every stored pass's operations; an "
            "operation left pending by a pass that ended takes the pass's status, e.g. "
            "rejected or rejected_by_guard).",
            labels=["agent", "kind", "status"],
        )
        rows = Operation.objects.values_list(
            "run__agent__slug", "kind", "status", "run__status"
        ).annotate(n=Count("id"))
        counts: dict[tuple[str, str, str], int] = defaultdict(int)
        for agent, kind, status, run_status, n in rows:
            counts[(agent, kind, operation_state(status, run_status))] += n
        for (agent, kind, status), n in sorted(counts.items()):
            family.add_metric([agent, kind, status], n)
        yield family

    def _loss(self) -> Iterator[Metric]:
        planned = Pass.objects.filter(planned_at__isnull=False)
        loss: dict[str, list[float]] = defaultdict(list)
        # the pass's one record of what it counts (Pass.figures), read as a JSON key
        for agent, fraction in planned.values_list("agent__slug", "figures__loss_fraction"):
            loss[agent].append(float(fraction or 0.0))
        yield _histogram(
            "memoryadmin_pass_loss_fraction",
            "Loss fraction of each planned pass (0..1; the guard refuses above the agent's "
            "max_loss_fraction).",
            loss,
            LOSS_BUCKETS,
        )
        lost: dict[str, list[float]] = defaultdict(list)
        rows = planned.values_list("agent__slug").annotate(
            n=Sum("operations__lost_sentences", default=0)
        )
        for agent, n in rows:
            lost[agent].append(float(n or 0))
        yield _histogram(
            "memoryadmin_pass_lost_sentences",
            "Sentences of the source memories no result keeps, per planned pass.",
            lost,
            LOST_SENTENCE_BUCKETS,
        )

    def _durations(self) -> Iterator[Metric]:
        plan: dict[str, list[float]] = defaultdict(list)
        rows = Pass.objects.filter(planned_at__isnull=False, started_at__isnull=False)
        for agent, started, planned in rows.values_list("agent__slug", "started_at", "planned_at"):
            if started is not None and planned is not None:  # both: filtered above
                plan[agent].append(max(0.0, (planned - started).total_seconds()))
        yield _histogram(
            "memoryadmin_pass_plan_duration_seconds",
            "Seconds from a pass's start to its proposal (snapshot, plan, guards).",
            plan,
            DURATION_BUCKETS,
        )
        apply_start = (
            AuditEvent.objects.filter(run=OuterRef("pk"), verb="applying")
            .values("run")
            .annotate(t=Min("created_at"))
            .values("t")
        )
        applied = Pass.objects.filter(
            status__in=(Pass.Status.APPLIED, Pass.Status.PARTIALLY_APPLIED),
            finished_at__isnull=False,
        ).annotate(apply_started=Subquery(apply_start))
        apply: dict[str, list[float]] = defaultdict(list)
        for agent, begun, finished in applied.values_list(
            "agent__slug", "apply_started", "finished_at"
        ):
            if begun is not None:
                apply[agent].append(max(0.0, (finished - begun).total_seconds()))
        yield _histogram(
            "memoryadmin_pass_apply_duration_seconds",
            "Seconds from the start of an apply to the pass's end (applied or partially).",
            apply,
            DURATION_BUCKETS,
        )

    def _proposals(self) -> Iterator[Metric]:
        family = GaugeMetricFamily(
            "memoryadmin_oldest_pending_proposal_age_seconds",
            "Seconds the oldest proposal waiting for review has waited, per agent with one.",
            labels=["agent"],
        )
        now = timezone.now()
        rows = (
            Pass.objects.filter(status=Pass.Status.PROPOSED, planned_at__isnull=False)
            .values_list("agent__slug")
            .annotate(oldest=Min("planned_at"))
        )
        for agent, oldest in sorted(rows):
            family.add_metric([agent], max(0.0, (now - oldest).total_seconds()))
        yield family

    def _memories(self) -> Iterator[Metric]:
        family = GaugeMetricFamily(
            "memoryadmin_memories",
            "Memories in each agent's store at its newest sample (after an apply, an import "
            "or a census; the store is not opened by a scrape).",
            labels=["agent"],
        )
        newest = StoreSample.objects.values("agent").annotate(t=Max("taken_at"))
        rows = StoreSample.objects.filter(
            taken_at=Subquery(newest.filter(agent=OuterRef("agent")).values("t")[:1])
        ).values_list("agent__slug", "count")
        for agent, count in sorted(dict(rows).items()):
            family.add_metric([agent], count)
        yield family

    def _llm(self) -> Iterator[Metric]:
        tokens = CounterMetricFamily(
            "memoryadmin_llm_tokens",
            "Tokens sent to and received from the LLM by the passes (judge and distillation).",
            labels=["agent", "gen_ai_request_model", "gen_ai_token_type"],
        )
        requests = CounterMetricFamily(
            "memoryadmin_llm_requests",
            "Requests sent to the LLM by the passes.",
            labels=["agent", "gen_ai_request_model"],
        )
        cost = CounterMetricFamily(
            "memoryadmin_llm_cost_usd",
            "USD the passes' LLM tokens cost at LLM_PRICES (models without a price are left out).",
            labels=["agent", "gen_ai_request_model"],
        )
        sums: dict[tuple[str, str], dict[str, float]] = defaultdict(
            lambda: {"tokens_in": 0, "tokens_out": 0, "requests": 0, "cost": 0.0, "priced": 0}
        )
        rows = Pass.objects.filter(**{f"{LLM_TOTALS_LOOKUP}__isnull": False}).values_list(
            "agent__slug", LLM_MODEL_LOOKUP, LLM_TOTALS_LOOKUP
        )
        for agent, model, totals in rows:
            s = sums[(agent, model or "")]
            totals = totals if isinstance(totals, dict) else {}
            s["tokens_in"] += int(totals.get("tokens_in", 0))
            s["tokens_out"] += int(totals.get("tokens_out", 0))
            s["requests"] += int(totals.get("requests", 0))
            usd = _cost(totals, model or "")
            if usd is not None:
                s["cost"] += usd
                s["priced"] = 1
        for (agent, model), s in sorted(sums.items()):
            tokens.add_metric([agent, model, "input"], s["tokens_in"])
            tokens.add_metric([agent, model, "output"], s["tokens_out"])
            requests.add_metric([agent, model], s["requests"])
            if s["priced"]:
                cost.add_metric([agent, model], round(s["cost"], 6))
        yield tokens
        yield requests
        yield cost

    def _worker(self) -> Iterator[Metric]:
        beat = worker_beat_age()
        if beat is not None:
            yield GaugeMetricFamily(
                "memoryadmin_worker_heartbeat_age_seconds",
                "Seconds since the newest worker heartbeat.",
                value=beat,
            )
        queued = oldest_queued_task_age()
        if queued is not None:
            yield GaugeMetricFamily(
                "memoryadmin_queue_oldest_task_age_seconds",
                "Seconds the oldest task not yet taken by a worker has waited (0: empty queue).",
                value=queued,
            )


def _cost(totals: Mapping[str, Any], model: str) -> float | None:
    try:
        return llm_cost_usd(totals, model, settings.LLM_PRICES)
    except ValueError:
        return None
