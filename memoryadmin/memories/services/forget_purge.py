"""The database half of applying a forget request (:func:`purge_database`): archived copies
deleted; the text, metadata and embedding of every operation source, operation, pass, audit
event, decision and import report that held a forgotten memory replaced; proposals holding
them made stale; passes that held them lose their Undo. And the recall probes that ask about a
forgotten memory (:func:`purge_probes`): deleted, their audit events and the passes' recall
figures purged. Called by :mod:`.forget` inside its transaction, after the live memories left
Chroma."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from typing import Any

from django.db import OperationalError, connection, transaction
from django.db.models import Q

from memoryadmin.agents.models import Agent, ProbeQuery
from memoryadmin.core.models import AuditEvent
from memoryadmin.core.services import SYSTEM_ACTOR, transition
from memoryadmin.memories.models import ArchivedMemory, ForgetRequest, ImportJob
from memoryadmin.proposals.models import Decision, Operation, OperationSource, Pass, PassSnapshot
from memoryadmin.proposals.telemetry import telemetry_save

__all__ = [
    "PURGED",
    "probe_answers_kept",
    "probe_holds",
    "purge_database",
    "purge_probes",
    "scrub",
    "secure_delete",
    "source_texts",
]

log = logging.getLogger(__name__)

PURGED = "[forgotten]"
"""What a forgotten text is replaced with wherever it was quoted."""
_CHUNK = 500
_TEXT_CHUNK = 20
_TOKEN = re.compile(r"\w[\w\-./:]*\w|\w")
IDENTIFIER_MIN_CHARS = 4
"""A token of at least this many characters holding a digit and a letter, or six digits (a
passport, phone or account number, an IBAN, a ticket id — not a year or a time), names one
thing: a probe sharing one with a forgotten text asks about it."""


def secure_delete() -> None:
    """On SQLite: overwrite deleted and replaced content with zeros (``PRAGMA secure_delete``)
    on this connection, and truncate the WAL once the transaction commits, so the database
    file keeps no copy of a forgotten text. PostgreSQL needs a ``VACUUM`` for that (not run
    here)."""
    if connection.vendor != "sqlite":
        return
    with connection.cursor() as cur:
        cur.execute("PRAGMA secure_delete = ON")

    def checkpoint() -> None:
        try:
            with connection.cursor() as cur:
                cur.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        except OperationalError as exc:  # still in a transaction (tests): SQLite's own later
            log.warning("WAL not truncated after a forget: %s", exc)

    transaction.on_commit(checkpoint)


def scrub(value: Any, needles: list[str]) -> Any:
    """``value`` (JSON: str, list, dict …) with every occurrence of a needle replaced by
    :data:`PURGED`; a string equal to a short needle (under 4 characters) is replaced whole."""
    if isinstance(value, str):
        for n in needles:
            if value == n:
                return PURGED
            if len(n) >= 4 and n in value:
                value = value.replace(n, PURGED)
        return value
    if isinstance(value, list):
        return [scrub(v, needles) for v in value]
    if isinstance(value, dict):
        return {k: scrub(v, needles) for k, v in value.items()}
    return value


def _chunks(items: list[Any], size: int = _CHUNK) -> Iterable[list[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _touched_operations(agent: Agent, ids: list[str], texts: list[str]) -> set[int]:
    ops: set[int] = set()
    for chunk in _chunks(ids):
        ops |= set(
            OperationSource.objects.filter(
                operation__run__agent=agent, memory_id__in=chunk
            ).values_list("operation_id", flat=True)
        )
        ops |= set(
            Operation.objects.filter(run__agent=agent, result_id__in=chunk).values_list(
                "id", flat=True
            )
        )
    for chunk in _chunks([t for t in texts if len(t) >= 4], _TEXT_CHUNK):
        q = Q()
        for t in chunk:
            q |= Q(result_document__contains=t) | Q(planned_document__contains=t)
        ops |= set(
            Operation.objects.filter(run__agent=agent).filter(q).values_list("id", flat=True)
        )
    return ops


def _save_scrubbed(obj: Any, fields: tuple[str, ...], needles: list[str]) -> bool:
    changed = []
    for name in fields:
        before = getattr(obj, name)
        after = scrub(before, needles)
        if after != before:
            setattr(obj, name, after)
            changed.append(name)
    if changed:
        type(obj).objects.filter(pk=obj.pk).update(**{n: getattr(obj, n) for n in changed})
    return bool(changed)


def _purge_passes(
    request: ForgetRequest, agent: Agent, held: set[int], ids: list[str], needles: list[str]
) -> dict[str, int]:
    gone = set(ids)
    out = {"passes": 0, "stale": 0}
    for run in Pass.objects.filter(agent=agent).order_by("pk"):
        fields = ("telemetry", "figures", "recall", "note", "reason", "error")
        scrubbed = _save_scrubbed(run, fields, needles)
        if run.pk in held:
            tel = run.telemetry_data
            telemetry_save(
                run, tel.with_(forgotten_by=tuple(sorted({*tel.forgotten_by, request.pk})))
            )
            out["passes"] += 1
            if run.status == Pass.Status.PROPOSED:
                transition(
                    run,
                    frm=(Pass.Status.PROPOSED,),
                    to=Pass.Status.STALE,
                    actor=SYSTEM_ACTOR,
                    verb="stale",
                    note=f"Memories it holds were purged by forget request #{request.pk}.",
                    reason=f"purged by forget request #{request.pk}",
                )
                out["stale"] += 1
        elif scrubbed:
            out["passes"] += 1
    for snap in PassSnapshot.objects.filter(run__agent=agent):
        hashes = dict(snap.hashes or {})
        if gone.intersection(hashes):
            for mid in gone:
                hashes.pop(mid, None)
            PassSnapshot.objects.filter(pk=snap.pk).update(hashes=hashes)
    checkpoint = dict(agent.checkpoint or {})
    if gone.intersection(checkpoint):
        for mid in gone:
            checkpoint.pop(mid, None)
        Agent.objects.filter(pk=agent.pk).update(checkpoint=checkpoint)
    return out


def source_texts(*, agent: Agent, ids: list[str]) -> set[str]:
    """The documents the agent's operation sources keep of the memories ``ids``: the texts of
    a memory no longer live whose deleter died before the purge (a purge resumed from before
    its journal kept them) are still quoted, and found, through them."""
    out: set[str] = set()
    for chunk in _chunks(ids):
        out |= set(
            OperationSource.objects.filter(operation__run__agent=agent, memory_id__in=chunk)
            .exclude(document="")
            .values_list("document", flat=True)
        )
    return out


def purge_database(
    *, request: ForgetRequest, agent: Agent, ids: list[str], texts: list[str]
) -> dict[str, int]:
    """Purge every row of ``agent`` that holds the memories ``ids`` or quotes ``texts``
    (their documents and text copies); returns counts by kind: ``archived`` (copies
    deleted), ``sources`` (operation sources emptied), ``operations`` (operations whose
    text, metadata, scores and lost content were emptied), ``passes`` (passes that held them
    or quoted them; they lose their Undo), ``stale`` (proposals made stale), ``events``,
    ``decisions``, ``imports`` (rows whose quotes were replaced by :data:`PURGED`). Runs in
    the caller's transaction."""
    needles = sorted(set(texts), key=len, reverse=True)
    ops = _touched_operations(agent, ids, texts)
    held = set(Operation.objects.filter(id__in=list(ops)).values_list("run_id", flat=True))
    out: dict[str, int] = {"archived": 0, "sources": 0}
    for chunk in _chunks(ids):
        out["archived"] += ArchivedMemory.objects.filter(agent=agent, memory_id__in=chunk).delete()[
            0
        ]
        out["sources"] += OperationSource.objects.filter(
            operation__run__agent=agent, memory_id__in=chunk
        ).update(document="", metadata={}, embedding=None, content_hash="")
    out["operations"] = 0
    for chunk in _chunks(sorted(ops)):
        # A reviewer's conflict decision quotes no memory ({"keep", "by", "at"}): it stays, or
        # the pass would count the conflict undecided again.
        decided = Operation.objects.filter(id__in=chunk, scores__has_key="decision")
        decisions = {pk: scores["decision"] for pk, scores in decided.values_list("pk", "scores")}
        out["operations"] += Operation.objects.filter(id__in=chunk).update(
            result_document="",
            planned_document="",
            result_metadata=None,
            reason="",
            lost={},
            risk_reasons=[],
            scores={},
            status_detail=f"purged by forget request #{request.pk}",
        )
        for pk, decision in decisions.items():
            Operation.objects.filter(pk=pk).update(scores={"decision": decision})
    out |= _purge_passes(request, agent, held, ids, needles)
    out["events"] = sum(
        _save_scrubbed(e, ("note", "data"), needles)
        for e in AuditEvent.objects.filter(Q(agent=agent) | Q(run__agent=agent))
    )
    out["decisions"] = sum(
        _save_scrubbed(d, ("memories", "payload", "note", "revoke_note"), needles)
        for d in Decision.objects.filter(agent=agent)
    )
    out["imports"] = sum(
        _save_scrubbed(j, ("report", "errors", "message"), needles)
        for j in ImportJob.objects.filter(agent=agent)
    )
    return out


def _identifiers(text: str) -> set[str]:
    """Tokens of ``text`` (casefolded) of at least :data:`IDENTIFIER_MIN_CHARS` characters
    that hold a digit and a letter, or six digits."""
    out = set()
    for t in _TOKEN.findall(text.casefold()):
        digits = sum(c.isdigit() for c in t)
        if (
            len(t) >= IDENTIFIER_MIN_CHARS
            and digits
            and (digits >= 6 or any(c.isalpha() for c in t))
        ):
            out.add(t)
    return out


def probe_holds(
    question: str, answer: str, texts: list[str], answered: frozenset[str] = frozenset()
) -> bool:
    """True when a probe (``question``, ``answer``) asks about one of the forgotten ``texts``:
    its question or answer quotes one (at least 4 characters); its answer (at least 4
    characters) is found in one (case-insensitive: the answer the memory held) and is not in
    ``answered`` (casefolded answers a memory the forget leaves still holds); or it shares an
    identifier with one (:func:`_identifiers`: "ZQ-4471", "C01X00T47")."""
    q, a = question or "", answer or ""
    folded = [t.casefold() for t in texts]
    if any(len(t) >= 4 and (t in q or t in a) for t in texts):
        return True
    a_folded = a.strip().casefold()
    if len(a_folded) >= 4 and a_folded not in answered and any(a_folded in t for t in folded):
        return True
    ids = set().union(*(_identifiers(t) for t in texts)) if texts else set()
    return bool(ids & (_identifiers(q) | _identifiers(a)))


def _snapshots(data: Any) -> list[dict[str, Any]]:
    """The probe snapshots an audit event's data holds (itself, ``before``, ``after``)."""
    if not isinstance(data, dict):
        return []
    out = [data] + [data[k] for k in ("before", "after") if isinstance(data.get(k), dict)]
    return [d for d in out if "question" in d or "answer" in d]


def probe_answers_kept(*, agent: Agent, texts: list[str], live: Iterable[str]) -> frozenset[str]:
    """The casefolded answers of the agent's probes that a forgotten text holds and one of the
    ``live`` documents (what the forget leaves) holds too: such a probe still has its answer
    in the store, so it is not about the forgotten memory alone."""
    folded = [t.casefold() for t in texts]
    answers = {
        a
        for a in (p.strip().casefold() for p in agent.probes.values_list("answer", flat=True))
        if len(a) >= 4 and any(a in t for t in folded)
    }
    if not answers:
        return frozenset()
    kept = set()
    for doc in live:
        doc = doc.casefold()
        kept |= {a for a in answers if a in doc}
    return frozenset(kept)


def purge_probes(
    *,
    request: ForgetRequest,
    agent: Agent,
    texts: list[str],
    answered: frozenset[str] = frozenset(),
) -> dict[str, int]:
    """Delete the agent's probes that ask about a forgotten text (:func:`probe_holds`;
    ``answered`` from :func:`probe_answers_kept`), and purge every probe audit event
    (created, updated, deleted) whose probe did, and the passes' recall figures (their lost
    probes quote question and answer). Returns ``{"probes": deleted, "probe_events": events
    purged}``. Runs in the caller's transaction."""
    needles: set[str] = set()
    gone = []
    for probe in ProbeQuery.objects.filter(agent=agent):
        if probe_holds(probe.question, probe.answer, texts, answered):
            gone.append(probe.pk)
            needles |= {probe.question, probe.answer}
    events = []
    for event in AuditEvent.objects.filter(agent=agent, verb__startswith="probe_"):
        snaps = _snapshots(event.data)
        if any(
            probe_holds(str(d.get("question") or ""), str(d.get("answer") or ""), texts, answered)
            for d in snaps
        ):
            events.append(event)
            for d in snaps:
                needles |= {str(d.get("question") or ""), str(d.get("answer") or "")}
    ordered = sorted((n for n in needles if n), key=len, reverse=True)
    for event in events:
        AuditEvent.objects.filter(pk=event.pk).update(note=PURGED, data=scrub(event.data, ordered))
    if ordered:
        for run in Pass.objects.filter(agent=agent).exclude(recall={}):
            _save_scrubbed(run, ("recall",), ordered)
    ProbeQuery.objects.filter(pk__in=gone).delete()
    return {"probes": len(gone), "probe_events": len(events)}
