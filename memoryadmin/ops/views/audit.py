"""Audit: every pass with its decision, filtered, paginated, and exported as CSV."""

from __future__ import annotations

import csv
import json

from django.core.paginator import Paginator
from django.db.models import QuerySet
from django.http import HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.http import require_GET
from django.views.decorators.vary import vary_on_headers

from memoryadmin.core.models import AuditEvent
from memoryadmin.core.selectors import request_zone
from memoryadmin.core.views import HtmxHttpRequest
from memoryadmin.ops.forms.audit import AuditFilterForm, EventFilterForm
from memoryadmin.ops.selectors.audit import (
    AUDIT_PAGE_SIZE,
    EVENT_PAGE_SIZE,
    AuditQuery,
    audit_events,
    audit_operations,
    audit_passes,
    rolled_back_by,
)
from memoryadmin.proposals.models import Operation, Pass

CSV_COLUMNS = [
    "pass",
    "agent",
    "status",
    "trigger",
    "requested_by",
    "decided_by",
    "decided_at",
    "created_at",
    "finished_at",
    "entries_before",
    "entries_after",
    "loss_fraction",
    "max_loss_fraction",
    "guard_passed",
    "note",
    "reason",
    "error",
]


def _query(form: AuditFilterForm) -> AuditQuery:
    if not form.is_valid():
        return AuditQuery(status="none")
    d = form.cleaned_data
    return AuditQuery(
        status=d["status"] or "all", agent=d["agent"], since=d["since"], until=d["until"]
    )


@require_GET
@vary_on_headers("HX-Request")
def audit(request: HtmxHttpRequest):
    """Passes newest first with status, trigger, decider, time, note, reason; 50 per page."""
    form = AuditFilterForm(request.GET or None)
    query = _query(form) if request.GET else AuditQuery()
    passes = audit_passes(query=query, tz=request_zone(request))
    page = Paginator(passes, AUDIT_PAGE_SIZE).get_page(request.GET.get("page", 1))
    params = request.GET.copy()
    params.pop("page", None)
    ctx = {
        "nav": "audit",
        "form": form if request.GET else AuditFilterForm(),
        "page": page,
        "params": params.urlencode(),
        "rollbacks": rolled_back_by(page.object_list),
    }
    template = "ops/audit.html#audit-results" if request.htmx else "ops/audit.html"
    return render(request, template, ctx)


def _csv_query(request: HtmxHttpRequest) -> AuditQuery | HttpResponse:
    """The audit filters of a CSV request, or the audit page with the field errors (400) when
    they are invalid (a date out of range)."""
    form = AuditFilterForm(request.GET or None)
    if request.GET and not form.is_valid():
        ctx = {
            "nav": "audit",
            "form": form,
            "page": Paginator(Pass.objects.none(), 1).get_page(1),
            "params": request.GET.urlencode(),
            "rollbacks": {},
        }
        return render(request, "ops/audit.html", ctx, status=400)
    return _query(form) if request.GET else AuditQuery()


def _csv_response(name: str) -> HttpResponse:
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = (
        f'attachment; filename="memoryadmin-{name}-{timezone.now():%Y%m%d-%H%M%S}.csv"'
    )
    return response


@require_GET
def audit_csv(request: HtmxHttpRequest):
    """The filtered audit list as CSV (same filters as the page, every row, no paging).

    Invalid filters (a date out of range) show the audit page with the field errors (400)."""
    query = _csv_query(request)
    if isinstance(query, HttpResponse):
        return query
    response = _csv_response("audit")
    writer = csv.writer(response)
    writer.writerow(CSV_COLUMNS)
    for p in audit_passes(query=query, tz=request_zone(request)).iterator(chunk_size=500):
        writer.writerow(
            [
                p.pk,
                p.agent.slug,
                p.status,
                p.trigger,
                p.requester or "",
                getattr(p.decided_by, "username", "") or p.decided_actor,
                p.decided_at.isoformat() if p.decided_at else "",
                p.created_at.isoformat(),
                p.finished_at.isoformat() if p.finished_at else "",
                p.entries_before,
                p.entries_after,
                f"{p.loss_fraction:.6f}",
                f"{p.max_loss_fraction:.6f}",
                "" if p.guard_passed is None else p.guard_passed,
                csv_cell(p.note),
                csv_cell(p.outcome_reason),  # the page's Reason column
                csv_cell(p.error),
            ]
        )
    return response


OPERATION_CSV_COLUMNS = [
    "pass",
    "agent",
    "operation",
    "kind",
    "rule",
    "status",
    "excluded",
    "edited",
    "risk",
    "source_ids",
    "source_texts",
    "removes",
    "result_id",
    "result_text",
    "reason",
]
"""Columns of the operations CSV; several memories in one cell are joined by " | "."""


@require_GET
def audit_operations_csv(request: HtmxHttpRequest):
    """The operations of the filtered passes as CSV, one row per operation with its source
    memories and its result (the passes CSV's filters, plus ``?pass=`` for one pass)."""
    query = _csv_query(request)
    if isinstance(query, HttpResponse):
        return query
    run = request.GET.get("pass", "")
    passes = audit_passes(query=query, tz=request_zone(request))
    ops = audit_operations(passes=passes, run=int(run) if run.isdigit() else None)
    response = _csv_response(f"operations-{run}" if run.isdigit() else "operations")
    writer = csv.writer(response)
    writer.writerow(OPERATION_CSV_COLUMNS)
    for op in ops.iterator(chunk_size=500):
        sources = list(op.sources.all())
        writer.writerow(
            [
                op.run_id,
                op.run.agent.slug,
                op.index,
                op.kind,
                op.rule,
                op.status,
                op.excluded,
                op.edited,
                f"{op.risk:.3f}",
                csv_cell(" | ".join(s.memory_id for s in sources)),
                csv_cell(" | ".join(s.document for s in sources)),
                csv_cell(" | ".join(op.removes)),
                csv_cell(op.result_id),
                csv_cell(op.result_document),
                csv_cell(op.reason),
            ]
        )
    return response


FORMULA_STARTS = frozenset("=+-@\t\r\n;|,%")
"""First characters that make a spreadsheet read a cell as a formula or split it: = + - @ (OWASP
"CSV injection"), tab/CR/LF, and the separators ; | , that Excel's locales and DDE use, and %."""


def csv_cell(value: object) -> str:
    """``value`` as a CSV cell that no spreadsheet runs: a leading ``'`` when it starts with one
    of :data:`FORMULA_STARTS` (also after leading spaces, which Excel skips)."""
    text = "" if value is None else str(value)
    return "'" + text if text.lstrip(" ")[:1] in FORMULA_STARTS else text


EVENT_CSV_COLUMNS = [
    "time",
    "agent",
    "pass",
    "actor",
    "verb",
    "operation",
    "memory",
    "from_status",
    "to_status",
    "note",
    "before",
    "after",
]


def memory_change(event: AuditEvent) -> dict[str, str]:
    """The memory an event changed and how, from its ``data`` (what the API's ``data`` has):
    ``{"memory_id", "before", "after"}`` (strings; ``""`` when the event names none, or for
    a delete or a pin, which change no text)."""
    data = event.data if isinstance(event.data, dict) else {}
    mid = data.get("memory_id")
    if not isinstance(mid, str):
        return {"memory_id": "", "before": "", "after": ""}
    text = {k: data.get(k) for k in ("before", "after")}
    return {"memory_id": mid, **{k: v if isinstance(v, str) else "" for k, v in text.items()}}


def setting_changes(event: AuditEvent) -> list[tuple[str, str, str]]:
    """The settings an ``agent_updated`` event changed, from ``data["fields"]`` (written by
    ``agents.services.agents.field_changes``): ``[("auto_apply", "safe", "all"), …]``, values
    as JSON text (``null`` for a key that was absent); ``[]`` for other events and for events
    recorded before the values were kept (only ``data["changed"]``)."""
    data = event.data if isinstance(event.data, dict) else {}
    fields = data.get("fields")
    if not isinstance(fields, dict):
        return []
    return [
        (str(name), *(json.dumps(v, ensure_ascii=False) for v in pair))
        for name, pair in fields.items()
        if isinstance(pair, list) and len(pair) == 2
    ]


def operation_words(event: AuditEvent) -> str:
    """The operation an event is about, from its ``data`` (``{"operation": 44, "kind":
    "prune"}``): ``"operation #44 (prune)"``; ``""`` when it names none."""
    data = event.data if isinstance(event.data, dict) else {}
    index = data.get("operation")
    if not isinstance(index, int) or isinstance(index, bool):
        return ""
    kind = data.get("kind")
    return f"operation #{index}" + (f" ({kind})" if kind else "")


def _with_operations(events: list[AuditEvent]) -> list[AuditEvent]:
    """Set ``op_words`` and ``op_pk`` (the operation's id, for a link to it on the pass page,
    ``None`` when it is gone) on each event; one query for the page."""
    wanted = {(e.run_id, e.data["operation"]) for e in events if e.run_id and operation_words(e)}
    runs, indexes = {r for r, _ in wanted}, {i for _, i in wanted}
    pks = {
        (r, i): pk
        for pk, r, i in Operation.objects.filter(run_id__in=runs, index__in=indexes).values_list(
            "pk", "run_id", "index"
        )
    }
    for e in events:
        e.memory = memory_change(e)
        e.settings = setting_changes(e)
        e.op_words = operation_words(e)
        e.op_pk = pks.get((e.run_id, e.data.get("operation"))) if e.op_words else None
    return events


def _events(request: HtmxHttpRequest) -> tuple[EventFilterForm, QuerySet[AuditEvent]]:
    """The Events filter form and its events; an unknown agent or verb matches nothing."""
    if not request.GET:
        return EventFilterForm(), audit_events()
    form = EventFilterForm(request.GET)
    if not form.is_valid():
        return form, AuditEvent.objects.none()
    return form, audit_events(agent=form.cleaned_data["agent"], verb=form.cleaned_data["verb"])


@require_GET
@vary_on_headers("HX-Request")
def audit_event_list(request: HtmxHttpRequest):
    """Every audit event (transitions, review actions, rollbacks, memory changes), newest first,
    filtered by agent and verb, 50 per page; htmx gets the results fragment."""
    form, events = _events(request)
    page = Paginator(events, EVENT_PAGE_SIZE).get_page(request.GET.get("page", 1))
    params = request.GET.copy()
    params.pop("page", None)
    page.object_list = _with_operations(list(page.object_list))
    ctx = {"nav": "audit", "form": form, "page": page, "params": params.urlencode()}
    template = "ops/audit_events.html#event-results" if request.htmx else "ops/audit_events.html"
    return render(request, template, ctx)


@require_GET
def audit_event_csv(request: HtmxHttpRequest):
    """The filtered events as CSV (same filters as the Events tab, every row, no paging)."""
    _form, events = _events(request)
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = (
        f'attachment; filename="memoryadmin-events-{timezone.now():%Y%m%d-%H%M%S}.csv"'
    )
    writer = csv.writer(response)
    writer.writerow(EVENT_CSV_COLUMNS)
    for e in events.iterator(chunk_size=500):
        memory = memory_change(e)
        if settings_changed := setting_changes(e):
            memory["before"] = "; ".join(f"{n}={old}" for n, old, _ in settings_changed)
            memory["after"] = "; ".join(f"{n}={new}" for n, _, new in settings_changed)
        writer.writerow(
            [
                e.created_at.isoformat(),
                getattr(e.agent, "slug", ""),
                e.run_id or "",
                csv_cell(getattr(e.user, "username", "") or e.actor),
                e.verb,
                operation_words(e),
                csv_cell(memory["memory_id"]),
                e.from_status,
                e.to_status,
                csv_cell(e.note),
                csv_cell(memory["before"]),
                csv_cell(memory["after"]),
            ]
        )
    return response
