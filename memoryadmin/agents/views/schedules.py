"""The live cron preview of the agent form: the next run times of a schedule, in the operator's
time zone."""

from __future__ import annotations

from django.shortcuts import render
from django.views.decorators.http import require_GET
from django.views.decorators.vary import vary_on_headers

from memoryadmin.agents.forms.schedules import CronPreviewForm
from memoryadmin.agents.selectors.schedules import next_runs
from memoryadmin.core.selectors import request_zone
from memoryadmin.core.views import HtmxHttpRequest


def cron_preview(cron: str | None, request: HtmxHttpRequest, *, enabled: bool = True) -> dict:
    """The preview's context: the next runs of ``cron`` in the operator's zone, or its error;
    no runs while the schedule is disabled (``enabled`` false: ``preview_paused``)."""
    tz = request_zone(request)
    if not enabled:
        return {"preview": [], "preview_paused": True, "preview_tz": tz}
    try:
        return {"preview": next_runs(cron=" ".join((cron or "").split()), tz=tz), "preview_tz": tz}
    except ValueError as exc:
        return {"preview": [], "preview_error": str(exc), "preview_tz": tz}


@require_GET
@vary_on_headers("HX-Request")
def schedule_preview(request: HtmxHttpRequest):
    """The next 5 runs of ``?schedule_cron=`` in the operator's time zone (``?tz=`` or cookie)."""
    form = CronPreviewForm(request.GET)
    valid = form.is_valid()
    cron = form.data.get("schedule_cron", "") if valid else ""
    template = "agents/agent_form.html#cron-preview" if request.htmx else "agents/cron_preview.html"
    ctx = cron_preview(cron, request, enabled=form.enabled() if valid else True)
    return render(request, template, {**ctx, "live": bool(request.htmx)})
