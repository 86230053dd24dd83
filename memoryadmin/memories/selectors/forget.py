"""Reads of forgetting: which memories a selection picks (live and archived), the merged
memories that hold their text, and the forget requests of an agent.

A selection (:class:`ForgetSelection`) is one of four kinds — a field-map scope key and value
(``user_id=alice``), memory ids, text contains (case-insensitive), or memories similar to a
query (cosine ≥ ``similarity``, at most ``max_count``) — and :func:`forget_plan` reads what it
would remove without writing anything (the dry run, and what a stored request lists).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from django.db.models import Q, QuerySet
from django.utils.translation import ngettext

from memoryadmin.agents.models import Agent
from memoryadmin.core import stores
from memoryadmin.memories.models import ArchivedMemory, ForgetRequest
from memoryadmin.memories.selectors.memories import memory_search

__all__ = [
    "FORGET_MAX_COUNT",
    "ForgetPlan",
    "ForgetSelection",
    "forget_plan",
    "forget_request_items",
    "forget_requests",
    "last_applied_forget",
    "sha256",
]

FORGET_MAX_COUNT = 10_000
"""The most memories one request removes (``max_count`` is at most this; ids likewise)."""
RELATED_MIN_CHARS = 12
"""A forgotten text shorter than this is not searched inside other memories (too common)."""


def sha256(text: str) -> str:
    """SHA-256 hex of the UTF-8 text: how a tombstone keeps a scope value or a query."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class ForgetSelection:
    """What a forget request selects; validated by :meth:`check` against the agent.

    ``kind`` is ``scope`` (``key`` = ``value``; ``key`` one of the agent's field-map scope
    keys), ``ids``, ``contains`` (``text``, case-insensitive, at most ``max_count``) or
    ``similar`` (``text``; cosine ≥ ``similarity`` in [0, 1], the ``max_count`` nearest).
    """

    kind: str
    key: str = ""
    value: str = ""
    ids: tuple[str, ...] = ()
    text: str = ""
    similarity: float = 0.8
    max_count: int = 1000

    def check(self, agent: Agent) -> ForgetSelection:
        """``self`` when valid for ``agent``; else ``ValueError`` with one readable sentence."""
        if self.kind == ForgetRequest.Kind.SCOPE:
            keys = agent.get_field_map().scope
            if self.key not in keys:
                known = ", ".join(keys) or "none"
                raise ValueError(
                    f"{self.key!r} is not a scope key of {agent.name}; its scope keys: {known}."
                )
            if not self.value.strip():
                raise ValueError(f"Give the value of {self.key} to forget (KEY=VALUE).")
        elif self.kind == ForgetRequest.Kind.IDS:
            if not [i for i in self.ids if i.strip()]:
                raise ValueError("Give at least one memory id to forget.")
            if len(self.ids) > FORGET_MAX_COUNT:
                raise ValueError(f"At most {FORGET_MAX_COUNT} ids per forget request.")
        elif self.kind in (ForgetRequest.Kind.CONTAINS, ForgetRequest.Kind.SIMILAR):
            if len(self.text.strip()) < 3:
                raise ValueError("Give a text of at least 3 characters to search for.")
            if not 0.0 <= float(self.similarity) <= 1.0:
                raise ValueError("The similarity must be between 0 and 1.")
        else:
            raise ValueError(f"Unknown selection {self.kind!r}: scope, ids, contains or similar.")
        if not 1 <= int(self.max_count) <= FORGET_MAX_COUNT:
            raise ValueError(f"max_count must be between 1 and {FORGET_MAX_COUNT}.")
        return self

    def hashed(self) -> dict[str, Any]:
        """The selection as a tombstone keeps it: values, ids and query text as SHA-256."""
        out: dict[str, Any] = {"kind": self.kind}
        if self.kind == ForgetRequest.Kind.SCOPE:
            out |= {"key": self.key, "value_sha256": sha256(self.value)}
        elif self.kind == ForgetRequest.Kind.IDS:
            out |= {"ids": len(self.ids), "ids_sha256": sha256("\n".join(sorted(self.ids)))}
        else:
            out |= {"text_sha256": sha256(self.text), "max_count": int(self.max_count)}
            if self.kind == ForgetRequest.Kind.SIMILAR:
                out["similarity"] = float(self.similarity)
        return out

    def describe(self) -> str:
        """The selection as the requester typed it (shown to the reviewer until applied)."""
        if self.kind == ForgetRequest.Kind.SCOPE:
            return f"{self.key} = {self.value}"
        if self.kind == ForgetRequest.Kind.IDS:
            return f"{len(self.ids)} {ngettext('id', 'ids', len(self.ids))}: " + ", ".join(
                self.ids[:20]
            )
        if self.kind == ForgetRequest.Kind.CONTAINS:
            return f"text contains “{self.text}” (at most {self.max_count})"
        return f"similar to “{self.text}” (cosine ≥ {self.similarity:g}, at most {self.max_count})"


@dataclass
class ForgetPlan:
    """What a selection removes: ``live`` (``[{id, document, scope, content_hash}]``: the scope
    as ``key=value`` strings and the content hash it had when planned), ``archived``
    (``[{pk, memory_id, document, action, archived_at}]``), ``related`` (live memories it
    leaves whose text holds a forgotten text or whose ``merged_from`` names one: ``[{id,
    document, why}]``), ``capped`` (``max_count`` cut the matches)."""

    selection: ForgetSelection
    live: list[dict[str, Any]] = field(default_factory=list)
    archived: list[dict[str, Any]] = field(default_factory=list)
    related: list[dict[str, Any]] = field(default_factory=list)
    capped: bool = False

    @property
    def count(self) -> int:
        """Memories removed: live plus archived copies."""
        return len(self.live) + len(self.archived)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (the dry run's answer); dates as ISO 8601."""
        archived = [a | {"archived_at": a["archived_at"].isoformat()} for a in self.archived]
        return {
            "selection": self.selection.describe(),
            "count": self.count,
            "live_count": len(self.live),
            "archived_count": len(self.archived),
            "capped": self.capped,
            "live": self.live,
            "archived": archived,
            "related": self.related,
        }


def _live_matches(agent: Agent, sel: ForgetSelection) -> tuple[list[Any], list[Any], bool]:
    """(selected records, every other live record, capped) for ``sel`` in the agent's store."""
    K = ForgetRequest.Kind
    store = stores.get_store(agent)
    records = list(store.iter_records(include_embeddings=False))
    if sel.kind == K.SIMILAR:
        hits = memory_search(agent=agent, text=sel.text, k=int(sel.max_count))
        ids = {h.id for h in hits if h.score is not None and h.score >= float(sel.similarity)}
        chosen = [r for r in records if r.id in ids]
        capped = len(hits) >= int(sel.max_count) and len(ids) == len(hits)
    else:
        if sel.kind == K.SCOPE:
            chosen = [r for r in records if str(r.metadata.get(sel.key, "")) == sel.value]
        elif sel.kind == K.IDS:
            wanted = set(sel.ids)
            chosen = [r for r in records if r.id in wanted]
        else:
            needle = sel.text.casefold()
            chosen = [r for r in records if needle in r.document.casefold()]
        capped = sel.kind == K.CONTAINS and len(chosen) > int(sel.max_count)
        if capped:
            chosen = chosen[: int(sel.max_count)]
    ids = {r.id for r in chosen}
    return chosen, [r for r in records if r.id not in ids], capped


def _lineage(agent: Agent, chosen: list[Any], live_ids: set[str]) -> set[str]:
    """Ids no longer live that the ``chosen`` records were merged from, at any depth: each
    record's ``merged_from``, then the ``merged_from`` of those ids' archived copies (and of
    the chosen ids' own earlier versions), and so on. A merge keeps the text of what it merged
    (a merge whose text is one source's even keeps that source's id), so forgetting a merged
    memory must take its sources' archived copies too, or a Restore brings its text back. Ids
    still live (``live_ids``: the other live records') are left out: they are other memories.
    Merges never join two scopes, so the lineage stays in the chosen records' scopes."""
    fm = agent.get_field_map()

    def archived_parents(ids: set[str]) -> set[str]:
        rows = ArchivedMemory.objects.filter(agent=agent, memory_id__in=sorted(ids))
        metas = rows.values_list("metadata", flat=True)
        return {p for m in metas for p in fm.get_list(m or {}, fm.merged_from)}

    seen = {r.id for r in chosen}
    parents = {p for r in chosen for p in fm.get_list(r.metadata, fm.merged_from)}
    parents |= archived_parents(seen)
    out: set[str] = set()
    while new := parents - seen - live_ids:
        seen |= new
        out |= new
        parents = archived_parents(new)
    return out


def _archived_matches(
    agent: Agent, sel: ForgetSelection, live_ids: set[str], lineage: set[str]
) -> QuerySet[ArchivedMemory]:
    K = ForgetRequest.Kind
    q = Q(memory_id__in=sorted(live_ids | lineage))
    if sel.kind == K.SCOPE:
        q |= Q(**{f"metadata__{sel.key}": sel.value})
    elif sel.kind == K.IDS:
        q |= Q(memory_id__in=list(sel.ids))
    elif sel.kind == K.CONTAINS:
        q |= Q(document__icontains=sel.text)
    return ArchivedMemory.objects.filter(agent=agent).filter(q).order_by("id")


def _related(agent: Agent, gone: list[tuple[str, str]], others: list[Any]) -> list[dict[str, Any]]:
    """Live memories left by the forget (``others``) that name a forgotten id in their
    ``merged_from`` or whose text holds a forgotten text; ``gone`` is ``[(id, text)]`` of every
    live memory and archived copy removed."""
    fm = agent.get_field_map()
    ids = {mid for mid, _ in gone}
    texts = sorted({t for _, t in gone if len(t) >= RELATED_MIN_CHARS})
    out = []
    for rec in others:
        parents = ids.intersection(fm.get_list(rec.metadata, fm.merged_from))
        if parents:
            why = "merged from " + ", ".join(sorted(parents))
        elif any(t in rec.document for t in texts):
            why = "holds the text of a forgotten memory"
        else:
            continue
        out.append({"id": rec.id, "document": rec.document, "why": why})
    return out


def forget_plan(*, agent: Agent, selection: ForgetSelection) -> ForgetPlan:
    """Read what ``selection`` removes from ``agent`` (nothing is written).

    Live memories come from a full read of the store (its own pages; ``similar`` asks the
    store's nearest-neighbour query, cosine of all-MiniLM-L6-v2 embeddings); archived copies
    are every archived row of a selected id and of the ids it was merged from (its lineage,
    :func:`_lineage`), plus those matching the selection themselves (same scope value, same
    id, text contains; ``similar`` takes the copies of the live matches only). Raises
    ``ValueError`` for an invalid selection and :class:`StoreUnavailable` when Chroma is down.
    """
    sel = selection.check(agent)
    fm = agent.get_field_map()
    chosen, others, capped = _live_matches(agent, sel)
    plan = ForgetPlan(sel, capped=capped)
    plan.live = [
        {
            "id": r.id,
            "document": r.document,
            "scope": list(fm.scope_key(r.metadata)),
            "content_hash": r.content_hash,
        }
        for r in sorted(chosen, key=lambda r: r.id)
    ]
    lineage = _lineage(agent, chosen, {r.id for r in others})
    rows = _archived_matches(agent, sel, {r.id for r in chosen}, lineage)
    plan.archived = [
        {
            "pk": a.pk,
            "memory_id": a.memory_id,
            "document": a.document,
            "action": a.action,
            "action_label": a.action_label,
            "archived_at": a.archived_at,
        }
        for a in rows[:FORGET_MAX_COUNT]
    ]
    gone = [(r.id, r.document) for r in chosen]
    gone += [(a["memory_id"], a["document"]) for a in plan.archived]
    plan.related = _related(agent, gone, others)
    return plan


def forget_requests(*, agent: Agent) -> QuerySet[ForgetRequest]:
    """The agent's forget requests, newest first (requester and decider loaded)."""
    return ForgetRequest.objects.filter(agent=agent).select_related("requested_by", "decided_by")


def last_applied_forget(*, agent: Agent) -> int | None:
    """The id of the agent's last applied forget request (``None``: none): what a process's
    caches of the agent's store are keyed by (:func:`memoryadmin.core.stores.row_cache`)."""
    done = ForgetRequest.objects.filter(agent=agent, status=ForgetRequest.Status.APPLIED)
    return done.order_by("-pk").values_list("pk", flat=True).first()


def forget_request_items(*, request: ForgetRequest) -> dict[str, Any]:
    """What a stored request lists, read now for its page: ``live`` (``[{id, document}]``,
    the store's current text; ``document`` ``None`` for an id no longer live), ``archived``
    (the archive rows still kept), ``related`` (``[{id, document}]``). Empty once the request
    is applied or rejected (its ids are dropped). Raises :class:`StoreUnavailable` when
    Chroma is down."""
    items = request.items or {}
    out: dict[str, Any] = {"live": [], "archived": [], "related": []}
    if not items or request.agent is None:
        return out
    ids = [str(i) for i in items.get("live", [])]
    related = [str(i) for i in items.get("related", [])]
    live = stores.get_live(stores.get_store(request.agent), ids + related, include_embeddings=False)
    doc = {i: (live[i].document if i in live else None) for i in ids + related}
    out["live"] = [{"id": i, "document": doc[i]} for i in ids]
    out["related"] = [{"id": i, "document": doc[i]} for i in related]
    out["archived"] = list(
        ArchivedMemory.objects.filter(agent=request.agent, pk__in=items.get("archived", []))
    )
    return out
