"""The Review tab of a proposal: riskiest operations first, lost content, bulk exclude/include.

The panel is ``templates/console/_review.html#review-panel``; it is part of the pass page and is
re-rendered alone for htmx (tab switch, filters, paging, bulk actions). A bulk action answers
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
from django.views.decorators.http import require_GET, require_POST
from django.views.decorators.vary import vary_on_headers

from ..errors import ServiceError
from ..forms.review import BulkReviewForm, ReviewFilterForm
from ..models import Operation, Pass
from ..selectors.evaluation import pass_figures
from ..selectors.passes import operation_view
from ..selectors.review import (
    RISK_LINE,
    approve_line,
    bulk_targets,
    conflict_counts,
    lost_page,
    pass_loss_figures,
    pass_revision,
    review_card,
    review_page,
    review_rest,
    review_rules,
)
from ..services.review import operations_set_excluded
from .common import HtmxHttpRequest, can_review


def _figures(run: Pass, ev: Any = None, *, approve: bool = True) -> dict[str, Any]:
    """Loss totals and conflict counts of ``run`` as its operations stand now, and
    (``approve``) the approve line and the revision it describes (posted back by the approve
    form, so approving applies what the line said) while it can still be approved (``ev``: its
    :class:`~..review.Evaluation` when already at hand, else :func:`pass_figures`)."""
    totals = pass_loss_figures(run)
    conflicts = conflict_counts(run)
    if not approve or not run.is_reviewable:
        return {"totals": totals, "approve_line": "", "conflicts": conflicts}
    ev = ev if ev is not None else pass_figures(run)
    return {
        "totals": totals,
        "approve_line": approve_line(ev, totals, conflicts),
        "conflicts": conflicts,
        "revision": pass_revision(run=run),
    }


def review_context(
    params: Any, run: Pass, ev: Any = None, *, approve: bool = True
) -> dict[str, Any]:
    """Everything ``_review.html`` needs, from the request's query ``params`` (``approve``:
    also the approve line, which lives outside the panel)."""
    if not run.operations.exists():
        return {"review": None}
    form = ReviewFilterForm(params)
    form.is_valid()  # invalid fields fall back to their defaults and show their errors
    query = form.query()
    page = form.cleaned_data.get("page") or 1
    tab = form.cleaned_data.get("tab") or "review"
    ctx: dict[str, Any] = {
        "review": {
            "tab": tab,
            "form": form,
            "query": query,
            "params": query.params(),
            "scored": bool((run.telemetry or {}).get("review", {}).get("scored")),
            "line": RISK_LINE,
            "rules": review_rules(run),
        },
        **_figures(run, ev, approve=approve),
    }
    if tab == "lost":
        ctx["review"]["lost"] = lost_page(run=run, page=page)
    else:
        ctx["review"]["page"] = review_page(run=run, query=query, page=page)
        ctx["review"]["rest"] = review_rest(run)
    return ctx


def operation_oob_context(op: Operation) -> dict[str, Any]:
    """The review row of ``op`` and the pass figures, for an out-of-band swap after a single
    exclude/include/edit made elsewhere on the page."""
    run = op.run
    return {"card": review_card(op), **_figures(run)}


def _panel(
    request: HtmxHttpRequest, run: Pass, params: Any, changed: Sequence[int] = (), **extra: Any
) -> HttpResponse:
    """The panel, and out of band: the pass summary, the approve line and the changed rows of
    the "All operations" list (at most :data:`OOB_ROWS`)."""
    run.refresh_from_db()
    ev = pass_figures(run)
    rows = run.operations.filter(index__in=list(changed)[:OOB_ROWS]).prefetch_related("sources")
    ctx = {
        "run": run,
        "ev": ev,
        **review_context(params, run, ev),
        "changed_rows": [operation_view(op) for op in rows],
        **extra,
    }
    return render(request, "console/_review_response.html", ctx)


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
    ctx = {"run": run, **review_context(request.GET, run, approve=False)}
    return render(request, "console/_review.html#review-panel", ctx)


def _bulk_apply(request: HtmxHttpRequest, run: Pass, form: BulkReviewForm) -> tuple[str, list[int]]:
    """Resolve the bulk form's operations and call the service once: ``(error, changed)``."""
    if not form.is_valid():
        return " ".join(e for errs in form.errors.values() for e in errs), []
    d = form.cleaned_data
    ids, scope = bulk_targets(
        run=run,
        scope=d["scope"],
        ops=d["ops"],
        query=form.query(),
        group=d["group"],
        below=d["below"],
    )
    try:
        _, changed = operations_set_excluded(
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
        return redirect(f"{run.get_absolute_url()}?{urlencode(form.query().params())}#review-panel")
    return _panel(request, run, request.POST, changed, bulk_error=error)
