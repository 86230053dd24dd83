"""Forget requests: erase memories for good, reviewed and audited (docs/ARCHITECTURE.md
"Forget requests").

- :func:`forget_request_create` plans a selection (:func:`~..selectors.forget.forget_plan`)
  and stores it as a ``proposed`` request listing every memory it would remove (live ids,
  archived copies); it never applies itself. A dry run is the selector alone.
- :func:`forget_approve` (a reviewer; the command's ``--yes`` as "cli") applies it at once:
  the live memories leave Chroma, their archived copies are deleted, the text and metadata of
  every operation, audit event and pass that held them are purged
  (:mod:`.forget_purge`), and the vector cache forgets their vectors. What remains is the
  tombstone (:class:`~..models.ForgetRequest`). It cannot be rolled back; passes that held
  the memories lose their Undo ("purged by forget request #N").
- :func:`forget_reject` drops a proposal (nothing removed).

Concurrency: approval is refused while a pass of the agent is queued, running, approved,
applying or rolling back (its lease holds memories the forget would purge under it); a
``proposed`` pass holding a forgotten memory becomes ``stale`` (it could no longer be applied
as reviewed); a rolled-back pass keeps its status with its rows purged; a pass that starts
while a request is ``applying`` fails at once (``services.passes.pass_run``) and writes
nothing.
"""

from __future__ import annotations

import logging
from typing import Any

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from memoryadmin.agents.models import Agent
from memoryadmin.core import stores
from memoryadmin.core.errors import ServiceError, StoreUnavailable
from memoryadmin.core.services import actor_name, audit, store_sampled, user_or_none
from memoryadmin.memories.models import ArchivedMemory, ForgetRequest
from memoryadmin.memories.selectors.forget import ForgetPlan, ForgetSelection, forget_plan
from memoryadmin.memories.services.forget_purge import purge_database, secure_delete
from memoryadmin.proposals.models import Pass

__all__ = [
    "NOT_UNDOABLE",
    "forget_approve",
    "forget_reject",
    "forget_request_create",
]

log = logging.getLogger(__name__)

R = ForgetRequest.Status
NOT_UNDOABLE = ForgetRequest.NOT_UNDOABLE


def forget_request_create(
    *, agent: Agent, selection: ForgetSelection, user: Any, reason: str = ""
) -> tuple[ForgetRequest, ForgetPlan]:
    """Plan ``selection`` and store it as a ``proposed`` forget request (audited
    ``forget_requested`` with the hashed selection and the counts). Returns the request and
    the plan it lists.

    Raises ``ValueError`` for an invalid selection, :class:`ServiceError` when it matches
    nothing (nothing stored), :class:`StoreUnavailable` when Chroma is down.
    """
    plan = forget_plan(agent=agent, selection=selection)
    if not plan.count:
        raise ServiceError(
            f"Nothing of {agent.name} matches {selection.describe()}; nothing stored."
        )
    actor = actor_name(user, "cli")
    with transaction.atomic():
        req = ForgetRequest.objects.create(
            agent=agent,
            agent_slug=agent.slug,
            kind=selection.kind,
            selection=selection.hashed(),
            display=selection.describe(),
            items={
                "live": [m["id"] for m in plan.live],
                "archived": [a["pk"] for a in plan.archived],
                "related": [m["id"] for m in plan.related],
            },
            live_count=len(plan.live),
            archived_count=len(plan.archived),
            related_count=len(plan.related),
            reason=reason,
            requested_by=user_or_none(user),
            requested_actor=actor,
        )
        audit(
            actor=actor,
            verb="forget_requested",
            agent=agent,
            user=user,
            note=f"Forget request #{req.pk}: {plan.count} memories to remove, waiting for a "
            "reviewer.",
            data=_tombstone(req),
        )
    return req, plan


def _tombstone(req: ForgetRequest) -> dict[str, Any]:
    return {
        "forget_request": req.pk,
        "selection": req.selection,
        "live": req.live_count,
        "archived": req.archived_count,
        "related": req.related_count,
    }


def forget_reject(*, request: ForgetRequest, user: Any, note: str = "") -> ForgetRequest:
    """Reject a proposed request: nothing removed, its ids and typed selection dropped, audited
    ``forget_rejected``. :class:`ServiceError` when it is no longer proposed."""
    actor = actor_name(user, "cli")
    with transaction.atomic():
        updated = ForgetRequest.objects.filter(pk=request.pk, status=R.PROPOSED).update(
            status=R.REJECTED,
            decided_by=user_or_none(user),
            decided_actor=actor,
            decided_at=timezone.now(),
            note=note,
            items={},
            display="",
        )
        if not updated:
            raise ServiceError(f"Forget request #{request.pk} is {request.status}; not rejected.")
        request.refresh_from_db()
        audit(
            actor=actor,
            verb="forget_rejected",
            agent=request.agent,
            user=user,
            note=note,
            data=_tombstone(request),
        )
    return request


def _busy_pass(agent: Agent) -> Pass | None:
    return agent.passes.filter(status__in=Pass.ACTIVE).order_by("pk").first()


def _claim(request: ForgetRequest, user: Any, note: str) -> tuple[ForgetRequest, Agent]:
    """Move the request to ``applying`` under the agent's row lock, refusing while a pass of the
    agent is active (its lease: the pass holds the memories)."""
    actor = actor_name(user, "cli")
    with transaction.atomic():
        if request.agent_id is None:
            raise ServiceError(f"The agent of forget request #{request.pk} was deleted.")
        agent = Agent.objects.select_for_update().get(pk=request.agent_id)
        busy = _busy_pass(agent)
        if busy is not None:
            raise ServiceError(
                f"Pass #{busy.pk} of {agent.name} is {busy.status.replace('_', ' ')}; approve "
                "the forget request when it is done (nothing was removed)."
            )
        updated = ForgetRequest.objects.filter(
            pk=request.pk, status__in=(R.PROPOSED, R.FAILED)
        ).update(
            status=R.APPLYING,
            decided_by=user_or_none(user),
            decided_actor=actor,
            decided_at=timezone.now(),
            note=note,
            error="",
        )
        if not updated:
            current = ForgetRequest.objects.get(pk=request.pk).status
            raise ServiceError(
                f"Forget request #{request.pk} is {current}; only a proposed (or failed) request "
                "can be approved."
            )
        audit(
            actor=actor,
            verb="forget_approved",
            agent=agent,
            user=user,
            note=note or NOT_UNDOABLE,
            data={"forget_request": request.pk},
        )
    request.refresh_from_db()
    return request, agent


def forget_approve(*, request: ForgetRequest, user: Any, note: str = "") -> ForgetRequest:
    """Approve a proposed (or failed) forget request and apply it now; returns it ``applied``.

    Steps: claim (``applying``, refused while a pass of the agent is active) → read the texts
    of what goes (live records, archived copies) → delete the live memories from Chroma → purge
    the database in one transaction (:func:`.forget_purge.purge_database`) → purge the vector
    cache → tombstone (``applied``, counts, ``forget_applied`` audit event). A store outage
    leaves it ``failed`` with the reason; approving it again finishes it (each step is
    idempotent). Raises :class:`ServiceError` when refused, :class:`StoreUnavailable` when
    Chroma is down before anything was removed.
    """
    request, agent = _claim(request, user, note)
    items = dict(request.items or {})
    live_ids = [str(i) for i in items.get("live", [])]
    try:
        store = stores.get_store(agent)
        live = stores.get_live(store, live_ids, include_embeddings=False)
        archived = ArchivedMemory.objects.filter(agent=agent).filter(
            Q(pk__in=items.get("archived", [])) | Q(memory_id__in=live_ids)
        )
        all_ids = sorted(set(live_ids) | set(archived.values_list("memory_id", flat=True)))
        texts = _texts(agent, live.values(), archived)
        if live_ids:
            store.delete(live_ids)
    except Exception as exc:
        message = str(exc) if isinstance(exc, ServiceError | StoreUnavailable) else repr(exc)
        ForgetRequest.objects.filter(pk=request.pk).update(status=R.FAILED, error=message)
        audit(
            actor=actor_name(user, "cli"),
            verb="forget_failed",
            agent=agent,
            user=user,
            note=message,
            data={"forget_request": request.pk},
        )
        if isinstance(exc, ServiceError | StoreUnavailable):
            raise
        raise ServiceError(f"Forget request #{request.pk} failed: {message}") from exc
    with transaction.atomic():
        secure_delete()
        purged = purge_database(request=request, agent=agent, ids=all_ids, texts=texts)
        purged["live"] = len(live)
        purged["vector_cache_rows"] = stores.vector_cache().forget(texts, [agent.collection_name])
        ForgetRequest.objects.filter(pk=request.pk).update(
            status=R.APPLIED, items={}, display="", purged=purged, finished_at=timezone.now()
        )
        request.refresh_from_db()
        audit(
            actor=actor_name(user, "cli"),
            verb="forget_applied",
            agent=agent,
            user=user,
            note=f"Forget request #{request.pk}: {request.total} memories removed for good.",
            data=_tombstone(request) | {"purged": purged},
        )
    try:
        store_sampled(agent, store)
    except Exception:  # the dashboard's size chart only
        log.warning("could not sample the store of %s after forget #%s", agent.slug, request.pk)
    return request


def _texts(agent: Agent, live: Any, archived: Any) -> list[str]:
    """Every text of what goes: documents, and the field map's text copies (mem0's
    ``text_lemmatized``) of the live records and archived copies."""
    fm = agent.get_field_map()
    out: set[str] = set()
    for meta, doc in [(r.metadata, r.document) for r in live] + [
        (a.metadata or {}, a.document) for a in archived
    ]:
        out.add(doc)
        for key in (*fm.text_copies, fm.document):
            if key and isinstance(meta.get(key), str):
                out.add(meta[key])
    return sorted(t for t in out if t)
