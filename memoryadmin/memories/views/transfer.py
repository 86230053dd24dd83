"""JSONL import (upload, admin) and export (download, any reader) of an agent's memories."""

from __future__ import annotations

import io
import tempfile
from typing import Any

from django.contrib import messages
from django.http import FileResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_http_methods
from django.views.decorators.vary import vary_on_headers
from django_htmx.http import HttpResponseStopPolling

from consolidation.jsonl import LineError
from memoryadmin.agents.models import Agent
from memoryadmin.core.errors import StoreUnavailable
from memoryadmin.core.views import HtmxHttpRequest, can_edit_memories
from memoryadmin.memories.forms.transfer import JsonlUploadForm
from memoryadmin.memories.models import ImportJob
from memoryadmin.memories.selectors.transfer import memories_export_jsonl
from memoryadmin.memories.services.transfer import ImportReport
from memoryadmin.memories.services.transfer_jobs import import_job_create

MAX_ERRORS_SHOWN = 20
"""Invalid lines listed on the page; the rest are counted ("and N more")."""


def web_wording(message: str) -> str:
    """The importer's message with its CLI advice (``--skip-invalid``) told as the web form's
    "Skip invalid lines" checkbox."""
    return message.replace("with --skip-invalid", "by ticking “Skip invalid lines”").replace(
        "--skip-invalid", "“Skip invalid lines”"
    )


def job_context(job: ImportJob | None) -> dict[str, Any]:
    """An import job as the result template's context: progress, or report / refusal /
    failure with the invalid lines (at most :data:`MAX_ERRORS_SHOWN`)."""
    if job is None:
        return {"job": None}
    ctx: dict[str, Any] = {"job": job}
    if job.is_active:
        return ctx
    errors = [LineError(n, message) for n, message in job.errors]
    shown = {
        "errors": errors[:MAX_ERRORS_SHOWN],
        "error_count": job.error_count,
        "more_errors": max(0, job.error_count - MAX_ERRORS_SHOWN),
    }
    if job.status == ImportJob.Status.DONE:
        fields = {k: job.report.get(k, 0) for k in ("valid", "written", "unchanged", "embedded")}
        return {**ctx, **shown, "report": ImportReport(agent=job.agent.slug, **fields)}
    if job.status == ImportJob.Status.REFUSED:
        return {**ctx, **shown, "refused": web_wording(job.message)}
    return {**ctx, "failed": job.message}


@can_edit_memories
@require_http_methods(["GET", "POST"])
@vary_on_headers("HX-Request")
def memories_import(request: HtmxHttpRequest, slug: str):
    """Upload a JSONL file: saved and queued for the worker (the request returns at once); the
    result area then polls the job's progress. Size-capped by the form. htmx: the result only."""
    agent = get_object_or_404(Agent, slug=slug)
    form = (
        JsonlUploadForm(request.POST, request.FILES)
        if request.method == "POST"
        else JsonlUploadForm()
    )
    ctx: dict[str, Any] = {"nav": "agents", "agent": agent, "form": form, "job": None}
    if request.method == "POST" and form.is_valid():
        ctx["job"] = import_job_create(
            agent=agent,
            upload=form.cleaned_data["file"],
            skip_invalid=form.cleaned_data["skip_invalid"],
            user=request.user,
        )
    template = "memories/_import_result.html" if request.htmx else "memories/agent_import.html"
    return render(request, template, ctx)


@require_GET
@vary_on_headers("HX-Request")
def memories_import_status(request: HtmxHttpRequest, slug: str, pk: int):
    """One import job: progress while it runs (htmx polls this), then its outcome; the htmx
    answer for an ended job is 286, which stops the polling."""
    job = get_object_or_404(ImportJob.objects.select_related("agent"), pk=pk, agent__slug=slug)
    ctx = {"nav": "agents", "agent": job.agent, "form": None, **job_context(job)}
    if not request.htmx:
        return render(request, "memories/agent_import.html", {**ctx, "form": JsonlUploadForm()})
    response = render(request, "memories/_import_result.html", ctx)
    if not job.is_active:
        response.status_code = HttpResponseStopPolling.status_code
    return response


@require_GET
def memories_export(request: HtmxHttpRequest, slug: str):
    """Every memory of the agent as a JSONL attachment (with embeddings).

    Written to a temporary file first (spilled to disk, not held in memory) so a store failure
    becomes a message on the agent page instead of a truncated download.
    """
    agent = get_object_or_404(Agent, slug=slug)
    raw = tempfile.TemporaryFile()  # noqa: SIM115 -- FileResponse closes it after sending
    text = io.TextIOWrapper(raw, encoding="utf-8", newline="")
    try:
        memories_export_jsonl(agent=agent, fileobj=text)
        text.flush()
    except StoreUnavailable as exc:
        text.close()
        messages.error(request, f"Export failed, the store is unavailable: {exc}")
        return redirect("agent_detail", agent.slug)
    text.detach()
    raw.seek(0)
    return FileResponse(
        raw,
        as_attachment=True,
        filename=f"{agent.slug}-memories.jsonl",
        content_type="application/x-ndjson; charset=utf-8",
    )
