"""Typed shapes of the JSON API and the MCP tools' structured results (one set for both).

Fractions (``loss_fraction``, recall) are in [0, 1]; counts are memory entries; times are
ISO 8601 with a UTC offset; scores are cosine similarities in [-1, 1].
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from ninja import Field, Schema
from pydantic import field_validator

from memoryadmin.core.validation import MAX_NOTE_CHARS
from memoryadmin.proposals.models import Operation, Pass

PassStatus = Literal[tuple(Pass.Status.values)]  # type: ignore[valid-type]
"""Every value of ``Pass.Status`` (the pass lifecycle, docs/ARCHITECTURE.md)."""
OperationKind = Literal[tuple(Operation.Kind.values)]  # type: ignore[valid-type]
"""Every value of ``Operation.Kind`` (conflict items included)."""


def _llm_field() -> Any:
    """The ``llm`` field of a pass and of a dry run (``consolidation.snapshot.llm_brief``)."""
    return Field(
        default=None,
        description="The model's work in this pass: model, totals (requests, failed, "
        "tokens_in, tokens_out, seconds), one sentence per LLM step (judge, distill) and "
        "cost_usd (the totals at the model's price in LLM_PRICES; null without a price); "
        "null when nothing was sent to a model.",
    )


class ErrorOut(Schema):
    """Every error: ``detail`` is a sentence a person can act on; ``errors`` names bad fields."""

    detail: str
    errors: list[dict[str, str]] = Field(default_factory=list)


class ScheduleOut(Schema):
    """The agent's 5-field cron schedule; ``next_run`` in UTC (``None`` when paused)."""

    cron: str
    enabled: bool
    next_run: datetime | None = None


class AgentOut(Schema):
    """An agent with its counts: ``memories`` is ``None`` when the store cannot be read now
    (``store_error`` says why); ``passes`` counts passes by status."""

    slug: str
    name: str
    description: str
    collection: str
    attached: bool
    auto_apply: str = Field(description="off | safe | all")
    schedule: ScheduleOut
    memories: int | None
    store_error: str = ""
    pending_proposals: int
    passes: dict[str, int]
    active_pass_id: int | None = None
    last_pass_id: int | None = None


class AgentDetailOut(AgentOut):
    policy: dict[str, Any]
    field_map: dict[str, Any]
    probes: int


class MemoryOut(Schema):
    """A memory as the browser shows it; ``score`` is the cosine to the query (search only)."""

    id: str
    document: str
    metadata: dict[str, Any]
    tier: str
    pinned: bool
    score: float | None = None


class MemoryPage(Schema):
    """One page of memories; ``tiers`` lists every tier seen in the store."""

    count: int
    page: int
    pages: int
    tiers: list[str]
    items: list[MemoryOut]


class MemoryHistoryItem(Schema):
    """An operation of a pass that read, wrote or archived the memory."""

    pass_id: int | None
    operation: int | None = None
    kind: str
    status: str


class MemoryDetailOut(Schema):
    """``current`` is ``None`` when the memory is no longer in the store (see ``archived``)."""

    id: str
    current: MemoryOut | None
    archived: list[dict[str, Any]]
    operations: list[MemoryHistoryItem]


class RecallOut(Schema):
    """Answer recall@k over the agent's probe queries before/after the plan (``None``: no
    probes)."""

    passed: bool | None = None
    reason: str | None = None
    k: int | None = None
    probes: int | None = None
    answer_recall_before: float | None = None
    answer_recall_after: float | None = None
    context_chars_before: float | None = None
    context_chars_after: float | None = None


class ContentGuardOut(Schema):
    """The content guard's verdict on what a pass now includes: ``passed``, ``reason``, the
    distinct ``lost_content_words`` and ``lost_sentences``, ``store_sentences`` (the base of the
    sentence fraction) and ``overridden`` (``{"by", "at", "reason"}`` once a person approved
    past it, else ``None``). Auto-apply needs it to pass."""

    passed: bool
    reason: str
    lost_content_words: int
    lost_sentences: int
    store_sentences: int
    overridden: dict[str, Any] | None = None


class PassOut(Schema):
    """A pass and its summary (the live evaluation of the included operations while proposed)."""

    id: int
    agent: str
    status: PassStatus
    trigger: str
    requested_by: str | None
    decided_by: str | None
    note: str
    reason: str
    error: str
    entries_before: int
    entries_after: int
    merged: int
    promoted: int = Field(
        description="Memories the promote operations promote: the pass page's "
        "'N memories promoted' (counts.promote). Merges written straight to the curated tier "
        "are `merged_to_curated`, not counted here."
    )
    merged_to_curated: int = Field(
        default=0, description="Merges whose result is written straight to the curated tier."
    )
    pruned: int
    reconciled: int
    loss_fraction: float
    max_loss_fraction: float
    guard_passed: bool | None
    guard_reason: str
    planned_entries_after: int = Field(
        default=0,
        description="`entries_after` as planned and approved (with the reviewer's exclusions), "
        "before apply found operations in conflict (`entries_after` and `loss_fraction` "
        "count what the pass counts now: for a partly applied pass, what it applied, as its "
        "page says).",
    )
    planned_loss_fraction: float = Field(
        default=0.0,
        description="`loss_fraction` as planned and approved (the loss guard's figure).",
    )
    planned_guard_reason: str = Field(
        default="", description="The loss guard's sentence on the planned figures."
    )
    counts: dict[str, str] = Field(
        default_factory=dict,
        description="What each kind of the included operations does, in the words of the pass "
        "page's summary: {kind: '10 promote operations · 10 memories promoted'}; `promoted` is "
        "the same memories count, `merged_to_curated` the merges the merge line says go to the "
        "curated tier.",
    )
    content_guard: ContentGuardOut | None = Field(
        default=None,
        description="The content guard beside the loss guard (a pass with operations).",
    )
    recall: RecallOut
    operations: int
    excluded_operations: int = Field(description="Operations a reviewer excluded.")
    uncounted_operations: int = Field(
        default=0,
        description="Operations the figures leave out: excluded or found in conflict (the "
        "page's '2 excluded, 1 in conflict').",
    )
    progress: float
    progress_label: str
    created_at: datetime
    planned_at: datetime | None
    finished_at: datetime | None
    url: str
    llm: dict[str, Any] | None = _llm_field()
    revision: str | None = Field(
        default=None,
        description="While proposed: the revision of what approving applies; send it with "
        "approve to be refused (409) if the operations changed since you read them.",
    )


class PassPage(Schema):
    """One page of passes (50), newest first."""

    count: int
    page: int
    pages: int
    items: list[PassOut]


class SourceOut(Schema):
    """An original memory an operation reads, frozen at planning; ``removed``: leaves the store."""

    memory_id: str
    document: str
    metadata: dict[str, Any]
    removed: bool


class OperationOut(Schema):
    """One operation; ``stale`` says why the store has overtaken it (proposed passes only).

    Its lost content, as the Review tab shows it and with the pass's definition (nothing a
    memory keeps after the pass counts): ``lost_sentences``; ``lost_content_words``, the
    distinct content words counted under it; ``shared_content_words``, words it loses too that
    are counted under an earlier operation (word → that operation's ``index``). Over the
    included operations, the ``lost_content_words`` add up to the pass's
    ``content_guard.lost_content_words``."""

    index: int
    kind: OperationKind
    rule: str
    reason: str
    scores: dict[str, Any]
    status: str
    excluded: bool
    edited: bool
    result_id: str
    result_document: str
    sources: list[SourceOut]
    stale: str = ""
    written_by: str | None = Field(
        None,
        description="the model whose text or verdict the operation carries (a distilled fact, "
        "an LLM summary, the LLM judge's merge or reconcile); such an operation waits for a "
        "person in every auto-apply mode",
    )
    lost_sentences: int = 0
    lost_content_words: list[str] = []
    shared_content_words: dict[str, int] = {}


class PassDetailOut(PassOut):
    policy: dict[str, Any]
    stale_error: str = ""
    operations_page: int
    operations_pages: int
    operations_count: int
    items: list[OperationOut]


class EventOut(Schema):
    """One audit event: who (``actor``) did what (``verb``) to which pass, when, and why
    (``note``)."""

    id: int
    created_at: datetime
    actor: str
    verb: str
    agent: str | None
    pass_id: int | None
    from_status: str
    to_status: str
    note: str
    data: dict[str, Any]


class EventPage(Schema):
    """One page of audit events (50), newest first."""

    count: int
    page: int
    pages: int
    items: list[EventOut]


class ConsolidateOut(Schema):
    """``memory_consolidate`` / ``POST /passes``: a dry run's ``ConsolidationResult`` figures
    (``pass_id`` is ``None``, nothing written) or the pass that was created (its id and status).
    ``guard_passed``/``guard_reason`` are the loss guard's verdict; ``recall_*`` the recall guard's.
    """

    dry_run: bool
    pass_id: int | None
    status: str
    agent: str
    policy: str
    entries_before: int
    entries_after: int
    merged: int
    promoted: int = Field(
        description="Memories the promote operations promote: the pass page's "
        "'N memories promoted' (as GET /passes/{id}); merges written straight to the curated "
        "tier are `merged_to_curated`."
    )
    merged_to_curated: int = Field(
        default=0, description="Merges whose result is written straight to the curated tier."
    )
    pruned: int
    reconciled: int
    loss_fraction: float
    max_loss_fraction: float
    guard_passed: bool | None
    guard_reason: str
    recall_passed: bool | None = None
    recall_reason: str | None = None
    recall_before: float | None = None
    recall_after: float | None = None
    llm: dict[str, Any] | None = _llm_field()
    url: str | None = None


class DryRunOut(Schema):
    """A dry run planned by the worker (``POST /passes`` with ``dry_run``, ``memory_consolidate``
    with ``dry_run``): ``status`` ``queued → running → done | failed``. Poll ``poll_url`` (``GET
    /api/v1/dry-runs/{id}?wait=<s>``) until it is done: ``result`` is then the figures the pass
    would have (the :class:`ConsolidateOut` a synchronous dry run returned; nothing written);
    ``error`` says why a failed one failed (a time or memory budget, the store down …).
    ``seconds``: planning time so far; ``url``: the dry run's page in the console."""

    dry_run: bool = True
    dry_run_id: int
    status: Literal["queued", "running", "done", "failed"]
    agent: str
    policy: str
    progress: float
    progress_label: str
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    seconds: float | None
    error: str
    result: ConsolidateOut | None
    poll_url: str
    url: str


# ----- inputs -----------------------------------------------------------------------------


class PassCreateIn(Schema):
    """Run a pass now: ``dry_run`` queues a dry run for the worker (plans and measures only,
    nothing stored; :class:`DryRunOut`, waiting up to ``wait`` seconds for it); otherwise a
    proposal is created (or auto-applied per the agent's policy). ``policy``: a named policy
    (``default``, ``aggressive``) for this pass only; ``None`` = the agent's own."""

    agent: str = Field(min_length=1, max_length=80)
    dry_run: bool = False
    policy: str | None = Field(default=None, max_length=40)
    wait: float = Field(
        default=0,
        ge=0,
        le=60,
        description="dry runs: seconds to wait for the result (at most "
        "MEMORYADMIN_DRY_RUN_MAX_WAIT, 30 by default); 0 answers at once",
    )
    replace: bool = Field(
        default=False,
        description="Supersede a proposal of the agent still waiting for review (marked stale, "
        "its review carried over); without it such a request is refused with 409.",
    )


class NoteIn(Schema):
    """An optional note (roll back); the body itself may be left out."""

    note: str = Field(default="", max_length=MAX_NOTE_CHARS)


class ApproveIn(NoteIn):
    """Approve: an optional note and the optional ``revision`` read from the pass (when given
    and the operations changed since, the approve is refused with 409 and nothing applied)."""

    revision: str | None = Field(
        default=None,
        max_length=64,
        pattern=r"^[0-9]+$",
        description="The pass's `revision` as read (a decimal counter, as a string or a JSON "
        "number); anything else is a malformed request (422), not a changed pass (409).",
    )

    @field_validator("revision", mode="before")
    @classmethod
    def _revision_number(cls, value: Any) -> Any:
        """A revision sent as a JSON number (``5``) is read as its digits (``"5"``); a
        negative, fractional or boolean one stays what it is and is refused (422)."""
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return str(value)
        return value


class ResolveIn(Schema):
    """A reviewer's answer to a conflict item: keep memory ``a`` (its first source as planned),
    ``b`` (its second) or ``both``."""

    keep: Literal["a", "b", "both"]


class RequiredNoteIn(Schema):
    """A required, non-blank note (reject)."""

    note: str = Field(max_length=MAX_NOTE_CHARS)

    @field_validator("note")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("a note is required: say why the proposal is rejected")
        return value.strip()


class RejectIn(RequiredNoteIn):
    """Reject: the required note, and ``never_again`` ("and never propose these again": keep
    the memories of its merges and reconciles apart and keep what it would prune)."""

    never_again: bool = False


class DecisionOut(Schema):
    """A standing decision of an agent (docs/OPERATOR.md): ``kind`` keep_apart |
    keep | rejected_plan | conflict_pick; ``memories`` ``[[memory id, content hash], ...]``;
    ``payload`` ``{"keep": id}`` (pick), ``{"apart": true}`` (keep both), ``{"signatures":
    [...]}`` (rejected plan); ``held_back`` the distinct later operations it left out or held for
    review; ``revoked_at`` set once revoked."""

    id: int
    agent: str
    kind: str
    label: str
    memories: list[list[str]]
    payload: dict[str, Any]
    note: str
    created_by: str
    created_at: datetime
    pass_id: int | None
    held_back: int
    active: bool
    revoked_at: datetime | None = None
    revoked_by: str = ""
    revoke_note: str = ""


ForgetKind = Literal["scope", "ids", "contains", "similar"]


class ForgetIn(Schema):
    """A forget request's selection: ``scope`` (``key`` — one of the agent's scope keys — and
    ``value``), ``ids``, ``contains`` (``text``, case-insensitive) or ``similar`` (``text``,
    cosine ≥ ``similarity``); ``max_count`` caps contains and similar. ``dry_run`` lists what
    it would remove without storing anything."""

    kind: ForgetKind
    key: str = Field(default="", max_length=200)
    value: str = Field(default="", max_length=500)
    ids: list[str] = Field(default_factory=list, max_length=10_000)
    text: str = Field(default="", max_length=2000)
    similarity: float = Field(default=0.8, ge=0.0, le=1.0)
    max_count: int = Field(default=100, ge=1, le=10_000)
    reason: str = Field(default="", max_length=MAX_NOTE_CHARS)
    dry_run: bool = False


class ForgetMemoryOut(Schema):
    """A memory a forget removes (``where``: live | archived) or leaves while it holds a
    forgotten text (related: ``why``); ``document`` is ``None`` for a live id no longer in the
    store."""

    id: str
    document: str | None = None
    where: str = "live"
    why: str = ""


class ForgetOut(Schema):
    """A forget request (``id`` ``None`` for a dry run). While proposed it lists every memory
    it removes; once applied only the tombstone remains: who asked and approved, when, the
    counts, ``purged`` (rows purged by kind) and ``selection`` hashed (SHA-256), never text."""

    id: int | None = None
    dry_run: bool = False
    agent: str
    status: str
    kind: str
    selection: dict[str, Any]
    display: str = Field(description="the selection as typed; empty once applied or rejected")
    count: int
    live_count: int
    archived_count: int
    related_count: int
    memories: list[ForgetMemoryOut] = Field(default_factory=list)
    related: list[ForgetMemoryOut] = Field(default_factory=list)
    purged: dict[str, int] = Field(default_factory=dict)
    skipped: list[dict[str, str]] = Field(
        default_factory=list,
        description="listed memories left alone because they changed since planning: id, why",
    )
    requested_by: str = ""
    decided_by: str = ""
    reason: str = ""
    note: str = ""
    error: str = ""
    created_at: datetime | None = None
    decided_at: datetime | None = None
    finished_at: datetime | None = None
    not_undoable: str
