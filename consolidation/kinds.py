"""Statement kinds: is a memory text a *state* ("lives in Paris", "is married"), an *event* or
reading ("went to Paris", "paid 30 on Monday", a date), or unknown?

The judgment rules (:mod:`consolidation.judgment`) supersede only a state by a state; an event or
a reading is never superseded (two events both happened). Heuristics, documented here: the
event and state markers per language (:data:`consolidation.cues.EVENT_MARKERS`,
:data:`~consolidation.cues.STATE_MARKERS`), English ``-ed`` verbs that are adjectives, and the
deadline of a state (:data:`~consolidation.cues.DEADLINE_RE`).
"""

from __future__ import annotations

import re
from functools import lru_cache

from .cues import DEADLINE_RE, EVENT_MARKERS, STATE_MARKERS
from .text import Parsed, parse

__all__ = ["kind_of", "statement_kind", "verb_token"]


_EVENT_RE = re.compile("|".join(f"(?:{rx})" for rx in EVENT_MARKERS.values()))


_STATE_RE = re.compile("|".join(f"(?:{rx})" for rx in STATE_MARKERS.values()))


_ADJ_ED_TEXT = """need speed seed feed bleed breed indeed red bed shed wed fed led hundred kindred
    sacred naked wicked beloved aged ashamed tired interested married based located named called
    used supposed excited retired skilled talented experienced qualified committed dedicated related
    advanced limited detailed complicated organized organised motivated licensed certified
    reserved scared worried bored pleased surprised concerned"""


_ADJ_ED = frozenset(_ADJ_ED_TEXT.split())
"""English words ending in -ed that are adjectives or not verbs ("married", "based")."""


_LINKING_TEXT = (
    "is are am was were be been being get gets got feel feels seem seems become "
    "becomes very so too not remain remains stay stays look looks"
)


_LINKING = frozenset(_LINKING_TEXT.split())


_ED_RE = re.compile(r"\b([a-z]{2,}ed)\b")


def _english_past(rest: str) -> bool:
    words = rest.split()
    for i, w in enumerate(words):
        if _ED_RE.fullmatch(w) and w not in _ADJ_ED and (i == 0 or words[i - 1] not in _LINKING):
            return True
    return False


def verb_token(tok: str, p: Parsed) -> bool:
    """True when the content token ``tok`` of ``p`` comes from a verb (a state or event
    marker, or an English ``-ed`` verb): "went", "attend(ed)", "prefer(s)"."""
    for w in p.rest.split():
        w = w.strip(".,;:!?")
        if w.startswith(tok) and (
            _EVENT_RE.fullmatch(w) or _STATE_RE.fullmatch(w) or _english_past(w)
        ):
            return True
    return False


def statement_kind(text: str, parsed: Parsed | None = None) -> str:
    """``"event"``, ``"state"`` or ``"unknown"`` for one memory text.

    An *event* (or a reading) has a date or time (not a deadline of a present state:
    :data:`consolidation.cues.DEADLINE_RE`), or a past-tense / perfect marker
    (:data:`consolidation.cues.EVENT_MARKERS`, English ``-ed`` verbs not used as adjectives);
    a *state* has a past-state cue ("used to" …) or a present copula, possession or habitual
    verb (:data:`consolidation.cues.STATE_MARKERS`) and no event marker. Anything else is
    unknown — and an unknown statement is never superseded.
    """
    p = parsed or parse(text)
    if "date" in p.kinds.values() and not DEADLINE_RE.search(p.folded):
        return "event"  # a date, unless it says until when a state holds
    if _EVENT_RE.search(p.rest) or _english_past(p.rest):
        return "event"
    if p.past_state or _STATE_RE.search(p.rest):
        return "state"
    return "unknown"


@lru_cache(maxsize=16384)
def kind_of(text: str) -> str:
    """:func:`statement_kind` once per text (every rule is handed ``parse(text)`` with it)."""
    return statement_kind(text)
