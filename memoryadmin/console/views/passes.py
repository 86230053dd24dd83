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

from .. import services
from ..convergence import pass_deferred, pass_policy_note
from ..forms import ExcludeForm, MergedTextForm, NoteForm
from ..models import Operation, Pass
from ..review import Evaluation, count_label, pass_evaluate
from ..selectors import operation_view, pass_operation_pages, pass_stale_operations
from ..templatetags.console import status_words
from .common import HtmxHttpRequest, can_review, request_zone
from .review import operation_oob_context, review_context


def _summary(run: Pass) -> Any:
    """The pass's figures over its included operations (the same numbers on the summary, the
    groups and the guard); a settled pass keeps the guard verdict it was given. A pass without
    operations shows its stored figures."""
    if not run.operations.exists():
        return run
    ev = pass_evaluate(run)
    if run.status in (Pass.Status.PROPOSED, Pass.Status.APPROVED):
        return ev
    return replace(
        ev,
        guard_passed=run.guard_passed,
        guard_reason=run.guard_reason,
        max_loss_fraction=run.max_loss_fraction,
    )


def _groups(run: Pass, params: Any, ev: Any = None) -> list[dict[str, Any]]:
    pages = {k: params.get(f"{k}_page", 1) for k in Operation.Kind.values}
    kinds = getattr(ev, "kinds", None) or {}
    groups = []
    for kind, total, page in pass_operation_pages(run=run, pages=pages):
        ops, memories = kinds.get(kind, (0, 0))
        curated = getattr(ev, "merged_promoted", 0) if kind == "merge" else 0
        groups.append(
            {
                "kind": kind,
                "total": total,
                "page": page,
                "ops": [operation_view(op) for op in page],
                "label": count_label(kind, ops, memories, curated=curated),
                "not_counted": total - ops,
            }
        )
    return groups


def _stale(run: Pass) -> tuple[dict[int, str], str]:
    """Operations of a proposal the store has overtaken (shown before anyone approves, I-4),
    and the store error when that cannot be checked now."""
    if run.status != Pass.Status.PROPOSED:
        return {}, ""
    try:
        return pass_stale_operations(run=run), ""
    except services.ServiceError as exc:
        return {}, str(exc)


def _reviewed(run: Pass) -> bool:
    """True when an operator excluded or edited an operation (the stored recall check and the
    planned figures then describe the plan as proposed, not as it stands now)."""
    return run.operations.filter(Q(excluded=True) | Q(edited=True)).exists()


def _page(request: HtmxHttpRequest, run: Pass, status: int = 200, **extra: Any) -> HttpResponse:
    run.refresh_from_db()
    stale, stale_error = _stale(run)
    ev = _summary(run)
    groups = _groups(run, request.GET, ev)
    ctx = {
        "nav": "agents",
        "run": run,
        "ev": ev,
        "groups": groups,
        "approve_form": NoteForm(),
        "reject_form": NoteForm(require_note=True),
        "stale": stale,
        "stale_error": stale_error,
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
    """Summary, guard verdict, operations grouped by kind (20 per page per kind), review forms.

    ``?kind=<kind>&<kind>_page=N`` with htmx returns only that kind's group (``#ops-<kind>``).
    """
    run = get_object_or_404(
        Pass.objects.select_related("agent", "decided_by", "requested_by"), pk=pk
    )
    kind = request.GET.get("kind")
    if request.htmx and kind in Operation.Kind.values:
        group = next(
            (g for g in _groups(run, request.GET, _summary(run)) if g["kind"] == kind), None
        )
        ctx = {"run": run, "group": group or {"kind": kind, "total": 0, "ops": []}, "paging": True}
        return render(request, "console/pass_detail.html#op-group", ctx)
    return _page(request, run)


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
        services.operation_set_excluded(
            operation=op, excluded=form.cleaned_data["excluded"], user=request.user
        )
    except (services.ServiceError, ValueError) as exc:
        return _op_response(request, op, str(exc))
    return _op_response(request, op)


@can_review
@require_POST
def operation_edit(request: HtmxHttpRequest, pk: int, op_id: int):
    """Replace a merge's text (empty or too long text is refused with the reason)."""
    op = get_object_or_404(Operation, pk=op_id, run_id=pk)
    form = MergedTextForm(request.POST)
    if not form.is_valid():
        return _op_response(
            request, op, "The merged text cannot be empty.", draft=request.POST.get("document", "")
        )
    try:
        services.operation_edit_text(
            operation=op, document=form.cleaned_data["document"], user=request.user
        )
    except (services.ServiceError, ValueError) as exc:
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
        services.conflict_resolve(operation=op, keep=keep, user=request.user)
    except (services.ServiceError, ValueError) as exc:
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
        service = services.pass_reject if reject else services.pass_approve
        kw = {} if reject else {"revision": form.cleaned_data["revision"] or None}
        try:
            service(run=run, user=request.user, note=form.cleaned_data["note"], **kw)
        except (services.ServiceError, ValueError) as exc:
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
