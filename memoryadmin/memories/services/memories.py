"""Single-memory services (operator actions): pin/unpin, edit, delete; prior version archived."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone

from consolidation import MemoryRecord
from memoryadmin.agents.models import Agent
from memoryadmin.core import stores
from memoryadmin.core.errors import ServiceError
from memoryadmin.core.models import embedding_to_bytes
from memoryadmin.core.services import actor_name, audit, jsonable, store_sampled
from memoryadmin.core.validation import validate_document
from memoryadmin.memories.models import ArchivedMemory
from memoryadmin.proposals.models import Pass

__all__ = ["memory_delete", "memory_edit", "memory_guard", "memory_set_pinned"]

S = Pass.Status


def memory_guard(agent: Agent) -> None:
    busy = agent.passes.filter(status__in=[S.APPLYING, S.ROLLING_BACK]).first()
    if busy is not None:
        raise ServiceError(f"Pass #{busy.pk} is {busy.status}; edit memories when it is done.")


def _memory_get(agent: Agent, memory_id: str) -> tuple[Any, MemoryRecord]:
    store = stores.get_store(agent)
    found = stores.get_live(store, [memory_id], include_embeddings=True).get(memory_id)
    if found is None:
        raise ServiceError(f"Memory {memory_id!r} is not in {agent.name}'s store.")
    return store, found


def _archive_operator(agent: Agent, rec: MemoryRecord, action: str, user: Any) -> ArchivedMemory:
    with transaction.atomic():
        return ArchivedMemory.objects.create(
            agent=agent,
            memory_id=rec.id,
            document=rec.document,
            metadata=jsonable(rec.metadata),
            embedding=embedding_to_bytes(rec.embedding),
            content_hash=rec.content_hash,
            action=action,
            actor=actor_name(user, "cli"),
        )


def memory_set_pinned(*, agent: Agent, memory_id: str, pinned: bool, user: Any) -> MemoryRecord:
    """Pin or unpin one memory (the agent's field-map ``pinned`` key); prior version archived.

    Returns the record as written. Raises :class:`ServiceError` for an unknown memory or while a
    pass is applying, :class:`StoreUnavailable` when Chroma is down.
    """
    memory_guard(agent)
    fm = agent.get_field_map()
    store, rec = _memory_get(agent, memory_id)
    if fm.is_pinned(rec.metadata) == bool(pinned):
        return rec
    _archive_operator(agent, rec, ArchivedMemory.Action.OPERATOR_PIN, user)
    new = MemoryRecord(
        rec.id, rec.document, rec.embedding, {**rec.metadata, fm.pinned: bool(pinned)}
    )
    store.upsert([new])
    audit(
        actor=actor_name(user, "cli"),
        verb="memory_pinned" if pinned else "memory_unpinned",
        agent=agent,
        user=user,
        data={"memory_id": memory_id},
    )
    return new


def memory_edit(*, agent: Agent, memory_id: str, document: str, user: Any) -> MemoryRecord:
    """Replace one memory's text (re-embedded) and stamp the field map's ``updated_at`` key with
    now (ISO 8601, UTC), so a later reconcile knows the edit is the newest statement; prior
    version archived, change audited.

    Raises ``ValueError`` for an empty text or one over :data:`MAX_DOCUMENT_CHARS`, otherwise as
    :func:`memory_set_pinned`.
    """
    text = validate_document(document)
    memory_guard(agent)
    store, rec = _memory_get(agent, memory_id)
    if text == rec.document:
        return rec
    _archive_operator(agent, rec, ArchivedMemory.Action.OPERATOR_EDIT, user)
    fm = agent.get_field_map()
    # The edit is the memory's newest statement: reconcile orders two memories by updated_at.
    meta = (
        {**rec.metadata, fm.updated_at: timezone.now().isoformat()}
        if fm.updated_at
        else {**rec.metadata}
    )
    new = MemoryRecord(rec.id, text, stores.embed([text])[0], meta)
    store.upsert([new])
    audit(
        actor=actor_name(user, "cli"),
        verb="memory_edited",
        agent=agent,
        user=user,
        data={"memory_id": memory_id, "before": rec.document, "after": text},
    )
    return new


def memory_delete(*, agent: Agent, memory_id: str, user: Any) -> None:
    """Delete one memory after archiving it (restorable); audited. Errors as
    :func:`memory_set_pinned`."""
    memory_guard(agent)
    store, rec = _memory_get(agent, memory_id)
    _archive_operator(agent, rec, ArchivedMemory.Action.OPERATOR_DELETE, user)
    store.delete([memory_id])
    store_sampled(agent, store)  # the dashboard's count
    audit(
        actor=actor_name(user, "cli"),
        verb="memory_deleted",
        agent=agent,
        user=user,
        data={"memory_id": memory_id},
    )
