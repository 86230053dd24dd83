"""``/api/v1/agents/{slug}/memories…``: an agent's memories, semantic search, one memory with its
history (reads)."""

from __future__ import annotations

from typing import Literal

from django.http import HttpRequest
from django.utils.translation import ngettext
from ninja import Field, Query, Router, Schema
from pydantic import field_validator

from memoryadmin.api import schemas as s
from memoryadmin.api.actions.common import NotFound, Unavailable, get_agent
from memoryadmin.api.present.memories import memory_out
from memoryadmin.core.validation import DB_INT_MAX
from memoryadmin.memories.selectors import memories
from memoryadmin.memories.selectors.memories import MemoryQuery, memory_page

router = Router(tags=["agents"])


class MemoryFilters(Schema):
    page: int = Field(1, ge=1, le=DB_INT_MAX)
    tier: str = ""
    pinned: Literal["", "yes", "no"] = ""
    contains: str = Field("", max_length=500)


def _store_call(fn, *args, **kwargs):
    try:
        return fn(*args, **kwargs)
    except Exception as exc:  # Chroma down or a collection gone: say so, never a 500
        raise Unavailable(f"The agent's store cannot be read now: {exc}") from None


@router.get(
    "/agents/{slug}/memories",
    response=s.MemoryPage,
    summary="Memories, 50 a page, sorted by id; filter by tier, pinned, text",
)
def memory_list(request: HttpRequest, slug: str, filters: Query[MemoryFilters]):
    """One page of the agent's memories (50, sorted by id); tier, pinned and text filters as in
    the browser."""
    agent = get_agent(slug)
    query = MemoryQuery(tier=filters.tier, pinned=filters.pinned, contains=filters.contains)
    page, tiers = _store_call(memory_page, agent=agent, query=query, page=filters.page)
    if filters.page > page.paginator.num_pages and page.paginator.count:
        raise NotFound(
            f"Page {filters.page} does not exist; there "
            f"{ngettext('is', 'are', page.paginator.num_pages)} {page.paginator.num_pages} "
            f"{ngettext('page', 'pages', page.paginator.num_pages)}.",
            field="page",
        )
    return s.MemoryPage(
        count=page.paginator.count,
        page=page.number,
        pages=page.paginator.num_pages,
        tiers=tiers,
        items=[memory_out(m) for m in page],
    )


class SearchParams(Schema):
    q: str = Field(min_length=1, max_length=2000)
    k: int = Field(10, ge=1, le=100)

    @field_validator("q")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("say what to search for")
        return value


@router.get(
    "/agents/{slug}/memories/search",
    response=list[s.MemoryOut],
    summary="Semantic search: the k memories closest to q (cosine), best first",
)
def memory_search(request: HttpRequest, slug: str, params: Query[SearchParams]):
    """The ``k`` memories closest to ``q`` by cosine similarity of all-MiniLM-L6-v2 embeddings,
    best first."""
    agent = get_agent(slug)
    return [
        memory_out(m)
        for m in _store_call(memories.memory_search, agent=agent, text=params.q, k=params.k)
    ]


@router.get(
    "/agents/{slug}/memory",
    response=s.MemoryDetailOut,
    summary="One memory (?id=…) and every pass that read, wrote or archived it",
)
def memory_detail(request: HttpRequest, slug: str, id: str = Query(..., min_length=1)):
    """A memory (``current`` is ``None`` once removed) with its archived copies and the
    operations that touched it."""
    agent = get_agent(slug)
    d = _store_call(memories.memory_detail, agent=agent, memory_id=id)
    if d.current is None and not d.archived and not d.operations:
        raise NotFound(f"Agent {slug!r} has no memory {id!r}, now or in its history.", field="id")
    return s.MemoryDetailOut(
        id=d.memory_id,
        current=memory_out(d.current) if d.current else None,
        archived=[
            {
                "action": a.action,
                "pass_id": a.run_id,
                "archived_at": a.archived_at.isoformat(),
                "restored_at": a.restored_at.isoformat() if a.restored_at else None,
                "document": a.document,
                "actor": a.actor,
            }
            for a in d.archived
        ],
        operations=[
            s.MemoryHistoryItem(
                pass_id=op.run_id, operation=op.index, kind=op.kind, status=op.status
            )
            for op in d.operations
        ],
    )
