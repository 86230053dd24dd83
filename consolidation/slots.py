"""One slot, two values: settled by the rules when they are sure, else asked.

Two memories of one scope that share a frame (:func:`consolidation.frames.frame_diff`: the same
subject and attribute words, one short span differs) hold two values of one *slot*.
:func:`slot_ruling` says what happens to them:

- a different **name** for the same role ("Alice's brother is named Jon" / "… John", "Bob's
  manager is Carol" / "… now Dave", "Use Jina" / "Use Exa") is always a ``"conflict"``: a
  spelling fix and a new person look alike, and only a person can tell them apart. A place or
  an employer is not a name for a role: a frame with a place attribute (:data:`PLACE_RE`:
  "lives in", "works at", "moved to" …) is judged as a word;
- any other value (a word, a number with the same unit or label, a version, the order of two
  items) is ``"supersedes"`` — the newer kept — when the dates (``updated_at``, else
  ``created_at``) order the pair **and** the newer text carries a change marker (an update
  marker, :data:`consolidation.qualifiers.UPDATE_MARKERS`, or a change event,
  :data:`consolidation.changes.CHANGE_EVENTS`) or the attribute is single-valued by the table
  (:data:`consolidation.text.SINGLE_VALUED_RE`);
- otherwise a ``"conflict"``: which value holds, or whether both do ("likes jazz" / "likes
  rock"), is a question for a person (or the LLM judge when the agent has one). A standing
  decision answers it once (:mod:`consolidation.decisions`).

Events and readings (a past-tense statement, a date: "went to Paris" / "went to Rome") are two
events, never one slot: :func:`slot_ruling` returns ``None`` for them, as for dialog turns
(episodic memories) and questions, which record what was said.
"""

from __future__ import annotations

import re

from .changes import change_events
from .frames import FrameDiff
from .qualifiers import update_markers
from .text import SINGLE_VALUED_RE, Parsed

__all__ = ["NAME_RULE", "PLACE_RE", "Ruling", "slot_ruling"]

NAME_RULE = "changed_name"
"""The cue (and the conflict item's rule) of a changed name: asked of a person, never of the
LLM judge (:func:`consolidation.llm_judge.unsure_pairs`)."""

PLACE_RE = re.compile(
    r"\b(?:liv(?:e|es|ed|ing) in|mov(?:e|es|ed|ing) to|relocat\w* to|based in|located in"
    r"|born in|is from|comes? from|grew up in|work(?:s|ed|ing)? (?:at|for)|stud(?:y|ies|ied"
    r"|ying) at|headquarter\w*(?: is| are)? in|wohnt in|lebt in|arbeitet bei|habite à"
    r"|vit à|travaille (?:à|chez)|vive en|trabaja en)\b"
)
"""Attributes whose capitalised value is a place or an employer, not a name for a role
(hand-picked from the single-valued table and its de/fr/es equivalents)."""

Ruling = tuple[str, "int | None", "str | None", tuple[str, ...]]
"""``(kind, newer, cue, reasons)``: ``kind`` ``"supersedes"`` or ``"conflict"``, ``newer`` the
index (0/1) of the memory kept when superseding."""

_CUES = {
    "word": "changed_value",
    "number": "changed_number",
    "version": "changed_version",
    "order": "changed_order",
    "name": NAME_RULE,
}


def _marked(p: Parsed) -> bool:
    return bool(update_markers(p.folded) or change_events(p.folded))


def _before_place(p: Parsed, toks: tuple[str, ...]) -> bool:
    """Whether a token of ``toks`` comes before a place attribute of ``p`` (:data:`PLACE_RE`):
    the subject ("sister Anna lives in …"), not the value of "lives in", "works at"."""
    m = PLACE_RE.search(p.folded)
    return m is not None and any(0 <= p.folded.find(t) < m.start() for t in toks)


def slot_ruling(
    diff: FrameDiff, pa: Parsed, pb: Parsed, newer: int | None, *, events: bool
) -> Ruling | None:
    """What to do with two values of one slot (module docstring). ``diff`` comes from
    :func:`consolidation.frames.frame_diff` of the texts parsed as ``pa`` and ``pb``;
    ``newer`` is 0 or 1 when the dates order them, else ``None``; ``events`` is True when
    either text is an event or a reading (then ``None``: two events). Never raises."""
    if events:
        return None
    kind = diff.kind
    place = PLACE_RE.search(pa.folded) or PLACE_RE.search(pb.folded)
    if (
        kind == "name"
        and place
        and not (_before_place(pa, diff.old) or _before_place(pb, diff.new))
    ):
        kind = "word"  # "lives in Paris" / "… Berlin"; "sister Anna lives in …" stays a name
    cue = _CUES[kind]
    what = f"one frame ({', '.join(sorted(diff.frame))}), another {kind}: {diff.shown()}"
    if kind == "name":
        return (
            "conflict",
            None,
            cue,
            (what, "a different name for the same role is always asked, never reconciled"),
        )
    if newer is None:
        return "conflict", None, cue, (what, "which one is newer is unknown")
    pn = pa if newer == 0 else pb
    single = SINGLE_VALUED_RE.search(pa.folded) and SINGLE_VALUED_RE.search(pb.folded)
    if _marked(pn) or single:
        why = "the newer text says it changed" if _marked(pn) else "the attribute holds one value"
        side = "first" if newer == 0 else "second"
        return "supersedes", newer, cue, (what, f"{why}: the newer one ({side}) replaces the older")
    return (
        "conflict",
        None,
        cue,
        (what, "no change marker and the attribute may hold several values: which holds is asked"),
    )
