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

from ..errors import StoreUnavailable
from ..forms import JsonlUploadForm
from ..importers import ImportRefused, memories_export_jsonl, memories_import_jsonl
from ..models import Agent
from .common import HtmxHttpRequest, can_edit_memories

MAX_ERRORS_SHOWN = 20
"""Invalid lines listed on the page; the rest are counted ("and N more")."""


def _errors(errors: list[Any]) -> dict[str, Any]:
    return {"errors": errors[:MAX_ERRORS_SHOWN], "more_errors": max(0, len(errors) - MAX_ERRORS_SHOWN),
            "error_count": len(errors)}


def web_wording(message: str) -> str:
    """The importer's message with its CLI advice (``--skip-invalid``) told as the web form's
    "Skip invalid lines" checkbox."""
    return message.replace("with --skip-invalid", "by ticking “Skip invalid lines”").replace(
        "--skip-invalid", "“Skip invalid lines”"
    )


def _import(agent: Agent, form: JsonlUploadForm, user: Any) -> dict[str, Any]:
    """Run the import service; its outcome as template context (never raises for bad input)."""
    try:
        report = memories_import_jsonl(
            agent=agent, fileobj=form.cleaned_data["file"], skip_invalid=form.cleaned_data["skip_invalid"],
            user=user, actor="web",
        )
    except ImportRefused as exc:
        return {"refused": web_wording(str(exc)), **_errors(exc.errors)}
    except StoreUnavailable as exc:
        return {"refused": f"The store is unavailable, nothing was written: {exc}"}
    return {"report": report, **_errors(report.errors)}


@can_edit_memories
@require_http_methods(["GET", "POST"])
@vary_on_headers("HX-Request")
def memories_import(request: HtmxHttpRequest, slug: str):
    """Upload a JSONL file: all-or-nothing unless "skip invalid lines"; shows counts and the
    invalid lines with their numbers (at most :data:`MAX_ERRORS_SHOWN`). htmx: the result only."""
    agent = get_object_or_404(Agent, slug=slug)
    form = JsonlUploadForm(request.POST, request.FILES) if request.method == "POST" else JsonlUploadForm()
    ctx: dict[str, Any] = {"nav": "agents", "agent": agent, "form": form}
    if request.method == "POST" and form.is_valid():
        ctx.update(_import(agent, form, request.user))
    template = "console/agent_import.html#import-result" if request.htmx else "console/agent_import.html"
    return render(request, template, ctx)


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
    return FileResponse(raw, as_attachment=True, filename=f"{agent.slug}-memories.jsonl",
                        content_type="application/x-ndjson; charset=utf-8")
