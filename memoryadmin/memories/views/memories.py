"""Memory browser: paged, filtered list; semantic search; detail; pin/edit/delete (admin)."""

from __future__ import annotations

from django.contrib import messages
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST
from django.views.decorators.vary import vary_on_headers

from memoryadmin.agents.models import Agent
from memoryadmin.core.errors import ServiceError, StoreUnavailable
from memoryadmin.core.views import HtmxHttpRequest, can_edit_memories
from memoryadmin.memories.forms.memories import MemoryEditForm, MemoryFilterForm, PinForm
from memoryadmin.memories.selectors.memories import MemoryQuery, memory_page, memory_search
from memoryadmin.memories.selectors.memories import memory_detail as select_memory
from memoryadmin.memories.services import memories as memory_services


def _detail_url(agent: Agent, memory_id: str) -> str:
    from urllib.parse import urlencode

    if not memory_id:  # a POST without memory_id: back to the list, with its message
        return reverse("memory_list", args=[agent.slug])
    return f"{reverse('memory_detail', args=[agent.slug])}?{urlencode({'id': memory_id})}"


@require_GET
@vary_on_headers("HX-Request")
def memory_list(request: HtmxHttpRequest, slug: str):
    """50 memories per page filtered by tier/pinned/text, or the top-k for a semantic query."""
    agent = get_object_or_404(Agent, slug=slug)
    form = MemoryFilterForm(request.GET)
    ctx = {
        "nav": "agents",
        "agent": agent,
        "form": form,
        "page": None,
        "results": None,
        "tiers": [],
    }
    if form.is_valid():
        d = form.cleaned_data
        try:
            if d["q"].strip():
                ctx["results"] = memory_search(agent=agent, text=d["q"].strip(), k=d["k"] or 10)
            else:
                query = MemoryQuery(tier=d["tier"], pinned=d["pinned"], contains=d["contains"])
                ctx["page"], ctx["tiers"] = memory_page(
                    agent=agent, query=query, page=request.GET.get("page", 1)
                )
        except Exception as exc:  # a store outage is shown, never a 500
            ctx["store_error"] = str(exc) or exc.__class__.__name__
    template = (
        "memories/memory_list.html#memory-results" if request.htmx else "memories/memory_list.html"
    )
    return render(request, template, ctx)


@require_GET
def memory_detail(request: HtmxHttpRequest, slug: str):
    """One memory (``?id=``): document, metadata, and every pass that read, wrote or archived it."""
    agent = get_object_or_404(Agent, slug=slug)
    memory_id = request.GET.get("id", "")
    if not memory_id:
        raise Http404("No memory id given.")
    return _detail_page(request, agent, memory_id)


def _detail_page(request: HtmxHttpRequest, agent: Agent, memory_id: str, edit_form=None):
    ctx = {
        "nav": "agents",
        "agent": agent,
        "memory_id": memory_id,
        "edit_form": edit_form,
        "d": None,
    }
    try:
        ctx["d"] = select_memory(agent=agent, memory_id=memory_id)
    except StoreUnavailable as exc:
        ctx["store_error"] = str(exc)
    return render(request, "memories/memory_detail.html", ctx)


@can_edit_memories
@require_POST
def memory_pin(request: HtmxHttpRequest, slug: str):
    """Pin (``pinned=1``) or unpin (``pinned=0``) the memory ``memory_id`` (archived + audited)."""
    agent = get_object_or_404(Agent, slug=slug)
    memory_id, form = request.POST.get("memory_id", ""), PinForm(request.POST)
    if not memory_id or not form.is_valid():
        messages.error(request, "Choose pin or unpin for a memory.")
    else:
        try:
            memory_services.memory_set_pinned(
                agent=agent,
                memory_id=memory_id,
                pinned=form.cleaned_data["pinned"],
                user=request.user,
            )
            messages.success(request, "Pinned." if form.cleaned_data["pinned"] else "Unpinned.")
        except (ServiceError, ValueError) as exc:
            messages.error(request, str(exc))
    return redirect(_detail_url(agent, memory_id))


@can_edit_memories
@require_POST
def memory_edit(request: HtmxHttpRequest, slug: str):
    """Edit a memory's text (prior version archived, change audited); errors re-render at 200."""
    agent = get_object_or_404(Agent, slug=slug)
    memory_id = request.POST.get("memory_id", "")
    if not memory_id:
        messages.error(request, "Choose a memory to edit.")
        return redirect(_detail_url(agent, memory_id))
    form = MemoryEditForm(request.POST)
    if form.is_valid():
        try:
            memory_services.memory_edit(
                agent=agent,
                memory_id=memory_id,
                document=form.cleaned_data["document"],
                user=request.user,
            )
        except (ServiceError, ValueError) as exc:
            form.add_error("document", str(exc))
        else:
            messages.success(request, "Memory saved.")
            return redirect(_detail_url(agent, memory_id))
    return _detail_page(request, agent, memory_id, edit_form=form)


@can_edit_memories
@require_POST
def memory_delete(request: HtmxHttpRequest, slug: str):
    """Delete a memory (archived first, so it can be restored)."""
    agent = get_object_or_404(Agent, slug=slug)
    memory_id = request.POST.get("memory_id", "")
    try:
        memory_services.memory_delete(agent=agent, memory_id=memory_id, user=request.user)
    except (ServiceError, ValueError) as exc:
        messages.error(request, str(exc))
        return redirect(_detail_url(agent, memory_id))
    messages.success(request, f"Memory {memory_id} deleted (archived).")
    return redirect("memory_list", agent.slug)
