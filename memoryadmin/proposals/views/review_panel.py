"""The Review tab's panel of a pass: everything ``_review.html`` needs (filters, the page of
operations riskiest first or of lost content, loss totals, conflict counts, the approve line).
The pass page shows it and the review views re-render it alone for htmx.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from memoryadmin.proposals.forms.review import ReviewFilterForm
from memoryadmin.proposals.models import Operation, Pass
from memoryadmin.proposals.selectors.evaluation import pass_figures
from memoryadmin.proposals.selectors.guards import (
    approve_blocked,
    budget_fix,
    content_guard,
)
from memoryadmin.proposals.selectors.review import (
    RISK_LINE,
    approve_line,
    conflict_counts,
    lost_page,
    pass_revision,
    review_card,
    review_page,
    review_rest,
    review_rules,
)
from memoryadmin.proposals.selectors.review_list import review_line_ids, review_list_moves
from memoryadmin.proposals.selectors.scoring import pass_loss_figures

PINNED_KEY = "review-list"
"""Session key: ``{pass id: [operation ids]}``, the Review list of each pass as last loaded."""

PINNED_PASSES = 10
"""Passes whose opened list the session keeps (the oldest is forgotten first)."""


def review_pinned(request: Any, run: Pass, *, reload: bool) -> frozenset[int]:
    """The operation ids the Review list of ``run`` held when the reviewer loaded the page, kept
    in the session; ``reload`` (a full page load) takes them afresh. htmx renders of the list
    (paging, filters, an exclude) keep them, so nothing leaves the list unannounced."""
    pins = dict(request.session.get(PINNED_KEY) or {})
    key = str(run.pk)
    if reload or key not in pins:
        pins.pop(key, None)
        pins[key] = review_line_ids(run)
        request.session[PINNED_KEY] = dict(list(pins.items())[-PINNED_PASSES:])
    return frozenset(pins[key])


def _figures(run: Pass, ev: Any = None, *, approve: bool = True) -> dict[str, Any]:
    """Loss totals, the content guard's verdict and conflict counts of ``run`` as its
    operations stand now, and
    (``approve``) the approve line and the revision it describes (posted back by the approve
    form, so approving applies what the line said) while it can still be approved (``ev``: its
    :class:`~..review.Evaluation` when already at hand, else :func:`pass_figures`)."""
    totals = pass_loss_figures(run)
    conflicts = conflict_counts(run)
    content = content_guard(run, totals)
    if not approve or not run.is_reviewable:
        return {"totals": totals, "approve_line": "", "conflicts": conflicts, "content": content}
    ev = ev if ev is not None else pass_figures(run)
    return {
        "totals": totals,
        "approve_blocked": approve_blocked(run, ev),
        "budget_fix": len(budget_fix(run, ev)),
        "content": content,
        "approve_line": approve_line(ev, totals, conflicts),
        "conflicts": conflicts,
        "revision": pass_revision(run=run),
    }


def review_context(
    params: Any,
    run: Pass,
    ev: Any = None,
    *,
    approve: bool = True,
    pinned: frozenset[int] = frozenset(),
) -> dict[str, Any]:
    """Everything ``_review.html`` needs, from the request's query ``params`` (``approve``:
    also the approve line, which lives outside the panel; ``pinned``: the ids the list held
    when opened, :func:`review_pinned`, kept on it with the count of those that moved)."""
    if not run.operations.exists():
        return {"review": None}
    form = ReviewFilterForm(params)
    form.is_valid()  # invalid fields fall back to their defaults and show their errors
    query = replace(form.query(), pinned=pinned)
    page = form.cleaned_data.get("page") or 1
    tab = form.cleaned_data.get("tab") or "review"
    ctx: dict[str, Any] = {
        "review": {
            "tab": tab,
            "form": form,
            "query": query,
            "params": query.params(),
            "scored": run.telemetry_data.review_scored,
            "line": RISK_LINE,
            "rules": review_rules(run),
            "moves": review_list_moves(run, pinned),
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
