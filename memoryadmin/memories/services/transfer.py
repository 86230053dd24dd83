"""Imports of memories: LoCoMo conversations and JSONL files; the export is a read,
:mod:`memoryadmin.memories.selectors.transfer`.

Services (keyword-only, ``<entity>_<verb>``) used by the management commands and the agent page:

- :func:`locomo_import` — one agent per LoCoMo conversation (``locomo-conv-26`` …) holding its
  turns, observations and session summaries, with its QA items as probe queries. Idempotent:
  ids are deterministic, unchanged memories are not rewritten, probes are keyed.
- :func:`memories_import_jsonl` — validate a JSONL file (:mod:`consolidation.jsonl`) and write it
  all-or-nothing (or only the valid lines with ``skip_invalid``); a store failure part-way is
  undone. Used by ``manage.py import_memories`` (synchronously) and by the worker.

Uploads from the agent page run on the worker: see
:mod:`memoryadmin.memories.services.transfer_jobs`.

Writes to a store are upserts of records whose embeddings are reused when the same id already
holds the same text ("existing embeddings are reused, never recomputed", docs/ARCHITECTURE.md) and
computed in batches otherwise.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import numpy as np
from django.db import transaction
from django.utils.translation import ngettext

from consolidation import MemoryRecord
from consolidation.jsonl import LineError, LineErrors, read_jsonl
from consolidation.locomo import LocomoConversation, load_locomo
from memoryadmin.agents.models import Agent, ProbeQuery
from memoryadmin.agents.services.agents import agent_create
from memoryadmin.core import stores
from memoryadmin.core.errors import ServiceError
from memoryadmin.core.models import AuditEvent
from memoryadmin.core.services import store_sampled
from memoryadmin.memories.selectors.transfer import Progress

__all__ = [
    "ImportInterrupted",
    "ImportRefused",
    "ImportReport",
    "LocomoImportReport",
    "locomo_import",
    "memories_import_jsonl",
    "memories_write",
]

WRITE_BATCH = 1000
"""Records per upsert/read call (well under Chroma's ~5,000-row page limit)."""


class ImportInterrupted(ServiceError):
    """The store failed part-way through writing an import. ``undone`` tells whether what had
    been written was taken back (else re-running the same import completes it)."""

    def __init__(self, message: str, *, written: int, undone: bool) -> None:
        super().__init__(message)
        self.written = written
        self.undone = undone


class ImportRefused(ServiceError):
    """A JSONL file had invalid lines and nothing was written. ``errors`` lists the first
    ``MAX_ERRORS`` of them, ``error_count`` counts them all."""

    def __init__(self, message: str, errors: Sequence[LineError]) -> None:
        super().__init__(message)
        self.errors = list(errors)
        self.error_count = getattr(errors, "total", len(self.errors))


@dataclass
class ImportReport:
    """What a JSONL import did: ``written`` upserted, ``unchanged`` already identical,
    ``embedded`` embeddings computed, ``errors`` the invalid lines skipped (the first
    ``MAX_ERRORS``), ``error_count`` how many there were in all."""

    agent: str
    valid: int = 0
    written: int = 0
    unchanged: int = 0
    embedded: int = 0
    errors: list[LineError] = field(default_factory=list)
    error_count: int = 0

    def __post_init__(self) -> None:
        self.error_count = max(self.error_count, len(self.errors))

    def summary(self) -> str:
        """One line for the operator."""
        text = (
            f"{self.agent}: {self.valid:,} valid memories — {self.written:,} written, "
            f"{self.unchanged:,} unchanged, {self.embedded:,} embedded"
        )
        if self.error_count:
            text += (
                f"; {self.error_count:,} invalid "
                f"{ngettext('line', 'lines', self.error_count)} skipped"
            )
        return text

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (errors as "line N: message" strings)."""
        return {
            "agent": self.agent,
            "valid": self.valid,
            "written": self.written,
            "unchanged": self.unchanged,
            "embedded": self.embedded,
            "errors": [str(e) for e in self.errors],
            "error_count": self.error_count,
        }


@dataclass
class LocomoImportReport:
    """What importing one LoCoMo conversation did."""

    conversation: str
    agent: str
    agent_created: bool
    turns: int
    observations: int
    summaries: int
    written: int
    unchanged: int
    embedded: int
    probes_created: int
    probes_updated: int

    def summary(self) -> str:
        """One line for the operator."""
        verb = "created" if self.agent_created else "updated"
        return (
            f"{self.conversation} → agent {self.agent} ({verb}): {self.turns:,} turns, "
            f"{self.observations:,} observations, {self.summaries:,} summaries; "
            f"{self.written:,} written, {self.unchanged:,} unchanged; probes "
            f"{self.probes_created:,} new, {self.probes_updated:,} updated"
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return dict(self.__dict__)


def _embed(texts: list[str]) -> np.ndarray:
    from consolidation.adapters.embedder import get_default_embedder

    return np.asarray(get_default_embedder().embed(texts), dtype=np.float32)


@dataclass
class _Journal:
    """What a write changed, to undo it: ids it created and the records it replaced."""

    created: list[str] = field(default_factory=list)
    replaced: list[MemoryRecord] = field(default_factory=list)

    def undo(self, store: Any) -> None:
        """Delete the created ids and write the replaced records back (raises on failure)."""
        if self.created:
            store.delete(self.created)
        for start in range(0, len(self.replaced), WRITE_BATCH):
            store.upsert(self.replaced[start : start + WRITE_BATCH])


def memories_write(
    *,
    agent: Agent,
    records: Sequence[MemoryRecord],
    progress: Progress | None = None,
    undo_on_failure: bool = False,
) -> tuple[int, int, int]:
    """Upsert ``records`` into the agent's store; returns ``(written, unchanged, embedded)``.

    A record whose id already holds the same document and metadata (and, when the record brings
    one, the same embedding) is left alone; a record without an embedding reuses the stored one
    when the text is unchanged, else it is embedded (batched). Raises ``StoreUnavailable``.

    Undoable with ``undo_on_failure``: the ids each batch creates and the records it replaces
    are journaled (in memory) before the batch is written; when any write fails, the journal is
    played back (created ids deleted, replaced records written back) and
    :class:`ImportInterrupted` is raised with ``undone=True``. When the undo fails too (the
    store is gone), it is raised with ``undone=False``: re-running the same records completes
    the write, as records already written count as unchanged. Without it, a failure leaves the
    earlier batches written (idempotent to re-run; what ``locomo_import`` relies on).
    """
    store = stores.get_store(agent)
    journal = _Journal() if undo_on_failure else None
    written = unchanged = embedded = 0
    try:
        for start in range(0, len(records), WRITE_BATCH):
            batch = list(records[start : start + WRITE_BATCH])
            live = {r.id: r for r in store.get([r.id for r in batch], include_embeddings=True)}
            todo, need, same = _plan_batch(batch, live)
            unchanged += same
            if need:
                vecs = _embed([todo[i].document for i in need])
                for i, v in zip(need, vecs, strict=True):
                    todo[i] = todo[i].with_embedding(v)
                embedded += len(need)
            if todo:
                if journal is not None:
                    journal.created.extend(r.id for r in todo if r.id not in live)
                    journal.replaced.extend(live[r.id] for r in todo if r.id in live)
                store.upsert(todo)
                written += len(todo)
            if progress:
                progress(len(batch), f"{agent.slug}: {start + len(batch):,} of {len(records):,}")
    except Exception as exc:
        if journal is None:
            raise
        _undo_or_explain(store, journal, exc, written)
    if written:  # the dashboard's memory count comes from the latest sample, not the store
        store_sampled(agent, store)
    return written, unchanged, embedded


def _plan_batch(
    batch: list[MemoryRecord], live: dict[str, MemoryRecord]
) -> tuple[list[MemoryRecord], list[int], int]:
    """``(records to write, indexes of those needing an embedding, count unchanged)``."""
    todo: list[MemoryRecord] = []
    need: list[int] = []
    unchanged = 0
    for r in batch:
        old = live.get(r.id)
        if (
            old is not None
            and old.content_hash == r.content_hash
            and (
                r.embedding is None
                or (old.embedding is not None and np.array_equal(old.embedding, r.embedding))
            )
        ):
            unchanged += 1
            continue
        if r.embedding is None:
            if old is not None and old.embedding is not None and old.document == r.document:
                r = r.with_embedding(old.embedding)
            else:
                need.append(len(todo))
        todo.append(r)
    return todo, need, unchanged


def _undo_or_explain(store: Any, journal: _Journal, exc: Exception, written: int) -> None:
    """Undo a failed write and raise :class:`ImportInterrupted` saying what the store holds."""
    if not journal.created and not journal.replaced:
        raise exc  # nothing was written: the store's own error says it best
    reason = f"{type(exc).__name__}: {exc}" if not isinstance(exc, ServiceError) else str(exc)
    try:
        journal.undo(store)
    except Exception as undo_exc:
        raise ImportInterrupted(
            f"The store failed after {written:,} memories were written ({reason}) and they could "
            f"not be taken back ({undo_exc}). Run the same import again once the store is back: "
            "memories already written are skipped.",
            written=written,
            undone=False,
        ) from exc
    raise ImportInterrupted(
        f"The store failed part-way ({reason}); the {written:,} memories written before it were "
        "taken back, so nothing was imported.",
        written=written,
        undone=True,
    ) from exc


def _audit(agent: Agent, user: Any, actor: str, verb: str, note: str, data: dict[str, Any]) -> None:
    AuditEvent.objects.create(
        agent=agent,
        user=user if getattr(user, "pk", None) else None,
        actor=getattr(user, "username", None) or actor,
        verb=verb,
        note=note,
        data=data,
    )


def memories_import_jsonl(
    *,
    agent: Agent,
    fileobj: bytes | str | Path | IO[bytes],
    skip_invalid: bool = False,
    user: Any = None,
    actor: str = "cli",
    progress: Progress | None = None,
    name: str | None = None,
    on_valid: Callable[[int], None] | None = None,
) -> ImportReport:
    """Validate a JSONL memory file and write it to the agent's store, all or nothing.

    ``fileobj``: bytes, a path or a binary file object (an upload); ``name`` overrides the file
    name shown in messages. Every line is validated before anything is written. With invalid
    lines: raises :class:`ImportRefused` (message: one sentence; ``errors``: every line) and
    writes nothing — unless ``skip_invalid``, which writes the valid lines and reports the rest
    in ``ImportReport.errors``. Raises ``StoreUnavailable`` when Chroma is down before the first
    write, and :class:`ImportInterrupted` when it fails part-way: the write is undone (see
    :func:`memories_write`). ``on_valid(n)`` is called with the count of valid records once the
    file is validated. Audited on success (``memories_imported``), refusal
    (``memories_import_refused``) and failure (``memories_import_failed``).
    """
    records, errors = read_jsonl(fileobj, agent.get_field_map())
    if name is None:
        given = getattr(fileobj, "name", None) or (
            fileobj if isinstance(fileobj, str | Path) else "the file"
        )
        name = Path(str(given)).name
    if (errors and not skip_invalid) or (not records and not errors):
        refused = _refusal(name, records, errors)
        _audit(
            agent,
            user,
            actor,
            "memories_import_refused",
            str(refused),
            {
                "file": name,
                "invalid_lines": errors.total,
                "errors": [str(e) for e in errors[:100]],
            },
        )
        raise refused
    if on_valid:
        on_valid(len(records))
    report = ImportReport(
        agent=agent.slug, valid=len(records), errors=list(errors), error_count=errors.total
    )
    try:
        report.written, report.unchanged, report.embedded = memories_write(
            agent=agent, records=records, progress=progress, undo_on_failure=True
        )
    except ServiceError as exc:
        _audit(
            agent,
            user,
            actor,
            "memories_import_failed",
            f"{name}: {exc}",
            {
                "file": name,
                "valid": len(records),
                "written": getattr(exc, "written", 0),
                "undone": getattr(exc, "undone", True),
            },
        )
        raise
    _audit(
        agent,
        user,
        actor,
        "memories_imported",
        report.summary(),
        {"file": name, **report.to_dict(), "errors": [str(e) for e in errors[:100]]},
    )
    return report


def _refusal(name: str, records: list[MemoryRecord], errors: LineErrors) -> ImportRefused:
    if not errors:
        return ImportRefused(f"{name}: the file holds no memories; nothing written.", [])
    more = f" (and {errors.total - 1:,} more)" if errors.total > 1 else ""
    return ImportRefused(
        f"{name}: {errors.total:,} invalid {ngettext('line', 'lines', errors.total)}, "
        f"nothing written — {errors[0]}{more}. "
        + (
            f"Fix them or import the {len(records):,} valid "
            f"{ngettext('line', 'lines', len(records))} with --skip-invalid."
            if records
            else "No line is valid: fix the file."
        ),
        errors,
    )


def _ensure_agent(
    conv: LocomoConversation, *, collection_prefix: str, user: Any
) -> tuple[Agent, bool]:
    agent = Agent.objects.filter(slug=conv.slug).first()
    if agent is not None:
        if not stores.collection_exists(agent.collection_name):
            stores.create_collection(agent.collection_name)
        return agent, False
    collection = f"{collection_prefix}{conv.slug}"
    a, b = conv.speakers
    agent = agent_create(
        name=f"LoCoMo {conv.sample_id} ({a} & {b})",
        slug=conv.slug,
        collection_name=collection,
        attach=stores.collection_exists(collection),
        description=(
            f"LoCoMo conversation {conv.sample_id} between {a} and {b}: dialog turns (episodic), "
            "observations (semantic) and session summaries, with its QA items as probe queries. "
            "Source: snap-research/LoCoMo (CC BY-NC 4.0)."
        ),
        schedule_enabled=False,
        user=user,
    )
    return agent, True


@transaction.atomic
def _probes_upsert(agent: Agent, conv: LocomoConversation) -> tuple[int, int]:
    existing = {p.external_key: p for p in agent.probes.exclude(external_key="")}
    created = updated = 0
    new_rows = []
    for p in conv.probes:
        fields = {
            "question": p.question,
            "answer": p.answer,
            "evidence_ids": list(p.evidence),
            "category": p.category,
        }
        row = existing.get(p.key)
        if row is None:
            new_rows.append(ProbeQuery(agent=agent, external_key=p.key, **fields))
            created += 1
        elif any(getattr(row, k) != v for k, v in fields.items()):
            for k, v in fields.items():
                setattr(row, k, v)
            row.save(update_fields=list(fields))
            updated += 1
    ProbeQuery.objects.bulk_create(new_rows)
    return created, updated


def locomo_import(
    *,
    path: str | Path,
    conversations: Sequence[str] | None = None,
    collection_prefix: str = "",
    user: Any = None,
    actor: str = "cli",
    progress: Progress | None = None,
) -> list[LocomoImportReport]:
    """Import LoCoMo conversations from a ``locomo10.json``-format file.

    For each conversation (all, or those named in ``conversations``): the agent ``locomo-<id>``
    is created when missing (collection ``collection_prefix + slug``; schedule off), its memories
    are written (see :mod:`consolidation.locomo` for ids and metadata) and its QA items of
    categories 1–4 become probe queries keyed ``"<id>:qa:<n>"``. Running it again changes
    nothing. Raises ``ValueError`` for an unreadable/malformed file or an unknown conversation
    (before anything is written), ``StoreUnavailable`` when Chroma is down.
    """
    convs = load_locomo(path, conversations=conversations)
    reports = []
    for conv in convs:
        agent, created = _ensure_agent(conv, collection_prefix=collection_prefix, user=user)
        written, unchanged, embedded = memories_write(
            agent=agent, records=conv.memories, progress=progress
        )
        p_created, p_updated = _probes_upsert(agent, conv)
        report = LocomoImportReport(
            conversation=conv.sample_id,
            agent=agent.slug,
            agent_created=created,
            turns=conv.count("episodic"),
            observations=conv.count("semantic"),
            summaries=conv.count("summary"),
            written=written,
            unchanged=unchanged,
            embedded=embedded,
            probes_created=p_created,
            probes_updated=p_updated,
        )
        _audit(agent, user, actor, "locomo_imported", report.summary(), report.to_dict())
        reports.append(report)
    return reports
