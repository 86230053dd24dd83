"""The pass / proposal page: summary, operations by kind, review actions and progress polling."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from django.contrib import messages
from django.db.models import Q
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST
from django.views.decorators.vary import vary_on_headers
from django_htmx.http import HttpResponseStopPolling

from ..errors import ServiceError
from ..forms.review import ExcludeForm, MergedTextForm, NoteForm
from ..models import Operation, Pass
from ..selectors.common import request_zone
from ..selectors.evaluation import Evaluation, count_label, pass_figures
from ..selectors.passes import (
    StaleOperation,
    operation_view,
    pass_deferred,
    pass_operation_pages,
    pass_policy_note,
    pass_shown_pages,
    pass_stale_check,
)
from ..services import review as review_services
from ..templatetags.console import status_words
from .common import HtmxHttpRequest, can_review
from .review import operation_oob_context, review_context


def _summary(run: Pass) -> Any:
    """The pass's figures over its included operations (the same numbers on the summary, the
    groups and the guard: :func:`pass_figures`, which reads no operation); a settled pass keeps
    the guard verdict it was given. A pass without operations shows its stored figures."""
    if not run.operations.exists():
        return run
    ev = pass_figures(run)
    if run.status in (Pass.Status.PROPOSED, Pass.Status.APPROVED):
        return ev
    return replace(
        ev,
        guard_passed=run.guard_passed,
        guard_reason=run.guard_reason,
        max_loss_fraction=run.max_loss_fraction,
    )


def _named(kind: str, params: Any) -> bool:
    """True when the request names ``kind``'s group (``?kind=`` or ``?<kind>_page=``)."""
    return params.get("kind") == kind or f"{kind}_page" in params


def _groups(run: Pass, params: Any, ev: Any = None) -> list[dict[str, Any]]:
    """Each kind's group: its counts (aggregates) and, when the page shows its rows, one page of
    operations. A long proposal (more than :data:`COLLAPSE_OVER` operations) shows its groups
    collapsed and loads a group's rows when it is opened (htmx), so only groups the request
    names (``?kind=``, ``?<kind>_page=``) come with rows (``lazy`` marks the others)."""
    pages = {k: params.get(f"{k}_page", 1) for k in Operation.Kind.values}
    kinds = getattr(ev, "kinds", None) or {}
    found = pass_operation_pages(run=run, pages=pages)
    collapsed = sum(total for _, total, _ in found) > COLLAPSE_OVER
    groups = []
    for kind, total, page in found:
        ops, memories = kinds.get(kind, (0, 0))
        curated = getattr(ev, "merged_promoted", 0) if kind == "merge" else 0
        lazy = collapsed and not _named(kind, params)
        groups.append(
            {
                "kind": kind,
                "total": total,
                "page": page,
                "ops": [] if lazy else [operation_view(op) for op in page],
                "lazy": lazy,
                "named": _named(kind, params),
                "label": count_label(kind, ops, memories, curated=curated),
                "not_counted": total - ops,
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


def _reviewed(run: Pass) -> bool:
    """True when an operator excluded or edited an operation (the stored recall check and the
    planned figures then describe the plan as proposed, not as it stands now)."""
    return run.operations.filter(Q(excluded=True) | Q(edited=True)).exists()


def _page(request: HtmxHttpRequest, run: Pass, status: int = 200, **extra: Any) -> HttpResponse:
    run.refresh_from_db()
    ev = _summary(run)
    groups = _groups(run, request.GET, ev)
    ctx = {
        "nav": "agents",
        "run": run,
        "ev": ev,
        "groups": groups,
        "approve_form": NoteForm(),
        "reject_form": NoteForm(require_note=True),
        "stale_checked": False,  # the page loads the stale check (pass_stale) once shown
        "reviewed": _reviewed(run),
        "events": run.events.select_related("user").order_by("created_at", "id"),
        "failed_unplanned": run.status == Pass.Status.FAILED and not groups,
        "collapse_ops": sum(g["total"] for g in groups) > COLLAPSE_OVER,
        "planning": run.status in (Pass.Status.QUEUED, Pass.Status.RUNNING),
        "deferred": pass_deferred(run),
        "policy_note": pass_policy_note(run),
        **extra,
    }
    ev = ctx["ev"]
    ctx.update(review_context(request.GET, run, ev if isinstance(ev, Evaluation) else None))
    return render(request, "console/pass_detail.html", ctx, status=status)


COLLAPSE_OVER = 10
"""A pass with more operations than this shows each kind's section collapsed (counts visible)."""


def _not_reviewable(request: HtmxHttpRequest, run: Pass, action: str, note: str) -> HttpResponse:
    """A stale approve/reject (another tab or reviewer decided first): say who decided what and
    when, echo the operator's note so it is not lost; 200 with the page for htmx, else redirect."""
    run.refresh_from_db()
    who = getattr(run.decided_by, "username", "") or run.decided_actor
    when = (
        timezone.localtime(run.decided_at, request_zone(request)).strftime("%Y-%m-%d %H:%M:%S %Z")
        if run.decided_at
        else ""
    )
    decided = "rejected" if run.status == Pass.Status.REJECTED else "approved"
    text = f"Pass #{run.pk} was already {decided}"
    if who:
        text += f" by {who}"
    if when:
        text += f" at {when}"
    text += f" (now {status_words(run.status)}); your {action} was not recorded."
    if note:
        text += f" Your note was: “{note}”"
    messages.warning(request, text)
    if request.htmx:
        return _page(request, run)
    return redirect(run)


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
            (g for g in _groups(run, request.GET, _summary(run)) if g["kind"] == kind), None
        )
        group = group or {"kind": kind, "total": 0, "ops": []}
        stale, _ = _stale(run, [ov["op"].pk for ov in group["ops"]]) if group["ops"] else ([], "")
        ctx = {
            "run": run,
            "group": group,
            "paging": True,
            "stale": {s.pk: s.reason for s in stale},
        }
        return render(request, "console/pass_detail.html#op-group", ctx)
    return _page(request, run)


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
        return _page(request, run, **_stale_context(run, request.GET, marks=False))
    ctx = {"run": run, **_stale_context(run, request.GET, marks=True)}
    return render(request, "console/pass_detail.html#stale-check", ctx)


@require_GET
def pass_progress(request: HtmxHttpRequest, pk: int):
    """Progress bar fragment polled every second; 286 + HX-Refresh once the pass is settled."""
    run = get_object_or_404(Pass, pk=pk)
    if not request.htmx:
        return redirect(run)
    if run.is_active:
        return render(request, "console/pass_detail.html#pass-progress", {"run": run})
    response = HttpResponseStopPolling()
    response["HX-Refresh"] = "true"
    return response


def _op_response(
    request: HtmxHttpRequest,
    op: Operation,
    error: str = "",
    *,
    template: str = "console/_op_response.html",
    **extra: Any,
) -> HttpResponse:
    """The operation row plus the summary swapped out-of-band (htmx), else back to the page."""
    if not request.htmx:
        if error:
            messages.error(request, error)
        return redirect(f"{reverse('pass_detail', args=[op.run_id])}#op-{op.pk}")
    op.refresh_from_db()
    run = Pass.objects.select_related("agent").get(pk=op.run_id)
    ctx = {
        "run": run,
        "ov": operation_view(op),
        "ev": _summary(run),
        "op_error": error,
        "reviewed": _reviewed(run),
        **operation_oob_context(op),
        **extra,
    }
    return render(request, template, ctx)


@can_review
@require_POST
def operation_exclude(request: HtmxHttpRequest, pk: int, op_id: int):
    """Exclude (``excluded=1``) or include (``excluded=0``) one operation; summary updates live."""
    op = get_object_or_404(Operation, pk=op_id, run_id=pk)
    form = ExcludeForm(request.POST)
    if not form.is_valid():
        return _op_response(request, op, "Choose exclude or include.")
    try:
        review_services.operation_set_excluded(
            operation=op, excluded=form.cleaned_data["excluded"], user=request.user
        )
    except (ServiceError, ValueError) as exc:
        return _op_response(request, op, str(exc))
    return _op_response(request, op)


@can_review
@require_POST
def operation_edit(request: HtmxHttpRequest, pk: int, op_id: int):
    """Replace a merge's text (empty or too long text is refused with the reason)."""
    op = get_object_or_404(Operation, pk=op_id, run_id=pk)
    form = MergedTextForm(request.POST)
    if not form.is_valid():
        # the field's own reason: empty ("This field is required.") or a NUL character
        why = " ".join(form.errors.get("document", [])) or "The merged text is not valid."
        return _op_response(
            request,
            op,
            f"The merged text was not saved: {why}",
            draft=request.POST.get("document", ""),
        )
    try:
        review_services.operation_edit_text(
            operation=op, document=form.cleaned_data["document"], user=request.user
        )
    except (ServiceError, ValueError) as exc:
        return _op_response(request, op, str(exc), draft=form.cleaned_data["document"])
    return _op_response(request, op)


@can_review
@require_POST
def conflict_resolve(request: HtmxHttpRequest, pk: int, op_id: int):
    """A reviewer decides a conflict: ``keep`` = ``a``, ``b`` or ``both``. With htmx both cards
    of the operation (Review tab and "All operations"), the summary and the approve line are
    swapped out of band; without, back to the page with a message."""
    op = get_object_or_404(Operation, pk=op_id, run_id=pk)
    keep = request.POST.get("keep", "").strip().lower()
    kw: dict[str, Any] = {"template": "console/_conflict_response.html"}
    try:
        review_services.conflict_resolve(operation=op, keep=keep, user=request.user)
    except (ServiceError, ValueError) as exc:
        return _op_response(request, op, str(exc), **kw)
    words = "kept both" if keep == "both" else f"kept {keep.upper()}"
    messages.success(request, f"Conflict #{op.index}: {words}.")
    return _op_response(request, op, **kw)


def _decide(request: HtmxHttpRequest, pk: int, *, reject: bool) -> HttpResponse:
    """Approve or reject: validate the note, call the service, and on a pass decided meanwhile
    (another tab or reviewer) say so with the operator's note instead of losing it."""
    run = get_object_or_404(Pass.objects.select_related("decided_by"), pk=pk)
    form = NoteForm(request.POST, require_note=reject)
    action, done = ("rejection", "rejected") if reject else ("approval", "approved")
    if not run.is_reviewable:
        return _not_reviewable(request, run, action, request.POST.get("note", "").strip())
    if form.is_valid():
        service = review_services.pass_reject if reject else review_services.pass_approve
        kw = {} if reject else {"revision": form.cleaned_data["revision"] or None}
        try:
            service(run=run, user=request.user, note=form.cleaned_data["note"], **kw)
        except (ServiceError, ValueError) as exc:
            run.refresh_from_db()
            if not run.is_reviewable:  # decided elsewhere between our check and the service's
                return _not_reviewable(request, run, action, form.cleaned_data["note"])
            form.add_error(None, str(exc))
        else:
            messages.success(request, f"Pass #{run.pk} {done}.")
            return redirect(run)
    return _page(request, run, **{"reject_form" if reject else "approve_form": form})


@can_review
@require_POST
def pass_approve(request: HtmxHttpRequest, pk: int):
    """Approve with an optional note; refused with the guard's reason when it fails now."""
    return _decide(request, pk, reject=False)


@can_review
@require_POST
def pass_reject(request: HtmxHttpRequest, pk: int):
    """Reject (dismiss) with a required note; the store is left untouched (I-2)."""
    return _decide(request, pk, reject=True)
