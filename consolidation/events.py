"""Events that end or change a state: what "Bob moved to Berlin" does to "Bob lives in Paris".

A text that reports a change (a row of :data:`consolidation.changes.CHANGE_EVENTS`: moved,
switched, broke up, quit, left, started, joined, upgraded, extended, cancelled, landed … in en
de fr es ja zh) and an older *state* memory of the same scope are linked when the state names
an attribute the event changes (the row's ``attributes``: "lives" for "moved", "partner" for
"broke up", "until" for "landed") or the two share a content word outside their subjects (the
object: "Sarah", "security review"; not for a ``strict`` row such as "left"). Then
:func:`event_ruling` says:

- **agreement** — the state's value is what a change or a beginning leads to ("Bob lives in
  Paris" / "Bob moved from Lyon to Paris"): ``"distinct"``, both kept, nothing asked; an
  ending that names the value ("broke up with Sarah") is no agreement;
- the event states a **new value** (a content word the state lacks, other than the event's
  own words, time words and the value it moved *from*): ``"supersedes"`` when the event is the
  newer memory ("User prefers React" / "User switched to Svelte", "Wohnt in Bern" / "Ist nach
  Zürich gezogen") and the state says little else (its words the event lacks are at most one
  value span, :data:`consolidation.frames.MAX_SPAN`: a stack of six tools is not replaced by a
  note that one of them changed — asked when the event names the value it changes *from*,
  else the two are about different things), else ``"conflict"``;
- **no new value** ("Partner is Sarah" / "Broke up with Sarah last month"): ``"conflict"`` —
  the state ended, but what holds now is a question for a person; a ``"begin"`` row without
  the state's attribute ("started painting" / "likes painting") changes nothing (``None``).

Both texts reporting a change, neither, a state that is itself an event, or two subjects:
``None`` (the other rules judge the pair). A leading verb is never the subject ("Switched to
Tortoise ORM …" is subjectless, :func:`consolidation.text.subject_of`).
"""

from __future__ import annotations

import re

from .changes import ChangeRow, change_events, from_span
from .cues import DEADLINE_RE
from .frames import MAX_SPAN
from .slots import Ruling
from .text import Parsed, opening_words, parse, subject_of

__all__ = ["FUNCTION_WORDS", "TIME_WORDS", "event_ruling", "names_attribute"]

_TIME_TEXT = """last month week year day days weeks months years ago yesterday recently today
    tonight weekend monat woche jahr gestern letzte letzten letzter vor mois semaine année an hier
    dernier dernière mes semana año ayer pasado pasada
    先月 先週 昨日 去年 上个月 上周 昨天 上個月"""
TIME_WORDS = frozenset(_TIME_TEXT.split())
"""Words that date an event ("last month", "letzte Woche"): not a new value of the state."""


def _words(rows: tuple[ChangeRow, ...], attr: bool) -> set[str]:
    out: set[str] = set()
    for r in rows:
        for w in r.attributes if attr else (r.phrase,):
            out.update(parse(w).tokens)
    return out


def names_attribute(folded: str, rows: tuple[ChangeRow, ...]) -> bool:
    """True when ``folded`` text names an attribute that one of the change-event ``rows``
    changes ("wohnt" for "gezogen")."""
    for r in rows:
        for w in r.attributes:
            if w.isascii() or " " in folded:
                if re.search(rf"(?<!\w){re.escape(w)}(?!\w)", folded):
                    return True
            elif w in folded:
                return True
    return False


_FUNCTION_TEXT = """a à al au aux avec con de del des du el en es est et ist la las le les los
    mit por pour que sich sind und un una une uno von y zu zum zur hat haben ha han der die das
    den dem des ein eine einen einem einer"""
FUNCTION_WORDS = frozenset(_FUNCTION_TEXT.split())
"""German, French and Spanish function words ("avec Sarah", "con Sarah"): never a new value
(English ones are stopwords already; hand-picked, a missing one can only make an ending look
like a change, which is then decided by the dates)."""


def _new_value(cand: set[str], ps: Parsed, pe: Parsed, rows: tuple[ChangeRow, ...]) -> set[str]:
    """The event's words that state a new value: not a time word, an atom (but a date when the
    state is one with a deadline, :data:`consolidation.cues.DEADLINE_RE`) or a function word,
    and — for character bigrams — sharing no character with the state or the event phrase
    (bigrams across a shared name, "サラと", are no value)."""
    old_chars = set(ps.folded) | {c for r in rows for c in r.phrase}
    deadline = DEADLINE_RE.search(ps.folded) is not None  # "valid until March 3": a date is
    out = set()  # the value ("extended to April 30")
    for t in cand - TIME_WORDS - FUNCTION_WORDS:
        if t in pe.kinds and not (deadline and pe.kinds[t] == "date"):
            continue
        if len(t) == 2 and not t.isascii() and set(t) & old_chars:
            continue
        out.add(t)
    return out


_DESTINATION_RE = re.compile(
    r"(?<!\w)(?:to|into|nach|zu|à|au|aux|vers|hacia)(?!\w)|(?:ó|ado) a(?!\w)|に|へ|到|成|改用"
)
"""Where a change leads: "to", "nach", "à", Spanish "a" after a past verb ("se mudó a"), "に",
"到" … (English "a" is an article: "switched careers a year ago" names no destination)."""


def _linked(rows: tuple[ChangeRow, ...], ps: Parsed, pe: Parsed, shared: bool) -> bool:
    """Whether the event (``pe``) is about the state (``ps``): a ``"change"`` row by the
    attribute it changes when the event names a destination ("switched *to* Svelte", "nach
    Zürich gezogen", "搬到上海"), or by a shared object word; a ``strict`` row by both (or, a
    ``"change"`` one, by the attribute both texts name and a destination: "extended to"); an
    ``"end"`` row by a shared object word ("broke up with *Sarah*": "quit smoking" does not
    end "works at Google"); a ``"begin"`` row only when both texts name its attribute
    ("started a new *job*" / "*works* at …")."""
    for r in rows:
        attr = names_attribute(ps.folded, (r,))
        if r.strict:  # "left": only a state of its attribute that it names ("left Google")
            if attr and shared:
                return True
            # "extended": a change naming the attribute on both sides and where it leads
            # ("valid until March 3" / "validity extended to April 30")
            both = attr and names_attribute(pe.folded, (r,))
            if both and r.kind == "change" and _DESTINATION_RE.search(pe.folded):
                return True
            continue
        if r.kind == "change" and (
            (attr and _DESTINATION_RE.search(pe.folded)) or (shared and not r.strict)
        ):
            return True
        if r.kind == "end" and shared:
            return True
        if r.kind == "begin" and attr and names_attribute(pe.folded, (r,)):
            return True
    return False


def event_ruling(
    a: str, b: str, pa: Parsed, pb: Parsed, newer: int | None, *, kinds: tuple[str, str]
) -> Ruling | None:
    """The event rule for texts ``a`` and ``b`` (parsed as ``pa``, ``pb``; ``kinds`` their
    :func:`consolidation.judgment.statement_kind`; ``newer`` 0/1 when the dates order them):
    a :data:`consolidation.slots.Ruling` whose kind is ``"distinct"`` (agreement),
    ``"supersedes"`` or ``"conflict"``, or ``None`` when the rule does not apply (module
    docstring). Never raises."""
    ea, eb = change_events(pa.folded), change_events(pb.folded)
    if bool(ea) == bool(eb):
        return None
    e = 0 if ea else 1
    rows = ea or eb
    (ts, ps, st), (te, pe, et) = (
        ((b, pb, kinds[1]), (a, pa, kinds[0])) if e == 0 else ((a, pa, kinds[0]), (b, pb, kinds[1]))
    )
    if st == "event":
        return None  # two events: both happened
    subj_s, subj_e = subject_of(ts), subject_of(te)
    if subj_s and subj_e and subj_s != subj_e:
        return None
    tok_s, tok_e = set(ps.tokens), set(pe.tokens)
    verbs, attrs = _words(rows, attr=False), _words(rows, attr=True)
    was = set(parse(from_span(pe.folded)).tokens) if from_span(pe.folded) else set()
    own, common = opening_words(ts), opening_words(ts) & opening_words(te)
    value = tok_s - own - attrs - verbs
    # "broke up with Sarah" names what ended; "no longer lives in Paris; moved to …" too
    ends = all(r.kind == "end" for r in rows) or pe.negations or pe.past_state
    if value and value <= tok_e and not value & was and not ends:
        return (
            "distinct",
            None,
            None,
            (f"the event agrees with the state ({', '.join(sorted(value))}): both kept",),
        )
    if was and not was & tok_s:
        return None  # "moved from Lisbon to Porto" changes only a state that names Lisbon
    shared = (tok_s & tok_e) - common - verbs - attrs  # the object, not the common subject
    if not _linked(rows, ps, pe, bool(shared)):
        return None
    by_attr = not shared
    new = _new_value(tok_e - tok_s - verbs - attrs - was - common, ps, pe, rows)
    phrase = ", ".join(r.phrase for r in rows)
    link = "the state's attribute" if by_attr else f"the object ({', '.join(sorted(shared))})"
    what = f"a change event ({phrase}) names {link} of the other memory"
    if not new:
        if all(r.kind == "begin" for r in rows):
            return None
        return "conflict", None, "event", (what, "it ends the state but names no new value")
    rest = tok_s - tok_e - attrs - verbs - own - was  # what the older text says besides its value
    if len(rest) > (MAX_SPAN + 2 if any(not t.isascii() for t in rest) else MAX_SPAN):
        if not was & tok_s:
            return None  # the state says much else and the event names none of its values
        why = f"the older memory says more than the event replaces ({', '.join(sorted(rest))})"
        return "conflict", None, "event", (what, why)
    if newer == e:
        side = "first" if e == 0 else "second"
        return (
            "supersedes",
            e,
            "event",
            (what, f"and a new value ({', '.join(sorted(new))}): the newer one ({side}) wins"),
        )
    why = "which one is newer is unknown" if newer is None else "the event is the older memory"
    return "conflict", None, "event", (what, why)
