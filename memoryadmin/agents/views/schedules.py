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


def cron_preview(cron: str | None, request: HtmxHttpRequest) -> dict:
    """The preview's context: the next runs of ``cron`` in the operator's zone, or its error."""
    tz = request_zone(request)
    try:
        return {"preview": next_runs(cron=" ".join((cron or "").split()), tz=tz), "preview_tz": tz}
    except ValueError as exc:
        return {"preview": [], "preview_error": str(exc), "preview_tz": tz}


@require_GET
@vary_on_headers("HX-Request")
def schedule_preview(request: HtmxHttpRequest):
    """The next 5 runs of ``?schedule_cron=`` in the operator's time zone (``?tz=`` or cookie)."""
    form = CronPreviewForm(request.GET)
    cron = form.data.get("schedule_cron", "") if form.is_valid() else ""
    template = "agents/agent_form.html#cron-preview" if request.htmx else "agents/cron_preview.html"
    return render(request, template, cron_preview(cron, request))
