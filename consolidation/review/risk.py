"""Risk score of an operation: which decisions of a pass a reviewer should read first.

The score combines what the planner already knows, one *factor* per doubt, each a weight in
[0, 1] with a short reason for the card. Factors combine as independent doubts (noisy-OR):
``score = 1 − Π (1 − w)``, so the score is in [0, 1], never decreases when a doubt is added, and
a single certain doubt (a conflict) gives 1.

Factors and weights (hand-set so the ordering reads as a reviewer would triage; the pinned
ordering is tested in ``tests/consolidation/test_review_risk.py``):

- conflict (1.0): a ``conflict`` operation; the reviewer must pick what stays.
- near the threshold (0.4 at the threshold, falling linearly to 0 at ``NEAR_MARGIN`` above it):
  a near-duplicate merge's ``min_cosine`` above ``link_threshold``, a reconcile's ``cosine``
  above ``contradiction_threshold``. Not a ``semantic_window``: it joins different facts of
  one session and speaker, so a low cosine between them is no doubt that they state one fact
  (it scored 0.4 for that alone and every LoCoMo window waited).
- differing numbers / dates / negation (0.35, + 0.15 × nearness; for numbers and dates 0.2 +
  0.15 × nearness when the merge loses no sentence, so both values survive in the merged text;
  never for a negation: "X" beside "not X" in one text is a hidden contradiction): the sources of a
  same-fact merge (``near_duplicate``, ``semantic_window``) state different numbers, name
  different dates (month/weekday names) or one negates another.
- reconcile (0.3): an older memory is superseded on a text cue.
- lost content words (0.12 each, at most 0.6): content words the result does not keep.
- lost numbers (0.3): a lost content word holds a digit (amounts, times, days, years).
  Both are scaled by ``1 − scores["coverage"]`` for a ``decay_covered`` prune (the planner
  measured that share of its content words in the memories its session keeps).
- lost wording (0.04 per sentence, at most 0.12): sentences lost whose content words survive.
- uncovered prune (0.4): a ``decay`` prune (not ``decay_covered``) of a memory never accessed
  (access count 0, no last access): nothing else holds its content.
- recent pass (0.25): a source was written by a pass applied recently.
- LLM text (0.2): a ``distill`` writes text an LLM wrote.

``RISK_LINE`` (0.3) is the line above which the console lists operations one by one: one lost
content word alone (0.12) or a far-from-threshold merge stays below it; a lost number, an
uncovered prune, a near-threshold merge or three lost content words cross it.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from ..policy import Policy
from ..records import FieldMap
from ..text import content_tokens, parse
from .content import pass_losses
from .lost import OperationLoss, OperationText, is_number

__all__ = ["NEAR_MARGIN", "RISK_LINE", "Risk", "operation_risk", "review_operations"]

RISK_LINE = 0.3
"""Operations scoring at least this are reviewed one by one (see the module docstring)."""

NEAR_MARGIN = 0.03
"""Cosine margin above a threshold still called "near": MiniLM paraphrases of one fact score
0.85–0.97 (docs/POLICY.md), so 0.03 above the 0.90 link threshold is the lower tail."""

_DATE_TEXT = """january february march april june july august september october november december
    jan feb mar apr jun jul aug sep sept oct nov dec monday tuesday wednesday thursday friday
    saturday sunday yesterday today tomorrow"""
_DATE_WORDS = frozenset(_DATE_TEXT.split())
"""Words naming a date. "May" is left out: as a modal verb it is far more common in memories."""
_WORDS = re.compile(r"[^\W_]+(?:['\u2019][^\W_]+)?")
_NEAR_RULES = ("near_duplicate", "semantic_window")


@dataclass(frozen=True)
class Risk:
    """``score`` in [0, 1] (higher = read first) and the ``reasons`` behind it, strongest first."""

    score: float
    reasons: tuple[str, ...]


def _words(text: str) -> list[str]:
    t = unicodedata.normalize("NFKC", text).casefold().replace("n't", " not")
    return _WORDS.findall(t)


def _cues(text: str) -> tuple[frozenset[str], frozenset[str], bool]:
    """``(numbers, date words, negated)`` of ``text``.

    negated: an odd count of negation cues, or a past-state cue ("no longer", "used to",
    "nicht mehr", "ne … plus"), from the multilingual table (:mod:`consolidation.cues`, via
    :func:`consolidation.text.parse`): "Jon no longer dances" beside "Jon dances" is the
    disagreement the reason names (not / never / no longer).
    """
    words = _words(text)
    # Atoms keep their unit ("june 3." is one date atom): shown without trailing punctuation.
    numbers = frozenset(t.rstrip(".,;:") for t in content_tokens(text) if is_number(t))
    dates = frozenset(w for w in words if w in _DATE_WORDS)
    parsed = parse(text)
    return numbers, dates, parsed.negations % 2 == 1 or bool(parsed.past_state)


def _nearness(value: float | None, threshold: float) -> float:
    """1 at the threshold (or below it), 0 at ``NEAR_MARGIN`` above, linear between."""
    if value is None:
        return 0.0
    return max(0.0, min(1.0, 1.0 - (float(value) - threshold) / NEAR_MARGIN))


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _disagreement(op: OperationText) -> list[tuple[str, bool]]:
    """Reasons the sources of a same-fact merge disagree (numbers, dates, negation), each with
    whether it is a contradiction the merged text would hold (one source negates another)."""
    cues = [_cues(s.document) for s in op.sources]
    out: list[tuple[str, bool]] = []
    numbers = [c[0] for c in cues if c[0]]
    if len(numbers) > 1 and len(set(numbers)) > 1:
        shown = " vs ".join(", ".join(sorted(n)) for n in dict.fromkeys(numbers))
        out.append((f"sources state different numbers ({shown})", False))
    dates = [c[1] for c in cues if c[1]]
    if len(dates) > 1 and len(set(dates)) > 1:
        shown = " vs ".join(", ".join(sorted(d)) for d in dict.fromkeys(dates))
        out.append((f"sources name different dates ({shown})", False))
    if len({c[2] for c in cues}) > 1:
        out.append(("one source negates another (not / never / no longer)", True))
    return out


def _never_accessed(meta: Mapping[str, object], fm: FieldMap) -> bool:
    return fm.get_access_count(meta) == 0 and fm.get_last_accessed_at(meta) is None


def operation_risk(
    op: OperationText,
    loss: OperationLoss,
    *,
    policy: Policy | None = None,
    fieldmap: FieldMap | None = None,
    recent: Mapping[str, str] | None = None,
) -> Risk:
    """The :class:`Risk` of ``op`` given its ``loss`` (:func:`~.lost.operation_loss`).

    ``policy`` gives the thresholds (``link_threshold``, ``contradiction_threshold``; default
    :class:`Policy`), ``fieldmap`` the metadata keys (access count, last access), ``recent``
    maps a memory id written by a recently applied pass to a short description of that pass
    (``"pass #12, 2 days ago"``). Pure; never raises on missing scores (the factor is skipped).
    """
    policy = policy or Policy()
    fm = fieldmap or FieldMap()
    factors: list[tuple[float, str]] = []
    scores = op.scores or {}
    if op.kind == "conflict":
        factors.append((1.0, "conflict: the sources disagree and the reviewer picks what stays"))
    near = 0.0
    if op.kind == "merge" and op.rule in _NEAR_RULES:
        cos = _number(scores.get("min_cosine"))
        # only a near-duplicate merge claims its sources state one fact; a semantic window
        # joins different facts of one session and speaker, so its cosine says nothing
        near = _nearness(cos, policy.link_threshold) if op.rule == "near_duplicate" else 0.0
        if near > 0 and cos is not None:
            factors.append(
                (
                    0.4 * near,
                    f"min cosine {cos:.3f} is within {NEAR_MARGIN:g} of the "
                    f"link threshold {policy.link_threshold:g}",
                )
            )
        # both values kept verbatim: the agent forgets nothing, the merged memory holds both;
        # but "X" beside "not X" in one text is a contradiction hidden in it, never lossless
        for why, contradiction in _disagreement(op):
            base = 0.35 if loss.sentences or contradiction else 0.2
            factors.append((base + 0.15 * near, why))
    elif op.kind == "reconcile":
        cos = _number(scores.get("cosine"))
        near = _nearness(cos, policy.contradiction_threshold)
        factors.append((0.3, f"supersedes an older memory ({op.rule.replace('_', ' ') or 'cue'})"))
        if near > 0 and cos is not None:
            factors.append(
                (
                    0.4 * near,
                    f"cosine {cos:.3f} is "
                    f"{'below' if cos < policy.contradiction_threshold else 'near'} "
                    "the contradiction threshold "
                    f"{policy.contradiction_threshold:g}",
                )
            )
    words, numbers = loss.content_words, loss.numbers
    uncovered = 1.0
    covered_note = ""
    if op.kind == "prune" and op.rule == "decay_covered":
        coverage = max(0.0, min(1.0, _number(scores.get("coverage")) or 0.0))
        uncovered = 1.0 - coverage
        covered_note = f" ({coverage:.0%} of them kept by its session)"
    if numbers:
        factors.append(
            (
                0.3 * uncovered,
                f"loses the number{'s' if len(numbers) > 1 else ''} "
                f"{', '.join(numbers[:5])}{covered_note}",
            )
        )
    if words:
        factors.append(
            (min(0.6, 0.12 * len(words)) * uncovered, _words_reason(loss) + covered_note)
        )
    elif loss.sentences:
        n = len(loss.sentences)
        factors.append(
            (
                min(0.12, 0.04 * n),
                f"drops {n} sentence{'s' if n > 1 else ''} whose content words the result keeps",
            )
        )
    if (
        op.kind == "prune"
        and op.rule not in ("decay_covered", "exact_copy", "library_copy")
        and any(_never_accessed(s.metadata, fm) for s in op.removed)
    ):
        factors.append((0.4, "pruned though never accessed, and no other memory covers it"))
    if op.kind == "distill":
        factors.append((0.2, "text written by an LLM: check it says what its sources say"))
    if op.kind == "summarize" and op.rule == "llm_summary":
        factors.append((0.2, "summary written by an LLM: check it says what its children say"))
    for s in op.sources:
        if recent and s.memory_id in recent:
            factors.append((0.25, f"{s.memory_id} was written by {recent[s.memory_id]}"))
            break
    keep = 1.0
    for w, _ in factors:
        keep *= 1.0 - max(0.0, min(1.0, w))
    ordered = sorted(factors, key=lambda f: -f[0])
    return Risk(round(1.0 - keep, 4), tuple(why for _, why in ordered))


def _shown(words: Sequence[str]) -> str:
    return ", ".join(words[:6]) + (" …" if len(words) > 6 else "")


def _words_reason(loss: OperationLoss) -> str:
    """The lost content words in words, each counted once over the pass: ``"loses 2 content
    words: Rome, 1999"``, then those counted under another operation that loses them too
    (``"; 3 more counted under #12: said, weather, lovely"``), so the operations' figures add
    up to the pass's distinct lost words."""
    counted = loss.counted_words
    n = len(counted)
    head = (
        f"loses {n} content word{'s' if n != 1 else ''}: {_shown(counted)}"
        if counted
        else "loses no content word of its own"
    )
    owners: dict[int, list[str]] = {}
    for w, owner in loss.shared:
        owners.setdefault(owner, []).append(w)
    tails = [
        f"{len(ws)} {'more ' if counted else ''}counted under #{owner}, which loses "
        f"{'them' if len(ws) > 1 else 'it'} too: {_shown(ws)}"
        for owner, ws in sorted(owners.items())
    ]
    return "; ".join([head, *tails])


def review_operations(
    ops: Sequence[OperationText],
    store: Iterable[tuple[str, str]],
    *,
    policy: Policy | None = None,
    fieldmap: FieldMap | None = None,
    recent: Mapping[str, str] | None = None,
    scope_of: Mapping[str, Hashable] | None = None,
) -> list[tuple[OperationLoss, Risk]]:
    """Loss (:func:`~.content.pass_losses`, against ``store`` = ``(id, document)`` of every
    memory before the pass, within each memory's scope when ``scope_of`` maps ids to scopes)
    and :func:`operation_risk` of every operation, in order."""
    losses = pass_losses(ops, store, scope_of=scope_of)
    return [
        (loss, operation_risk(op, loss, policy=policy, fieldmap=fieldmap, recent=recent))
        for op, loss in zip(ops, losses, strict=True)
    ]
