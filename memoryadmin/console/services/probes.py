"""Probe queries written by operators: create, update, delete (each audited).

Services in the HackSoft style (``probe_<verb>``, keyword-only, ``@transaction.atomic``). The
recall check reads these rows through :func:`memoryadmin.console.selectors.probes.agent_probes`;
imported LoCoMo probes (``external_key`` set) can be edited too — a later re-import restores the
source's wording for those keys, as it does for memories.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db import transaction

from ..errors import ServiceError
from ..models import Agent, ProbeQuery
from ..validation import parse_evidence_ids
from .common import actor_name, audit

__all__ = [
    "MAX_ANSWER_CHARS",
    "MAX_QUESTION_CHARS",
    "probe_create",
    "probe_delete",
    "probe_update",
]

MAX_QUESTION_CHARS = 2000
"""Longest question (characters). A probe is one question an agent should answer from memory;
LoCoMo's longest is under 300 characters, so 2,000 leaves room without admitting pasted files."""

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
    missing or over-long text, a bad category or bad evidence ids (nothing written).
    """
    fields = _clean(question, answer, evidence_ids, category)
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
