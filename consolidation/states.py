"""Statuses, as data: "Dark mode is off" / "Dark mode is on", "User is married" / "User is
divorced", "The build is passing" / "The build is failing".

Two texts that are the same but for one word of one *status group* (the values one status can
take: on / off, up / down, open / closed, married / divorced, done / pending …) say two values
of one single-valued attribute. Such words are often stopwords ("on", "off", "up", "in") or one
word among equals, so the texts looked like one fact ("lossless": every content word of one is
in the other — two opposite states merged into one text, the older kept) or like two facts
("one word differs: two values"), and nothing asked. :func:`status_change` finds the pair of
words; :func:`consolidation.judgment.judge_pair` treats it as a changed value: the newer wins
when the dates order two state statements, else it is asked.

One row per group: ``lang``, its ``words`` (folded, as written) and ``source`` (the English
Wiktionary entry that lists them as antonyms or as values of the status, ``wiktionary:<page>``).
A word may sit in several groups ("open": a door, a ticket). Words are compared on text folded
by :func:`consolidation.atoms.fold` and split on non-word characters, without stemming.

:func:`holds_more` is the update rule's guard for an older text that states several facts
("User is vegetarian and allergic to nuts" / "User is no longer vegetarian"): superseding it
would lose the facts the newer text does not restate, so the pair is asked.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from .changes import change_events
from .text import Parsed

__all__ = ["STATUS_GROUPS", "StatusGroup", "holds_more", "status_change", "widens"]


@dataclass(frozen=True)
class StatusGroup:
    """One status group (module docstring): ``lang``, ``words``, ``source``."""

    lang: str
    words: frozenset[str]
    source: str


def _g(lang: str, words: str, source: str) -> StatusGroup:
    return StatusGroup(lang, frozenset(words.split()), source)


STATUS_GROUPS: tuple[StatusGroup, ...] = (
    _g("en", "on off", "wiktionary:off"),
    _g("en", "up down", "wiktionary:down"),
    _g("en", "online offline", "wiktionary:offline"),
    _g("en", "open closed shut", "wiktionary:closed"),
    _g("en", "enabled disabled", "wiktionary:disabled"),
    _g("en", "active inactive", "wiktionary:inactive"),
    _g("en", "available unavailable", "wiktionary:unavailable"),
    _g("en", "locked unlocked", "wiktionary:unlocked"),
    _g("en", "public private", "wiktionary:private"),
    _g("en", "passing failing broken fixed green red", "wiktionary:failing"),
    _g("en", "done pending todo blocked finished started ongoing", "wiktionary:pending"),
    _g("en", "merged unmerged open closed draft", "wiktionary:merge"),
    _g("en", "married divorced single engaged widowed separated", "wiktionary:marital status"),
    _g("en", "employed unemployed retired", "wiktionary:unemployed"),
    _g("en", "sick ill healthy well", "wiktionary:healthy"),
    _g("en", "allowed forbidden banned permitted frozen", "wiktionary:forbidden"),
    _g("en", "paid unpaid overdue", "wiktionary:unpaid"),
    _g("en", "valid invalid expired", "wiktionary:expired"),
    _g("de", "an aus", "wiktionary:aus"),
    _g("de", "verheiratet geschieden ledig verlobt verwitwet", "wiktionary:ledig"),
    _g("de", "aktiviert deaktiviert", "wiktionary:deaktiviert"),
    _g("de", "offen geschlossen", "wiktionary:geschlossen"),
    _g("de", "erledigt offen ausstehend", "wiktionary:erledigt"),
    _g("fr", "activé désactivé", "wiktionary:désactivé"),
    _g("fr", "marié mariée divorcé divorcée célibataire", "wiktionary:célibataire"),
    _g("fr", "ouvert ouverte fermé fermée", "wiktionary:fermé"),
    _g("es", "activado desactivado", "wiktionary:desactivado"),
    _g("es", "casado casada divorciado divorciada soltero soltera", "wiktionary:soltero"),
    _g("es", "abierto abierta cerrado cerrada", "wiktionary:cerrado"),
)
"""The status table (module docstring)."""

_WORD_RE = re.compile(r"[^\W_]+(?:['’-][^\W_]+)*")


@lru_cache(maxsize=1)
def _groups_of() -> dict[str, tuple[int, ...]]:
    out: dict[str, list[int]] = {}
    for k, g in enumerate(STATUS_GROUPS):
        for w in g.words:
            out.setdefault(w, []).append(k)
    return {w: tuple(ks) for w, ks in out.items()}


def _words(folded: str) -> list[str]:
    return _WORD_RE.findall(folded)


def status_change(a_folded: str, b_folded: str) -> tuple[str, str] | None:
    """``(word of a, word of b)`` when the two folded texts are the same words but for one word
    each, and those two words are values of one status group (:data:`STATUS_GROUPS`); else
    ``None``. ``"dark mode is off"`` / ``"dark mode is on"`` → ``("off", "on")``."""
    wa, wb = _words(a_folded), _words(b_folded)
    if len(wa) != len(wb) or not wa:
        return None
    diff = [(x, y) for x, y in zip(wa, wb, strict=True) if x != y]
    if len(diff) != 1:
        return None
    (x, y), groups = diff[0], _groups_of()
    if set(groups.get(x, ())) & set(groups.get(y, ())):
        return x, y
    return None


_JOIN_RE = re.compile(r"\band\b|\bund\b|\bet\b|\by\b|[,;、，；]")


def holds_more(
    older_folded: str, newer_folded: str, older_tokens: set[str], newer_tokens: set[str]
) -> bool:
    """Whether an older text states more than the update replaces: it joins clauses or list
    items ("and", a comma …) where the newer joins none, and keeps two or more content tokens
    the newer text does not name ("vegetarian and allergic to nuts" / "no longer vegetarian":
    allergic, nut). Superseding it would lose them, so the update rule asks instead. A newer
    text that joins items too replaces the list ("SQLAlchemy and Alembic" / "switched to
    Tortoise and Aerich")."""
    if not _JOIN_RE.search(older_folded) or _JOIN_RE.search(newer_folded):
        return False
    return len(older_tokens - newer_tokens) >= 2


def widens(pa: Parsed, pb: Parsed, extra: set[str]) -> bool:
    """Whether the words only one of two texts has (``extra``) change what the other says, so
    covering it is no proof of one fact: a number or a date ("free to use" / "free to use for
    the first 1000 calls"), or a change event only one holds ("has a dentist appointment on May
    3" / "cancelled the dentist appointment on May 3")."""
    if any(pa.kinds.get(t) or pb.kinds.get(t) for t in extra):
        return True
    return bool(change_events(pa.folded)) != bool(change_events(pb.folded))
