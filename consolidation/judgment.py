"""Pair judgment: may two memories be merged, does one replace the other, or must a person decide?

**Unsure means keep both and ask**. :func:`judge_pair` is the one place that decides
what the planner may do with two memories; every stage that would merge, fold, window or
reconcile a pair asks it first. Verdicts:

- ``"same"``: the texts state the same fact; they may be merged. Needs positive evidence (the
  same text after :func:`~consolidation.text.normalize_text`, or cosine ≥ the policy's
  ``link_threshold`` with shared content words) and no difference in a fact atom, a negation or
  past-state cue, a single-valued attribute's value or a proper name.
- ``"supersedes"``: both are *state* statements about the same subject and attribute, the only
  difference is the changed value, number, negation or past-state cue, and their recency
  (``updated_at``, else ``created_at``) orders them; the newer one (``newer``) is kept.
- ``"conflict"``: a contradiction the engine cannot settle (unknown or equal recency, not
  clearly states, or the wording differs as well); a person decides.
- ``"distinct"``: different facts (different scope, an empty text, a different identifier or
  date — two events or readings —, a different symbol or emoji, another subject, an event
  that agrees with a state, or simply not similar enough); both are kept and nothing links
  them.

What the cue rules leave as two facts or one is then judged as a category retraction (asked:
:mod:`consolidation.categories`), a slot (:mod:`consolidation.slots`) and an event
(:mod:`consolidation.events`): reconciled or asked; a changed name always asked.

Heuristics (documented where they live): the cue, change-event and category tables, the place
attributes (:data:`consolidation.slots.PLACE_RE`), the state and event markers, the stemmer,
stopwords, synonyms and single-valued attributes (:mod:`consolidation.text`), the bare-year rule.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from difflib import SequenceMatcher
from functools import lru_cache
from typing import Any

from .categories import category_ruling
from .changes import change_events
from .cues import DEADLINE_RE, EVENT_MARKERS, POLAR_EMOJI, STATE_MARKERS
from .events import event_ruling
from .frames import frame_diff
from .policy import Policy
from .qualifiers import qualifiers, update_markers
from .records import FieldMap
from .slots import NAME_RULE, slot_ruling
from .text import (
    SINGLE_VALUED_RE,
    Parsed,
    compare,
    normalize_text,
    opening_words,
    parse,
    proper_names,
    subject_of,
    subject_phrase,
)
from .verbatim import verbatim_difference

__all__ = [
    "CONFLICT",
    "DISTINCT",
    "SAME",
    "SUPERSEDES",
    "PairVerdict",
    "judge_pair",
    "statement_kind",
]

SAME, SUPERSEDES, CONFLICT, DISTINCT = "same", "supersedes", "conflict", "distinct"

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
_POLAR = dict(POLAR_EMOJI) | {b: a for a, b in POLAR_EMOJI}


def _english_past(rest: str) -> bool:
    words = rest.split()
    for i, w in enumerate(words):
        if _ED_RE.fullmatch(w) and w not in _ADJ_ED and (i == 0 or words[i - 1] not in _LINKING):
            return True
    return False


def _verb_token(tok: str, p: Parsed) -> bool:
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
def _kind_of(text: str) -> str:
    """:func:`statement_kind` once per text (every rule is handed ``parse(text)`` with it)."""
    return statement_kind(text)


@dataclass(frozen=True)
class PairVerdict:
    """What the planner may do with a pair (module docstring).

    ``kind``: ``"same"``, ``"supersedes"``, ``"conflict"`` or ``"distinct"``; ``newer``: 0 or 1,
    the index of the memory to keep when ``kind == "supersedes"`` (else ``None``); ``cue``: the
    contradiction cue's kind (``"negation"``, ``"past_state"``, ``"changed_number"``,
    ``"changed_value"``, ``"polarity"``, ``"tense"``; for a ``"distinct"`` pair also
    ``"role_swap"`` or ``"different_subject"``; ``"update"`` for a pair settled by the update
    rule) or ``None``; ``reasons``: short sentences for a reviewer; ``lossless``: a ``"same"``
    pair one of whose texts covers every content word of the other (it may merge at any cosine
    a candidate channel offers, keeping the covering text).
    """

    kind: str
    newer: int | None = None
    cue: str | None = None
    reasons: tuple[str, ...] = ()
    lossless: bool = False

    @property
    def may_merge(self) -> bool:
        """True only for ``"same"``."""
        return self.kind == SAME


def _distinct(*reasons: str) -> PairVerdict:
    return PairVerdict(DISTINCT, None, None, tuple(reasons))


_TENSE_PRESENT = frozenset({"is", "are", "am", "has", "have", "does", "do"})
_TENSE_PAST = frozenset({"was", "were", "had", "did"})


def _tense(p: Parsed) -> str | None:
    words = set(p.rest.split())
    now, past = bool(words & _TENSE_PRESENT), bool(words & _TENSE_PAST)
    return None if now == past else ("present" if now else "past")


def _atom_difference(pa: Parsed, pb: Parsed) -> PairVerdict | str | None:
    """A verdict when a fact atom was *replaced*, ``"polarity"`` for opposite emoji, else None.

    The two token sequences (stopwords included) are aligned (:class:`difflib.SequenceMatcher`);
    an atom inside a replaced span that the other text does not contain anywhere was changed
    ("C++" → "C", "#260" → "#480", "A+" → "A"). An atom only added by one text is more detail
    ("2 cats" / "2 cats and 1 dog"), and an atom that moved is not a change.
    """
    in_a, in_b = set(pa.raw), set(pb.raw)
    changed_a: set[str] = set()
    changed_b: set[str] = set()
    matcher = SequenceMatcher(a=pa.raw, b=pb.raw, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "replace":
            changed_a |= {t for t in pa.raw[i1:i2] if t in pa.kinds and t not in in_b}
            changed_b |= {t for t in pb.raw[j1:j2] if t in pb.kinds and t not in in_a}
    emoji_a = {t for t in in_a - in_b if pa.kinds.get(t) == "emoji"}
    emoji_b = {t for t in in_b - in_a if pb.kinds.get(t) == "emoji"}
    if any(_POLAR.get(t) in emoji_b for t in emoji_a):
        return "polarity"
    kinds = {pa.kinds[t] for t in changed_a} | {pb.kinds[t] for t in changed_b}
    shown = f"{', '.join(sorted(changed_a)) or '—'} vs {', '.join(sorted(changed_b)) or '—'}"
    if kinds & {"id", "date"}:
        return _distinct(f"different identifier or date ({shown}): two events or readings")
    if kinds & {"symbol", "emoji"}:
        return _distinct(f"different symbol or emoji ({shown})")
    return None


def _recency(a_meta: Mapping[str, Any], b_meta: Mapping[str, Any], fm: FieldMap) -> int | None:
    ra, rb = fm.get_recency(a_meta), fm.get_recency(b_meta)
    if ra is None or rb is None or ra == rb:
        return None
    return 0 if ra > rb else 1


def judge_pair(
    a_text: str,
    a_meta: Mapping[str, Any],
    b_text: str,
    b_meta: Mapping[str, Any],
    *,
    cosine: float | None,
    fieldmap: FieldMap | None = None,
    policy: Policy | None = None,
) -> PairVerdict:
    """Judge two memories (texts and metadata); pure and deterministic.

    ``cosine`` is the pair's cosine similarity of the engine's own embeddings in [-1, 1] (or
    ``None`` when not computed: then only identical texts can be ``"same"``). ``fieldmap``
    names the scope and time keys (default :class:`FieldMap`); ``policy`` gives
    ``link_threshold``: positive evidence for ``"same"``, and how similar a pair with a
    contradiction cue *and* other wording differences must be to be raised as a
    ``"conflict"`` (it would otherwise be a merge candidate) rather than left ``"distinct"``.
    No threshold can turn a pair with a contradiction cue or a replaced fact atom into
    ``"same"``. Never raises.
    """
    fm = fieldmap or FieldMap()
    pol = policy or Policy()
    sa, sb = fm.scope_key(a_meta), fm.scope_key(b_meta)
    if sa != sb:
        return _distinct(
            f"different scope ({', '.join(sa) or 'none'} vs "
            f"{', '.join(sb) or 'none'}): never compared"
        )
    if not a_text.strip() or not b_text.strip():
        return _distinct("an empty text is never a duplicate of anything")
    if normalize_text(a_text) == normalize_text(b_text):
        return PairVerdict(
            SAME, None, None, ("the same text after NFKC, case folding and whitespace collapsing",)
        )
    pa, pb = parse(a_text), parse(b_text)
    v = _cue_rules(a_text, b_text, pa, pb, a_meta, b_meta, cosine, fm, pol)
    return _slots_and_events(v, a_text, b_text, pa, pb, a_meta, b_meta, fm)


def _cue_rules(
    a_text: str,
    b_text: str,
    pa: Parsed,
    pb: Parsed,
    a_meta: Mapping[str, Any],
    b_meta: Mapping[str, Any],
    cosine: float | None,
    fm: FieldMap,
    pol: Policy,
) -> PairVerdict:
    """The atom, cue and update rules (:func:`judge_pair` before slots and events)."""
    atom = _atom_difference(pa, pb)
    if isinstance(atom, PairVerdict):
        # two readings or events (an id or a date replaced), or a changed symbol: distinct —
        # unless a text says it replaces the other ("upgraded to v1.3", "moved to #ops")
        upd = _update(a_text, b_text, pa, pb, a_meta, b_meta, fm, markers_only=True)
        return upd or atom
    cue = compare(a_text, b_text, pa, pb)
    if cue is not None and cue.kind in ("role_swap", "different_subject"):
        # Two facts about different people (or who did what to whom): both kept, and the cue
        # is named so no fold or window puts them together either.
        return PairVerdict(
            DISTINCT, None, cue.kind, (f"{cue.kind.replace('_', ' ')}: {cue.detail}",)
        )
    v = _rules(a_text, b_text, pa, pb, atom, cue, a_meta, b_meta, cosine, fm, pol)
    if v.kind == SUPERSEDES:
        return v
    upd = _update(a_text, b_text, pa, pb, a_meta, b_meta, fm)
    if upd is not None and (v.kind != CONFLICT or upd.kind == SUPERSEDES):
        return upd
    if v.kind == CONFLICT:
        return v
    if v.kind == SAME:
        return _vetoes(v, a_text, b_text, pa, pb)
    return v


_KEPT_APART = frozenset({"role_swap", "different_subject"})


def _slots_and_events(
    v: PairVerdict,
    a: str,
    b: str,
    pa: Parsed,
    pb: Parsed,
    a_meta: Mapping[str, Any],
    b_meta: Mapping[str, Any],
    fm: FieldMap,
) -> PairVerdict:
    """Unsure means ask: what the cue rules left as two facts or one is judged as an event
    (:mod:`consolidation.events`) and as a slot (:mod:`consolidation.slots`)."""
    said = _episodic(a_meta, fm) or _episodic(b_meta, fm) or _question(a) or _question(b)
    if v.cue in _KEPT_APART or said:  # a dialog turn or a question records what was said
        return v
    kinds = (_kind_of(a), _kind_of(b))
    if v.kind == DISTINCT and (cat := category_ruling(a, b, pa, pb, kinds=kinds)) is not None:
        return PairVerdict(*cat)  # "no longer eats any fruit" / "likes apples": asked
    event, diff = bool(change_events(pa.folded)) != bool(change_events(pb.folded)), None
    if not event and (diff := frame_diff(a, b, pa, pb)) is None:
        return v  # most pairs: per-text features and one set difference
    newer = _recency(a_meta, b_meta, fm)
    ev = event_ruling(a, b, pa, pb, newer, kinds=kinds) if event else None
    if ev is not None and (ev[0] == DISTINCT or v.kind in (DISTINCT, SAME)):
        return PairVerdict(*ev)
    if event and (diff := frame_diff(a, b, pa, pb)) is None:
        return v
    r = None if diff is None else slot_ruling(diff, pa, pb, newer, events="event" in kinds)
    if r is None or (v.kind in (SUPERSEDES, CONFLICT) and r[2] != NAME_RULE):
        return v  # the cue and update rules settled or asked it already; a name is re-asked
    return PairVerdict(*r)


def _rules(
    a_text: str,
    b_text: str,
    pa: Parsed,
    pb: Parsed,
    atom: str | None,
    cue: Any,
    a_meta: Mapping[str, Any],
    b_meta: Mapping[str, Any],
    cosine: float | None,
    fm: FieldMap,
    pol: Policy,
) -> PairVerdict:
    """The cue rules: a contradiction cue (:func:`_contradiction`) or none (:func:`_no_cue`)."""
    clean = cue.unambiguous if cue is not None else False
    kind = cue.kind if cue is not None else None
    detail = cue.detail if cue is not None else ""
    if atom == "polarity":
        kind, detail = "polarity", "opposite emoji (👍/👎, ✅/❌ …)"
        clean = set(pa.tokens) - set(pb.tokens) <= {t for t in pa.kinds if pa.kinds[t] == "emoji"}
    elif kind is None and set(pa.tokens) == set(pb.tokens):
        ta, tb = _tense(pa), _tense(pb)
        if ta and tb and ta != tb:
            kind, clean, detail = "tense", False, f"one text is in the {ta}, the other in the {tb}"
    if kind is None:
        return _no_cue(a_text, b_text, pa, pb, cosine, pol)
    return _contradiction(
        kind, clean, detail, a_text, b_text, pa, pb, a_meta, b_meta, cosine, fm, pol
    )


def _no_cue(
    a: str, b: str, pa: Parsed, pb: Parsed, cosine: float | None, pol: Policy
) -> PairVerdict:
    """No contradiction cue: ``"same"`` on positive evidence, else ``"distinct"``."""
    ta, tb = set(pa.tokens), set(pb.tokens)
    da, db = ta - tb, tb - ta
    if (pa.negations % 2) != (pb.negations % 2) or bool(pa.past_state) != bool(pb.past_state):
        return _distinct("a negation or past-state cue differs and so does the wording")
    if pa.numbers - pb.numbers and pb.numbers - pa.numbers:
        return _distinct("different numbers and different wording")
    if len(da) == 1 and len(db) == 1 and len(ta) == len(tb):
        (wa,), (wb,) = da, db
        if not (_verb_token(wa, pa) and _verb_token(wb, pb)):
            # One word swapped for another that is no synonym: "dark roast" / "light roast"
            # are two values — never merged (netclaw-dev/netclaw#1241); the slot rule then
            # reconciles or asks. Two verbs are a paraphrase of one event ("went to" /
            # "attended").
            return _distinct(f"one word differs ({wa} vs {wb}): two values, not one fact")
    if {_kind_of(a), _kind_of(b)} == {"state", "event"}:
        # "User owns a Tesla" / "User sold the Tesla" (getzep/graphiti#1666): a state and an
        # event that changed it are two facts, however similar the words.
        return _distinct("one text states a fact, the other reports an event")
    names_a, names_b = proper_names(a), proper_names(b)
    if da & names_a and db & names_b:
        return _distinct(
            f"a different name ({', '.join(sorted(da & names_a))} vs "
            f"{', '.join(sorted(db & names_b))})"
        )
    if cosine is not None and ta & tb and (not da or not db):
        # One text's content words are all in the other (after stemming and the alias table):
        # a lossless duplicate, merged at any cosine a channel offers, the covering text kept.
        return PairVerdict(
            SAME,
            None,
            None,
            (f"lossless: every content word of one text is in the other (cosine {cosine:.3f})",),
            lossless=True,
        )
    if cosine is None or cosine < pol.link_threshold:
        return _distinct("not similar enough to be the same fact")
    if not ta & tb:
        return _distinct("no content word in common")
    return PairVerdict(
        SAME,
        None,
        None,
        (f"cosine {cosine:.3f} ≥ {pol.link_threshold:g}, no fact atom, cue or name differs",),
    )


def _contradiction(
    kind: str,
    clean: bool,
    detail: str,
    a: str,
    b: str,
    pa: Parsed,
    pb: Parsed,
    a_meta: Mapping[str, Any],
    b_meta: Mapping[str, Any],
    cosine: float | None,
    fm: FieldMap,
    pol: Policy,
) -> PairVerdict:
    """A contradiction cue: ``"supersedes"`` when it is safe, else conflict or distinct."""
    states = _kind_of(a) == "state" and _kind_of(b) == "state"
    newer = _recency(a_meta, b_meta, fm)
    reasons = [f"{kind.replace('_', ' ')}: {detail}"]
    if kind == "changed_number" and not states:
        reasons.append("not both state statements: two readings or events, both kept")
        return PairVerdict(DISTINCT, None, kind, tuple(reasons))
    if clean and states and newer is not None and kind not in ("tense", "polarity"):
        reasons.append(
            "both are state statements and the newer one "
            f"({'first' if newer == 0 else 'second'}) replaces the older"
        )
        return PairVerdict(SUPERSEDES, newer, kind, tuple(reasons))
    if not clean and cosine is not None and cosine < pol.link_threshold:
        # The wording differs too and the pair is no merge candidate: nothing to protect, so
        # no reviewer's time is spent on it (LoCoMo: paraphrases with "not give up" …).
        reasons.append(f"cosine {cosine:.3f} < {pol.link_threshold:g}: kept apart")
        return PairVerdict(DISTINCT, None, kind, tuple(reasons))
    if newer is None:
        reasons.append("which one is newer is unknown")
    if not states:
        reasons.append("not both clearly state statements")
    if not clean:
        reasons.append("the wording differs as well")
    return PairVerdict(CONFLICT, None, kind, tuple(reasons))


def _marker_words(markers: frozenset[str]) -> set[str]:
    """Content tokens of the update-marker phrases (so "now prefers" and "prefers" share
    their attribute words)."""
    out: set[str] = set()
    for m in markers:
        out.update(parse(m.replace("…", " ")).tokens)
    return out


def _episodic(meta: Mapping[str, Any], fm: FieldMap) -> bool:
    return "episodic" in fm.get_list(meta, fm.layer)


def _question(text: str) -> bool:
    return text.rstrip().endswith(("?", "？"))


def _update(
    a: str,
    b: str,
    pa: Parsed,
    pb: Parsed,
    a_meta: Mapping[str, Any],
    b_meta: Mapping[str, Any],
    fm: FieldMap,
    *,
    markers_only: bool = False,
) -> PairVerdict | None:
    """The update rule: a pair about the same subject and attribute of which one text replaces
    the other is ``"supersedes"`` (the newer kept) or ``"conflict"``, never ``"distinct"``.

    Never for an episodic memory (a dialog turn records what was said, an event) or a
    question. Same subject and attribute: no different opening name, the same ``subject``
    qualifiers ("my sister" …), the same opening noun phrase when both texts have one
    (:func:`consolidation.text.subject_phrase`: "The ember project" is not "The umber
    project"), and at least two shared content words that are at least half of the shorter
    text's and a third of the longer text's (update-marker words left out), one of them outside
    the opening noun phrases (:func:`consolidation.text.opening_words`), so the attribute is
    shared and not only the subject. Measured on the demo store: "The ember project is no
    longer written in Kotlin; it is now written in Go." superseded "The umber project …" (cosine
    0.698) and "The lumen project …" (0.572), "The kelp project no longer uses Black" superseded
    "The kelp project is written in Rust" (0.557, shared: kelp, project). A replacement is
    signalled by

    - an update marker (:data:`consolidation.qualifiers.UPDATE_MARKERS`) in one text and not
      the other (or different markers in both): "no longer", "now", "switched to" …;
    - a negation or past-state difference between two state statements (:func:`statement_kind`);
    - a time limit (:mod:`consolidation.qualifiers`) on one text only, the other's words all
      covered: the older limited statement is replaced by the newer unlimited one.

    With ``markers_only`` only the first signal counts (used where a fact atom differs: a
    changed id or date is two readings unless a text says it replaces the other). The newer
    text (``updated_at``, else ``created_at``) wins when it carries the signal (the marker, the
    cue, the absent time limit) or covers the older's content words; otherwise, or when the
    recency is unknown, the pair is a conflict for a person. Returns ``None`` when the rule
    does not apply.
    """
    if _episodic(a_meta, fm) or _episodic(b_meta, fm) or _question(a) or _question(b):
        return None  # a dialog turn or a question records what was said, never a new state
    ma, mb = update_markers(pa.folded), update_markers(pb.folded)
    qa, qb = qualifiers(pa.folded), qualifiers(pb.folded)
    subj = {q for q in qa if q[0] == "subject"} ^ {q for q in qb if q[0] == "subject"}
    if subj:
        return None
    sa_, sb_ = subject_of(a), subject_of(b)
    if sa_ and sb_ and sa_ != sb_:
        return None
    na, nb = subject_phrase(a), subject_phrase(b)
    if na and nb and na != nb:
        return None  # "The umber project …" / "The ember project …": another subject
    drop = _marker_words(ma | mb)
    ta, tb = set(pa.tokens) - drop, set(pb.tokens) - drop
    shared = ta & tb
    short_, long_ = sorted((len(ta), len(tb)))
    if len(shared) < 2 or len(shared) * 2 < short_ or len(shared) * 3 < long_:
        return None
    if not shared - opening_words(a) - opening_words(b):
        return None  # only the subject is shared ("… written in Rust" / "… uses Black")
    signal: str | None = None
    carrier: int | None = None  # which text carries the replacement (0, 1, or None: both/unclear)
    if ma != mb and ta != tb:  # a marker on the same words only restates ("currently")
        signal = f"update marker ({', '.join(sorted(ma ^ mb))})"
        carrier = 0 if ma - mb and not mb - ma else 1 if mb - ma and not ma - mb else None
    elif not markers_only:
        neg = (pa.negations % 2) != (pb.negations % 2)
        past = bool(pa.past_state) != bool(pb.past_state)
        states = _kind_of(a) == "state" and _kind_of(b) == "state"
        if (neg or past) and states:
            signal = "a negation or past-state cue differs"
            marked = bool(pa.past_state) if past else bool(pa.negations % 2)
            carrier = 0 if marked else 1
        else:
            la = {q for q in qa if q[0] == "time_limit"}
            lb = {q for q in qb if q[0] == "time_limit"}
            if bool(la) != bool(lb):
                limited, plain = (0, tb) if la else (1, ta)
                other = ta if limited == 0 else tb
                if plain <= other:
                    signal = "a time-limited statement and one without the limit"
                    carrier = 1 - limited
    if signal is None:
        return None
    newer = _recency(a_meta, b_meta, fm)
    reasons = [f"update: {signal}; same subject and attribute ({', '.join(sorted(shared))})"]
    if newer is not None:
        older_tokens, newer_tokens = (tb, ta) if newer == 0 else (ta, tb)
        if carrier == newer or older_tokens <= newer_tokens:
            reasons.append(
                f"the newer one ({'first' if newer == 0 else 'second'}) replaces the older"
            )
            return PairVerdict(SUPERSEDES, newer, "update", tuple(reasons))
        reasons.append("the older text carries the change: which one holds is unsure")
    else:
        reasons.append("which one is newer is unknown")
    return PairVerdict(CONFLICT, None, "update", tuple(reasons))


def _vetoes(v: PairVerdict, a: str, b: str, pa: Parsed, pb: Parsed) -> PairVerdict:
    """What no ``"same"`` verdict survives: a different verbatim token
    (:mod:`consolidation.verbatim`), a different qualifier (:mod:`consolidation.qualifiers`) —
    both ``"distinct"`` —, or two values of one single-valued attribute that a merged text
    would list side by side ("head office in Paris" / "… in Paris and Berlin") — a
    ``"conflict"``."""
    raw = verbatim_difference(a, b)
    if raw is not None:
        return _distinct(f"a different raw symbol, path, file, flag or operator ({raw})")
    qa, qb = qualifiers(pa.folded), qualifiers(pb.folded)
    if qa != qb:
        shown = ", ".join(sorted({k for k, _ in qa ^ qb}))
        return _distinct(f"a qualifier differs ({shown}): a merge would drop it")
    attrs_a = {m.group(0) for m in SINGLE_VALUED_RE.finditer(pa.folded)}
    attrs_b = {m.group(0) for m in SINGLE_VALUED_RE.finditer(pb.folded)}
    if attrs_a & attrs_b:
        ta, tb = set(pa.tokens), set(pb.tokens)
        subj = proper_names(subject_of(a) or "") | proper_names(subject_of(b) or "")
        kind_a = dict.fromkeys(proper_names(a) - subj, "name") | dict(pa.kinds)
        kind_b = dict.fromkeys(proper_names(b) - subj, "name") | dict(pb.kinds)
        extra = {t for t in ta - tb if kind_a.get(t) in set(kind_b.values())} | {
            t for t in tb - ta if kind_b.get(t) in set(kind_a.values())
        }
        if extra:
            return PairVerdict(
                CONFLICT,
                None,
                "changed_value",
                (
                    f"{', '.join(sorted(attrs_a & attrs_b))} holds one value, and one text "
                    f"adds {', '.join(sorted(extra))}: a merged text would state two values",
                ),
            )
    return v
