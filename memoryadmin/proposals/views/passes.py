"""The pass / proposal page: summary, operations by kind, the stale check and progress polling;
the reviewer's actions on it are in :mod:`.review`."""

from __future__ import annotations

from typing import Any

from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET
from django.views.decorators.vary import vary_on_headers
from django_htmx.http import HttpResponseStopPolling

from memoryadmin.core.errors import ServiceError
from memoryadmin.core.views import HtmxHttpRequest
from memoryadmin.proposals.forms.review import NoteForm
from memoryadmin.proposals.models import Operation, Pass
from memoryadmin.proposals.selectors.decisions import pass_decision_notes
from memoryadmin.proposals.selectors.evaluation import Evaluation, count_label
from memoryadmin.proposals.selectors.passes import (
    StaleOperation,
    operation_view,
    pass_deferred,
    pass_kind_rows,
    pass_llm_cost,
    pass_operation_pages,
    pass_policy_note,
    pass_reviewed,
    pass_shown_pages,
    pass_stale_check,
    pass_summary,
)
from memoryadmin.proposals.views.review_panel import review_context, review_pinned


def _named(kind: str, params: Any) -> bool:
    """True when the request names ``kind``'s group (``?kind=`` or ``?<kind>_page=``)."""
    return params.get("kind") == kind or f"{kind}_page" in params


def _groups(run: Pass, params: Any, ev: Any = None) -> list[dict[str, Any]]:
    """Each kind's group: its counts (aggregates) and, when the page shows its rows, one page of
    operations. A long proposal (more than :data:`COLLAPSE_OVER` operations) shows its groups
    collapsed and loads a group's rows when it is opened (htmx), so only groups the request
    names (``?kind=``, ``?<kind>_page=``) and the conflicts (questions for a person, kept
    open) come with rows (``lazy`` marks the others)."""
    pages = {k: params.get(f"{k}_page", 1) for k in Operation.Kind.values}
    kinds = getattr(ev, "kinds", None) or {}
    found = pass_operation_pages(run=run, pages=pages)
    words = {row["kind"]: row["not_counted_words"] for row in pass_kind_rows(run, ev)}
    collapsed = sum(total for _, total, _ in found) > COLLAPSE_OVER
    groups = []
    for kind, total, page in found:
        ops, memories = kinds.get(kind, (0, 0))
        curated = getattr(ev, "merged_promoted", 0) if kind == "merge" else 0
        # conflicts wait for a person: their group is never collapsed, however long the pass
        shown = _named(kind, params) or kind == Operation.Kind.CONFLICT
        lazy = collapsed and not shown
        groups.append(
            {
                "kind": kind,
                "total": total,
                "page": page,
                "ops": [] if lazy else [operation_view(op) for op in page],
                "lazy": lazy,
                "named": shown,
                "label": count_label(kind, ops, memories, curated=curated),
                "not_counted": total - ops,
                "not_counted_words": words.get(kind, ""),
            }
        )
    return groups


def _stale(run: Pass, operation_ids: list[int] | None = None) -> tuple[list[StaleOperation], str]:
    """Operations of a proposal the store has overtaken (shown before anyone approves, I-4;
    ``operation_ids``: only those), and the store error when that cannot be checked now."""
    if run.status != Pass.Status.PROPOSED:
        return [], ""
    try:
        return pass_stale_check(run=run, operation_ids=operation_ids), ""
    except ServiceError as exc:
        return [], str(exc)


STALE_LISTED = 50
"""Affected operations listed by name in the stale warning (the rest are counted)."""


def _stale_context(run: Pass, params: Any, *, marks: bool) -> dict[str, Any]:
    """The stale check's context: ``stale`` ({pk: reason}, for the rows), ``stale_list`` (the
    first :data:`STALE_LISTED`), ``stale_more``, ``stale_error`` and (``marks``) ``stale_marks``,
    the ``(pk, reason)`` of affected rows on the pages ``params`` show (swapped out of band)."""
    stale, error = _stale(run)
    shown = {}
    if marks and stale:  # the rows in the page: every group's, or a long proposal's named ones
        found = pass_shown_pages(run=run, params=params)
        collapsed = sum(total for total, _ in found.values()) > COLLAPSE_OVER
        shown = {k: p for k, (_, p) in found.items() if not collapsed or _named(k, params)}
    return {
        "stale_checked": True,
        "stale": {s.pk: s.reason for s in stale},
        "stale_list": stale[:STALE_LISTED],
        "stale_more": max(0, len(stale) - STALE_LISTED),
        "stale_error": error,
        "stale_marks": [(s.pk, s.reason) for s in stale if shown.get(s.kind) == s.page],
    }


def pass_page(request: HtmxHttpRequest, run: Pass, status: int = 200, **extra: Any) -> HttpResponse:
    """The whole pass page of ``run`` (refreshed), with ``extra`` in its context (a bound form
    with its errors, the stale check)."""
    run.refresh_from_db()
    extra = {**refused_forms(request, run), **extra}
    ev = pass_summary(run)
    groups = _groups(run, request.GET, ev)
    ctx = {
        "nav": "agents",
        "run": run,
        "ev": ev,
        "groups": groups,
        "approve_form": NoteForm(),
        "reject_form": NoteForm(require_note=True),
        "stale_checked": False,  # the page loads the stale check (pass_stale) once shown
        "reviewed": pass_reviewed(run),
        "events": run.events.select_related("user").order_by("created_at", "id"),
        "failed_unplanned": run.status == Pass.Status.FAILED and not groups,
        "collapse_ops": sum(g["total"] for g in groups) > COLLAPSE_OVER,
        "planning": run.status in (Pass.Status.QUEUED, Pass.Status.RUNNING),
        "deferred": pass_deferred(run),
        "policy_note": pass_policy_note(run),
        "llm_cost_usd": pass_llm_cost(run),
        "decision_notes": pass_decision_notes(run),
        **extra,
    }
    ev = ctx["ev"]
    pinned = review_pinned(request, run, reload=request.method == "GET" and not request.htmx)
    ctx.update(
        review_context(request.GET, run, ev if isinstance(ev, Evaluation) else None, pinned=pinned)
    )
    return render(request, "proposals/pass_detail.html", ctx, status=status)


REFUSED_KEY = "refused-decision-{pk}"
"""Session key of a refused approve/reject of pass ``pk``, kept for the page after the redirect."""


def refused_keep(request: Any, run: Pass, which: str, form: NoteForm, error: str) -> None:
    """Keep a refused ``which`` ("approve" / "reject") decision of ``run`` — the refusal and the
    operator's note and choices — in the session for the page the redirect leads to
    (:func:`refused_forms`), so the browser ends on the pass page's URL, not the POST's."""
    data = {k: v for k, v in form.cleaned_data.items() if k != "revision"}
    request.session[REFUSED_KEY.format(pk=run.pk)] = {"which": which, "data": data, "error": error}


def refused_forms(request: Any, run: Pass) -> dict[str, NoteForm]:
    """The form of a decision refused just before (:func:`refused_keep`), bound to what the
    operator typed and carrying the refusal as its error; ``{}`` when none waits (read once)."""
    if request.method != "GET":
        return {}
    kept = request.session.pop(REFUSED_KEY.format(pk=run.pk), None)
    if not kept:
        return {}
    reject = kept["which"] == "reject"
    form = NoteForm(kept["data"], require_note=reject)
    form.is_valid()
    form.add_error(None, kept["error"])
    return {"reject_form" if reject else "approve_form": form}


COLLAPSE_OVER = 10
"""A pass with more operations than this shows each kind's section collapsed (counts visible)."""


@require_GET
@vary_on_headers("HX-Request")
def pass_detail(request: HtmxHttpRequest, pk: int):
    """Summary, guard verdict, operations grouped by kind (20 per page per kind; a long
    proposal's groups load their rows when opened), review forms; the stale check follows
    (:func:`pass_stale`).

    ``?kind=<kind>&<kind>_page=N`` with htmx returns only that kind's group (``#ops-<kind>``),
    its rows marked when the store has overtaken them.
    """
    run = get_object_or_404(
        Pass.objects.select_related("agent", "decided_by", "requested_by"), pk=pk
    )
    kind = request.GET.get("kind")
    if request.htmx and kind in Operation.Kind.values:
        group = next(
            (g for g in _groups(run, request.GET, pass_summary(run)) if g["kind"] == kind), None
        )
        group = group or {"kind": kind, "total": 0, "ops": []}
        stale, _ = _stale(run, [ov["op"].pk for ov in group["ops"]]) if group["ops"] else ([], "")
        ctx = {
            "run": run,
            "group": group,
            "paging": True,
            "stale": {s.pk: s.reason for s in stale},
        }
        return render(request, "proposals/pass_detail.html#op-group", ctx)
    return pass_page(request, run)


@require_GET
@vary_on_headers("HX-Request")
def pass_stale(request: HtmxHttpRequest, pk: int):
    """The proposal checked against the store (I-4): the operations whose sources changed or
    left the store since planning, or why the store could not be read. The page loads it with
    htmx once shown (``#stale-check``: the warning listing them, and out of band the marks on
    the rows of the pages ``?<kind>_page=N`` shows); without htmx, the page with the check in
    it. Apply checks again whatever was shown."""
    run = get_object_or_404(
        Pass.objects.select_related("agent", "decided_by", "requested_by"), pk=pk
    )
    if not request.htmx:
        return pass_page(request, run, **_stale_context(run, request.GET, marks=False))
    ctx = {"run": run, **_stale_context(run, request.GET, marks=True)}
    return render(request, "proposals/pass_detail.html#stale-check", ctx)


@require_GET
def pass_progress(request: HtmxHttpRequest, pk: int):
    """Progress bar fragment polled every second; 286 + HX-Refresh once the pass is settled."""
    run = get_object_or_404(Pass, pk=pk)
    if not request.htmx:
        return redirect(run)
    if run.is_active:
        return render(request, "proposals/pass_detail.html#pass-progress", {"run": run})
    response = HttpResponseStopPolling()
    response["HX-Refresh"] = "true"
    return response
