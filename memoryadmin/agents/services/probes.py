"""Probe queries written by operators: create, update, delete (each audited).

Services in the HackSoft style (``probe_<verb>``, keyword-only, ``@transaction.atomic``). The
recall check reads these rows through :func:`memoryadmin.agents.selectors.probes.agent_probes`;
imported LoCoMo probes (``external_key`` set) can be edited too — a later re-import restores the
source's wording for those keys, as it does for memories.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db import transaction

from memoryadmin.agents.models import Agent, ProbeQuery
from memoryadmin.core import stores
from memoryadmin.core.errors import ServiceError
from memoryadmin.core.services import actor_name, audit
from memoryadmin.core.validation import parse_evidence_ids

__all__ = [
    "MAX_ANSWER_CHARS",
    "MAX_QUESTION_CHARS",
    "UnknownEvidence",
    "known_evidence",
    "probe_create",
    "probe_delete",
    "probe_update",
]

MAX_QUESTION_CHARS = 2000
"""Longest question (characters). A probe is one question an agent should answer from memory;
LoCoMo's longest is under 300 characters, so 2,000 leaves room without admitting pasted files."""


class UnknownEvidence(ValueError):
    """Evidence ids no memory of the agent lists in its evidence metadata (the form shows the
    message at the Evidence ids field)."""


def known_evidence(agent: Agent) -> set[str]:
    """Every evidence id the agent's memories list (the field map's ``evidence`` key, what
    evidence recall matches against). Reads the store's metadata page by page (no embeddings);
    raises ``StoreUnavailable`` when Chroma is down."""
    fm = agent.get_field_map()
    store = stores.get_store(agent)
    return {
        str(e)
        for page in store.iter_pages(include_embeddings=False)
        for rec in page
        for e in fm.get_list(rec.metadata, fm.evidence)
    }


def _check_evidence(agent: Agent, ids: list[str]) -> None:
    """Refuse evidence ids no memory lists (:class:`UnknownEvidence`, naming up to five and
    one the store does list), so a typo is not saved as a probe whose evidence recall is 0."""
    if not ids:
        return
    known = known_evidence(agent)
    unknown = [i for i in ids if i not in known]
    if not unknown:
        return
    shown = ", ".join(unknown[:5]) + (f" and {len(unknown) - 5} more" if len(unknown) > 5 else "")
    example = f" (they list e.g. {min(known)})" if known else " (none lists any evidence)"
    raise UnknownEvidence(
        f"No memory of {agent.name} lists the evidence id{'s' if len(unknown) > 1 else ''} "
        f"{shown} in its evidence metadata{example}; nothing was saved."
    )


MAX_ANSWER_CHARS = 2000
"""Longest expected answer (characters); answer recall scores its content words, so a
long answer is a probe nobody can pass."""


def _clean(question: str, answer: str, evidence_ids: Any, category: int | None) -> dict[str, Any]:
    question, answer = (question or "").strip(), (answer or "").strip()
    if not question:
        raise ValueError("The question is required.")
    if not answer:
        raise ValueError("The answer is required.")
    if len(question) > MAX_QUESTION_CHARS:
        raise ValueError(f"The question is longer than {MAX_QUESTION_CHARS:,} characters.")
    if len(answer) > MAX_ANSWER_CHARS:
        raise ValueError(f"The answer is longer than {MAX_ANSWER_CHARS:,} characters.")
    if category is not None and (
        isinstance(category, bool) or not isinstance(category, int) or category < 0
    ):
        raise ValueError("The category is a whole number ≥ 0 (LoCoMo uses 1–4).")
    return {
        "question": question,
        "answer": answer,
        "evidence_ids": parse_evidence_ids(evidence_ids),
        "category": category,
    }


def _snapshot(probe: ProbeQuery) -> dict[str, Any]:
    return {
        "probe_id": probe.pk,
        "question": probe.question,
        "answer": probe.answer,
        "evidence_ids": list(probe.evidence_ids or []),
        "category": probe.category,
    }


def _own(agent: Agent, probe: ProbeQuery) -> None:
    if probe.agent_id != agent.pk:
        raise ServiceError(f"Probe #{probe.pk} does not belong to agent {agent.slug}.")


@transaction.atomic
def probe_create(
    *,
    agent: Agent,
    question: str,
    answer: str,
    evidence_ids: str | Iterable[str] | None = None,
    category: int | None = None,
    user: Any = None,
) -> ProbeQuery:
    """Add a probe query to ``agent``; audited (verb ``probe_created``).

    ``question`` and ``answer`` are stripped and required; ``evidence_ids`` is a comma/space
    separated string or a list (see :func:`parse_evidence_ids`). Raises ``ValueError`` for a
    missing or over-long text, a bad category or bad evidence ids (nothing written), and
    :class:`UnknownEvidence` for evidence ids no memory of the agent lists.
    """
    fields = _clean(question, answer, evidence_ids, category)
    _check_evidence(agent, fields["evidence_ids"])
    probe = ProbeQuery.objects.create(agent=agent, **fields)
    audit(
        actor=actor_name(user, "cli"),
        verb="probe_created",
        agent=agent,
        user=user,
        note=probe.question[:200],
        data=_snapshot(probe),
    )
    return probe


@transaction.atomic
def probe_update(
    *,
    agent: Agent,
    probe: ProbeQuery,
    question: str,
    answer: str,
    evidence_ids: str | Iterable[str] | None = None,
    category: int | None = None,
    user: Any = None,
) -> ProbeQuery:
    """Replace a probe's question, answer, evidence ids and category; audited (``probe_updated``)
    with the fields before and after. No change → nothing written, no event.

    Raises ``ValueError`` as :func:`probe_create`, :class:`ServiceError` when ``probe`` belongs
    to another agent.
    """
    _own(agent, probe)
    fields = _clean(question, answer, evidence_ids, category)
    before = _snapshot(probe)
    changed = [k for k, v in fields.items() if getattr(probe, k) != v]
    if not changed:
        return probe
    if "evidence_ids" in changed:  # ids kept as they were are not checked again
        old = {str(e) for e in probe.evidence_ids or []}
        _check_evidence(agent, [e for e in fields["evidence_ids"] if e not in old])
    for k in changed:
        setattr(probe, k, fields[k])
    probe.save(update_fields=changed)
    audit(
        actor=actor_name(user, "cli"),
        verb="probe_updated",
        agent=agent,
        user=user,
        note=probe.question[:200],
        data={
            "probe_id": probe.pk,
            "changed": changed,
            "before": before,
            "after": _snapshot(probe),
        },
    )
    return probe


@transaction.atomic
def probe_delete(*, agent: Agent, probe: ProbeQuery, user: Any = None) -> None:
    """Delete a probe; audited (``probe_deleted``) with its content, so it can be re-entered.

    Raises :class:`ServiceError` when ``probe`` belongs to another agent.
    """
    _own(agent, probe)
    data = _snapshot(probe)
    probe.delete()
    audit(
        actor=actor_name(user, "cli"),
        verb="probe_deleted",
        agent=agent,
        user=user,
        note=data["question"][:200],
        data=data,
    )
