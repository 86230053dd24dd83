"""Forget requests: erase memories for good, reviewed and audited (docs/ARCHITECTURE.md
"Forget requests").

- :func:`forget_request_create` plans a selection (:func:`~..selectors.forget.forget_plan`)
  and stores it as a ``proposed`` request listing every memory it would remove (live ids,
  archived copies); it never applies itself. A dry run is the selector alone.
- :func:`forget_approve` (a reviewer; the command's ``--yes`` as "cli") claims it
  (``applying``) and hands it to the worker (``tasks.apply_forget``); :func:`forget_run` purges
  it under its lease, journaled step by step (check each listed id's scope and content hash —
  changed ones are skipped and listed —, delete from Chroma in chunks, then the database, the
  probes, the LLM judge's verdict cache and the vector cache in one transaction:
  :mod:`.forget_purge`), so recovery resumes a purge a dead worker left. What remains is the
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
from memoryadmin.core.leases import lease_acquire, lease_release
from memoryadmin.core.roles import REVIEW, require
from memoryadmin.core.services import (
    TASK_FORGET,
    actor_name,
    audit,
    enqueue,
    failpoint,
    store_sampled,
    user_or_none,
)
from memoryadmin.memories.models import ArchivedMemory, ForgetRequest
from memoryadmin.memories.selectors.forget import ForgetPlan, ForgetSelection, forget_plan
from memoryadmin.memories.services.forget_purge import (
    probe_answers_kept,
    purge_database,
    purge_probes,
    secure_delete,
    source_texts,
)
from memoryadmin.proposals.models import Pass

__all__ = [
    "DELETE_CHUNK",
    "NOT_UNDOABLE",
    "forget_approve",
    "forget_outcome",
    "forget_reject",
    "forget_request_create",
    "forget_run",
]

log = logging.getLogger(__name__)

R = ForgetRequest.Status
NOT_UNDOABLE = ForgetRequest.NOT_UNDOABLE
DELETE_CHUNK = 100
"""Live memories deleted from Chroma per call, each call journaled: a purge cut short redoes at
most this many deletes (deleting a missing id is a no-op)."""


def forget_request_create(
    *, agent: Agent, selection: ForgetSelection, user: Any, reason: str = ""
) -> tuple[ForgetRequest, ForgetPlan]:
    """Plan ``selection`` and store it as a ``proposed`` forget request (audited
    ``forget_requested`` with the hashed selection and the counts). Returns the request and
    the plan it lists.

    Raises ``ValueError`` for an invalid selection, :class:`ServiceError` when it matches
    nothing (nothing stored), :class:`StoreUnavailable` when Chroma is down.
    """
    require(user, REVIEW, f"forget memories of {agent.slug}")
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
                "planned": {
                    m["id"]: {"scope": m["scope"], "content_hash": m["content_hash"]}
                    for m in plan.live
                },
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
    require(user, REVIEW, f"reject forget request #{request.pk}")
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


def forget_approve(
    *, request: ForgetRequest, user: Any, note: str = "", here: bool = False
) -> ForgetRequest:
    """Approve a proposed (or failed) forget request: it becomes ``applying`` and the worker
    purges it (``tasks.apply_forget`` once the transaction commits; with ``here`` — the
    command's ``--yes`` — in this process, once the claim committed). Returns the request as
    it stands then (``applied`` when the purge already ran: the command).

    Claimed under the agent's row lock: refused with :class:`ServiceError` while a pass of the
    agent is queued, running, approved, applying or rolling back (its lease holds the memories),
    and when the request is not proposed or failed. Audited ``forget_approved``.
    """
    require(user, REVIEW, f"approve forget request #{request.pk}")
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
        if not here:
            enqueue(TASK_FORGET, request.pk)
    request.refresh_from_db()
    if here:
        request, _mine = forget_run(request=request)
    return request


def forget_outcome(req: ForgetRequest) -> str:
    """One sentence on where an approved request stands (the page's message after approval)."""
    if req.status == R.APPLIED:
        left = f"; {len(req.skipped)} changed since planning, left alone" if req.skipped else ""
        return f"Forget request #{req.pk} applied: {req.total} removed{left}."
    if req.status == R.FAILED:
        return f"Forget request #{req.pk} failed: {req.error} Approve it again to finish."
    return f"Forget request #{req.pk} approved: the worker is forgetting {req.total} memories."


def forget_run(*, request: ForgetRequest) -> tuple[ForgetRequest, bool]:
    """Purge an ``applying`` request under its lease (the worker's task, recovery, the command);
    a no-op for any other status. Returns ``(request, mine)``: ``mine`` False when another live
    process holds the lease (it is purging it now).

    Steps, each recorded in ``journal`` so a purge cut short resumes where it stopped:
    1. check (once): each listed live memory is read; one whose scope or content hash differs
       from what was planned is *skipped* — left alone and listed (``journal["skipped"]``),
       never deleted —; the others are the *targets*, their texts kept in the journal until
       the end;
    2. delete the targets from Chroma, :data:`DELETE_CHUNK` ids a call, each chunk journaled
       (``deleted``);
    3. in one transaction: the database purge (:func:`.forget_purge.purge_database`), probes
       (:func:`.forget_purge.purge_probes`), the LLM judge's verdict cache and the vector cache;
       ``applied`` with the counts, the journal emptied but for ``skipped``.

    Any failure (Chroma down …) leaves it ``failed`` with the reason and its journal: approving
    it again resumes it. Never raises for a store failure.
    """
    if request.status != R.APPLYING:
        return request, True
    if not lease_acquire(request):
        request.refresh_from_db()
        return request, False
    try:
        return _purge(request), True
    finally:
        lease_release(request)


def _check(request: ForgetRequest, agent: Agent, store: Any) -> dict[str, Any]:
    """Step 1 of :func:`forget_run`: the journal's ``targets``, ``skipped`` and ``texts``."""
    items = request.items or {}
    planned = items.get("planned") or {}
    live_ids = [str(i) for i in items.get("live", [])]
    records = stores.get_live(store, live_ids, include_embeddings=False)
    fm = agent.get_field_map()
    targets, gone, skipped, kept = [], [], [], []
    for mid in live_ids:
        rec = records.get(mid)
        if rec is None:
            gone.append(mid)  # no longer live: its archived copies still go
            continue
        want = planned.get(mid)
        if want is not None and list(fm.scope_key(rec.metadata)) != list(want["scope"]):
            skipped.append({"id": mid, "why": "another scope now holds this id"})
        elif want is not None and rec.content_hash != want["content_hash"]:
            skipped.append({"id": mid, "why": "its text or metadata changed since planning"})
        else:
            targets.append(mid)
            kept.append(rec)
    return {
        "targets": targets,
        "gone": gone,
        "skipped": skipped,
        "texts": _texts(agent, kept, []),
        "deleted": [],
    }


def _purge(request: ForgetRequest) -> ForgetRequest:
    request.refresh_from_db()
    if request.status != R.APPLYING:
        return request
    agent, user = request.agent, request.decided_by
    actor = request.decided_actor or "cli"
    journal = dict(request.journal or {})
    try:
        if agent is None:
            raise ServiceError(f"The agent of forget request #{request.pk} was deleted.")
        store = stores.get_store(agent)
        if "targets" not in journal:
            journal = _check(request, agent, store)
            ForgetRequest.objects.filter(pk=request.pk).update(journal=journal)
        done = set(journal.get("deleted", []))
        todo = [i for i in journal["targets"] if i not in done]
        for start in range(0, len(todo), DELETE_CHUNK):
            chunk = todo[start : start + DELETE_CHUNK]
            store.delete(chunk)
            done.update(chunk)
            journal["deleted"] = sorted(done)
            ForgetRequest.objects.filter(pk=request.pk).update(journal=journal)
            failpoint("forget:deleted")
    except Exception as exc:
        message = str(exc) if isinstance(exc, ServiceError | StoreUnavailable) else repr(exc)
        if not isinstance(exc, ServiceError | StoreUnavailable):
            log.exception("forget request #%s failed", request.pk)
        ForgetRequest.objects.filter(pk=request.pk).update(status=R.FAILED, error=message)
        audit(
            actor=actor,
            verb="forget_failed",
            agent=agent,
            user=user,
            note=message,
            data={"forget_request": request.pk},
        )
        request.refresh_from_db()
        return request
    skipped = {s["id"] for s in journal["skipped"]}
    listed = ArchivedMemory.objects.filter(
        agent=agent, pk__in=(request.items or {}).get("archived", [])
    )
    archived = ArchivedMemory.objects.filter(agent=agent).filter(
        Q(pk__in=listed.values("pk")) | Q(memory_id__in=[*journal["targets"], *journal["gone"]])
    )
    # A skipped id's archived copies that the plan listed (its earlier versions, seen by the
    # reviewer) still go; the id itself stays out of the purge (it now holds another memory).
    all_ids = sorted(
        {*journal["targets"], *journal["gone"], *archived.values_list("memory_id", flat=True)}
        - skipped
    )
    texts = sorted(
        set(journal["texts"])
        | set(_texts(agent, [], archived))
        | source_texts(agent=agent, ids=all_ids)
    )
    try:  # read before the transaction: the store's answers to probes a forgotten text held
        answered = probe_answers_kept(
            agent=agent,
            texts=texts,
            live=(r.document for r in store.iter_records(include_embeddings=False)),
        )
    except StoreUnavailable:
        answered = frozenset()  # unknown: a probe answered by a forgotten text goes
    # Its own SQLite file, and seconds for a large cache: outside the database's transaction
    # (deleting an answer costs only a request, so doing it again after a failure is harmless).
    verdicts = stores.verdict_cache().forget(texts)
    with transaction.atomic():
        secure_delete()
        listed_gone = listed.filter(memory_id__in=sorted(skipped)).delete()[0]
        purged = purge_database(request=request, agent=agent, ids=all_ids, texts=texts)
        purged["archived"] += listed_gone
        purged["live"] = len(journal["deleted"])
        purged["skipped"] = len(skipped)
        purged |= purge_probes(request=request, agent=agent, texts=texts, answered=answered)
        purged["verdict_cache_entries"] = verdicts
        purged["vector_cache_rows"] = stores.vector_cache().forget(texts, [agent.collection_name])
        # this process's planner features (hashes only, no text; other processes hold a salted
        # hash of it until they restart or their cache fills)
        purged["feature_cache_entries"] = stores.feature_cache().forget(texts)
        # the store's bounding rows in this process (other processes drop theirs at their next
        # pass: stores.row_cache is keyed by the last applied forget)
        purged["row_cache_rows"] = stores.drop_row_cache(agent)
        ForgetRequest.objects.filter(pk=request.pk).update(
            status=R.APPLIED,
            items={},
            display="",
            purged=purged,
            journal={"skipped": journal["skipped"]},
            finished_at=timezone.now(),
        )
        request.refresh_from_db()
        audit(
            actor=actor,
            verb="forget_applied",
            agent=agent,
            user=user,
            note=f"Forget request #{request.pk}: {request.total} memories removed for good"
            + (f", {len(skipped)} changed since planning left alone." if skipped else "."),
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
