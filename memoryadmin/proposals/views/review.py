"""The reviewer's actions on a proposal: the Review tab (riskiest operations first, lost content,
bulk exclude/include), one operation's exclude/include and merged text, a conflict's decision,
approve and reject.

The panel is ``templates/proposals/_review.html#review-panel``; it is part of the pass page
and is re-rendered alone for htmx (tab switch, filters, paging, bulk actions). A bulk action answers
with the panel plus the pass summary, the loss totals and the approve line out of band, so the
figures change once, in place.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from urllib.parse import urlencode

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST
from django.views.decorators.vary import vary_on_headers

from memoryadmin.core.errors import ServiceError
from memoryadmin.core.selectors import request_zone
from memoryadmin.core.views import HtmxHttpRequest, can_review
from memoryadmin.proposals.forms.review import BulkReviewForm, ExcludeForm, MergedTextForm, NoteForm
from memoryadmin.proposals.models import Operation, Pass
from memoryadmin.proposals.selectors.evaluation import pass_figures
from memoryadmin.proposals.selectors.guards import budget_fix
from memoryadmin.proposals.selectors.passes import operation_view, pass_reviewed, pass_summary
from memoryadmin.proposals.selectors.review import bulk_targets
from memoryadmin.proposals.services import review as review_services
from memoryadmin.proposals.views.passes import pass_page, refused_keep
from memoryadmin.proposals.views.review_panel import (
    operation_oob_context,
    review_context,
    review_pinned,
)
from memoryadmin.templatetags.console import status_words


def _panel(
    request: HtmxHttpRequest, run: Pass, params: Any, changed: Sequence[int] = (), **extra: Any
) -> HttpResponse:
    """The panel, and out of band: the pass summary, the approve line and the changed rows of
    the "All operations" list (at most :data:`OOB_ROWS`; only those the page holds when it
    says so in ``shown``, comma-separated operation ids, so htmx finds a target for each)."""
    run.refresh_from_db()
    ev = pass_figures(run)
    rows = run.operations.filter(index__in=list(changed)[:OOB_ROWS]).prefetch_related("sources")
    shown = request.POST.get("shown")
    if shown is not None:  # the page says which rows it holds (review.js): only those swap
        rows = rows.filter(pk__in=[int(p) for p in shown.split(",") if p.strip().isdigit()])
    ctx = {
        "run": run,
        "ev": ev,
        "label_kinds": shown_kinds(request),
        **review_context(params, run, ev, pinned=review_pinned(request, run, reload=False)),
        "changed_rows": [operation_view(op) for op in rows],
        **extra,
    }
    return render(request, "proposals/_review_response.html", ctx)


def shown_kinds(request: HtmxHttpRequest) -> list[str] | None:
    """The operation kinds whose group label the page holds (``groups``, sent by review.js),
    so the summary's labels swap only there; ``None`` when not said (all of them)."""
    groups = request.POST.get("groups")
    return None if groups is None else [k for k in groups.split(",") if k]


OOB_ROWS = 200
"""Rows of "All operations" refreshed out of band after a bulk action (the rest on reload)."""


@require_GET
@vary_on_headers("HX-Request")
def pass_review(request: HtmxHttpRequest, pk: int):
    """The Review panel alone for htmx (tabs, filters, paging); the pass page otherwise."""
    run = get_object_or_404(Pass.objects.select_related("agent"), pk=pk)
    if not request.htmx:
        query = urlencode({k: v for k, v in request.GET.items() if v})
        return redirect(f"{reverse('pass_detail', args=[run.pk])}?{query}#review-panel")
    pinned = review_pinned(request, run, reload=False)
    ctx = {"run": run, **review_context(request.GET, run, approve=False, pinned=pinned)}
    return render(request, "proposals/_review.html#review-panel", ctx)


def _bulk_apply(request: HtmxHttpRequest, run: Pass, form: BulkReviewForm) -> tuple[str, list[int]]:
    """Resolve the bulk form's operations and call the service once: ``(error, changed)``."""
    if not form.is_valid():
        return " ".join(e for errs in form.errors.values() for e in errs), []
    d = form.cleaned_data
    if d["scope"] == "budget":  # one click after a decision pushed the plan over its budget
        ids, scope = budget_fix(run, pass_figures(run)), "the fewest that fit the loss budget"
    else:
        ids, scope = bulk_targets(
            run=run,
            scope=d["scope"],
            ops=d["ops"],
            query=form.query(),
            group=d["group"],
            below=d["below"],
        )
    try:
        _, changed = review_services.operations_set_excluded(
            run=run,
            operation_ids=ids,
            excluded=d["action"] == "exclude",
            user=request.user,
            scope=scope,
        )
    except (ServiceError, ValueError) as exc:
        return str(exc), []
    verb = "excluded" if d["action"] == "exclude" else "included"
    messages.success(
        request, f"{len(changed):,} operation{'s' if len(changed) != 1 else ''} {verb}."
    )
    return "", changed


@can_review
@require_POST
def review_bulk(request: HtmxHttpRequest, pk: int):
    """Exclude or include the selected operations, all matching the filter, or all of a rule
    (below a confidence) in one service call; the panel and the figures update once."""
    run = get_object_or_404(Pass.objects.select_related("agent"), pk=pk)
    form = BulkReviewForm(request.POST)
    error, changed = _bulk_apply(request, run, form)
    if not request.htmx:
        if error:
            messages.error(request, error)
        params = form.query().params()
        page = request.POST.get("page", "")
        if page.isdigit() and int(page) > 1:  # back to the page the operator was on
            params["page"] = page
        return redirect(f"{run.get_absolute_url()}?{urlencode(params)}#review-panel")
    return _panel(request, run, request.POST, changed, bulk_error=error)


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
    if run.decided_at is None:  # never decided: the guard, a newer pass or a failure ended it
        text = f"Pass #{run.pk} is {status_words(run.status)}: only a waiting proposal can be"
        text += f" decided; your {action} was not recorded."
    else:
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
        return pass_page(request, run)
    return redirect(run)


def _op_response(
    request: HtmxHttpRequest,
    op: Operation,
    error: str = "",
    *,
    template: str = "proposals/_op_response.html",
    **extra: Any,
) -> HttpResponse:
    """The operation row plus the summary swapped out-of-band (htmx), else back to the page."""
    if not request.htmx:
        if error:
            messages.error(request, error)
        return redirect(f"{reverse('pass_detail', args=[op.run_id])}#op-{op.pk}")
    op.refresh_from_db()
    run = Pass.objects.select_related("agent").get(pk=op.run_id)
    shown = request.POST.get("shown")  # the "All operations" rows the page holds (review.js)
    cards = request.POST.get("rv_shown")  # … and the Review cards: only those swap
    ctx = {
        "run": run,
        "row_shown": shown is None or str(op.pk) in shown.split(","),
        "card_shown": cards is None or str(op.pk) in cards.split(","),
        "label_kinds": shown_kinds(request),
        "ov": operation_view(op),
        "ev": pass_summary(run),
        "op_error": error,
        "reviewed": pass_reviewed(run),
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
    kw: dict[str, Any] = {"template": "proposals/_conflict_response.html"}
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
        kw = (
            {"never_again": form.cleaned_data["never_again"]}
            if reject
            else {"revision": form.cleaned_data["revision"] or None}
        )
        try:
            service(run=run, user=request.user, note=form.cleaned_data["note"], **kw)
        except (ServiceError, ValueError) as exc:
            run.refresh_from_db()
            if not run.is_reviewable:  # decided elsewhere between our check and the service's
                return _not_reviewable(request, run, action, form.cleaned_data["note"])
            if not request.htmx:  # post/redirect/get: a reload must not post the decision again
                refused_keep(request, run, "reject" if reject else "approve", form, str(exc))
                return redirect(f"{run.get_absolute_url()}#review-forms")
            form.add_error(None, str(exc))
        else:
            messages.success(request, f"Pass #{run.pk} {done}.")
            return redirect(run)
    return pass_page(request, run, **{"reject_form" if reject else "approve_form": form})


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
