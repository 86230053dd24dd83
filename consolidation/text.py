"""Text helpers for planning: normalisation, content words, contradiction cues, extractive merge.

Everything here is offline, deterministic string processing (no model, no LLM). Tokens come from
:mod:`consolidation.atoms` (every script, fact atoms kept whole) and negation/past-state cues from
the data table in :mod:`consolidation.cues`. The cues are deliberately conservative: a pair is
called a contradiction when the two texts say the same thing except for a negation, a past-state
cue, a number, a single-valued attribute's value or the order of two roles; anything less clear
is reported as *unsure*. :func:`consolidation.judgment.judge_pair` turns that into a verdict.
"""

from __future__ import annotations

import re
import threading
import unicodedata
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from .aliases import canonical
from .atoms import ATOM_KINDS, fold, scan
from .changes import leading_verbs
from .cues import CUES, EVENT_MARKERS, NEGATION, PAST_STATE, STATE_MARKERS
from .qualifiers import UPDATE_MARKERS

__all__ = [
    "SINGLE_VALUED_RE",
    "Cue",
    "Parsed",
    "compare",
    "content_tokens",
    "detect_contradiction",
    "extractive_merge",
    "labelled_fragment",
    "normalize_text",
    "novel_sentences",
    "parse",
    "parse_scope",
    "proper_names",
    "split_sentences",
    "strip_label",
    "subject_of",
    "subject_phrase",
    "opening_words",
]

_SENT_RE = re.compile(r"(?<=[.!?;])\s+|(?<=[\u3002\uff01\uff1f\uff1b])|\n+")
_TRAILING_RE = re.compile(r"\s*[.!\u3002]+$")


def normalize_text(text: str) -> str:
    """Key for exact-duplicate detection: NFKC, casefold, whitespace collapsed — nothing else.

    Symbols, signs, digits, emoji and punctuation inside the text are kept, so ``"User prefers
    C++"`` and ``"User prefers C"`` (or 👍 / 👎) never share a key. The one
    exception is a trailing run of full stops or exclamation marks (``.``, ``!``, ``。``): it ends
    a sentence without changing what it states, and dialog memories differ in it ("Alice likes
    jazz" / "alice likes jazz!"). A trailing ``?`` is kept: a question is not a statement.
    An empty or whitespace-only text gives ``""``, which callers must never treat as a duplicate.
    """
    t = " ".join(unicodedata.normalize("NFKC", text).casefold().split())
    return _TRAILING_RE.sub("", t)


_STOP_TEXT = """a an the is are was were be been being am do does did doing has have had having to
    of in on at for with and or but that this these those it its he she they them his her hers
    their theirs i me my mine we us our ours you your yours him himself herself themselves
    itself myself also
    so very really just too as by from into about than then there here what which who whom whose
    when where why how all any some more most other such only own same can will would should could
    may might must shall longer anymore still again now used would ever yet both each few much
    many lot lots well even quite rather up out over off back"""
STOPWORDS = frozenset(_STOP_TEXT.split())
"""English function words ignored when comparing the facts two texts state (pronouns included,
so "She likes jazz" and "Alice likes jazz" are not a changed value). Other languages keep all
their words: a function word that both texts share compares equal anyway."""

_NOW_TEXT = """jetzt nun inzwischen mittlerweile maintenant désormais ahora actualmente agora
    atualmente adesso attualmente nu tegenwoordig сейчас теперь"""
NOW_WORDS = frozenset(_NOW_TEXT.split())
""""Now" / "currently" in de, fr, es, pt, it, nl, ru (English "now" is a stopword): the
present tense already says it, so "Ich bin jetzt nicht mehr im Team" is "Ich bin im Team"
plus a past-state cue (croit/llm-gateway#17), not a reworded statement. Hand-picked from the
languages' usual adverbs; ignoring one only makes two texts compare closer on that word."""

_SYNONYMS = {
    "called": "named",
    "call": "name",
    "calls": "names",
    "resides": "lives",
    "reside": "live",
    "resided": "lived",
    "enjoys": "likes",
    "enjoy": "like",
    "enjoyed": "liked",
    "loves": "likes",
    "love": "like",
    "loved": "liked",
    "film": "movie",
    "films": "movies",
    "kids": "children",
    "kid": "child",
    "automobile": "car",
}
"""English words that state the same attribute ("named"/"called"): not a changed value.
Hand-picked; a synonym missing here makes a pair *distinct*, never merged."""

_SINGLE_VALUED_RE = re.compile(
    r"\b(?:liv(?:e|es|ed|ing) in|mov(?:e|es|ed|ing) to|relocat\w* to"
    r"|work(?:s|ed|ing)? (?:at|as|for)"
    r"|born (?:in|on)|years? old|age|aged|name is|named|called|favou?rite|married to|engaged to"
    r"|dating|based in|located in|stud(?:y|ies|ied|ying) at|major(?:s|ed|ing)? in|drives? an?"
    r"|job is|lives? with|birthday|is from|comes? from|grew up in|owns? an?|has an?|had an?"
    r"|head office|headquarter(?:s|ed)?(?: is| are)? in|hq is|price is|costs?)\b"
)
SINGLE_VALUED_RE = _SINGLE_VALUED_RE
"""Attributes that hold one value at a time; a different value for one is a changed value
(``"lives in Paris"`` vs ``"lives in Berlin"``). Hand-picked from LoCoMo observations."""

_ASCII_WORD = re.compile(r"^[a-z]+$")


def _stem(w: str) -> str:
    """A tiny English suffix stripper ("likes"/"like"/"liked" compare equal); ASCII words of
    more than three letters only, so other languages are never stemmed (conservative)."""
    if len(w) <= 3 or not _ASCII_WORD.match(w):
        return w
    for suf, rep in (("ies", "y"), ("ied", "y"), ("ing", ""), ("ed", ""), ("es", ""), ("s", "")):
        if w.endswith(suf) and len(w) - len(suf) >= 3 and not w.endswith("ss"):
            w = w[: len(w) - len(suf)] + rep
            break
    if w.endswith("e") and len(w) > 3:
        w = w[:-1]
    return w


@dataclass(frozen=True)
class Parsed:
    """What :func:`parse` reads from a text.

    - ``tokens``: content tokens in order — stemmed English words (stopwords dropped), other
      words as folded, character bigrams, and fact atoms (numbers, dates, ids, symbols, emoji)
      as their values; cues removed.
    - ``kinds``: ``{token: kind}`` for the atoms among ``tokens``.
    - ``negations``: how many negation cues; ``past_state``: the past-state cues found.
    - ``numbers``: the number atoms; ``folded``: :func:`consolidation.atoms.fold` of the text;
      ``rest``: the folded text without atoms and cues (for verb markers).
    - ``raw``: every token in order, stopwords included (stemmed like ``tokens``), for
      aligning two texts (a one-letter grade "A" is a stopword, "A+" is not).
    """

    tokens: tuple[str, ...]
    kinds: dict[str, str]
    negations: int
    past_state: tuple[str, ...]
    numbers: frozenset[str]
    folded: str
    rest: str
    raw: tuple[str, ...] = ()


_held: dict[str, Parsed] | None = None
"""Every text parsed while a :func:`parse_scope` is open (``None``: none is)."""
_scopes = 0
_scope_lock = threading.Lock()


@contextmanager
def parse_scope() -> Iterator[None]:
    """Keep every parse made until the scope closes (a planning pass: its stages read the same
    texts' parses one stage after another, more of them than :func:`parse`'s 16,384 at 1M
    memories: 50K judged pairs were parsed ≈ 3.8 times a text). Scopes nest and may be open
    in several threads: the texts are dropped when the last one closes."""
    global _held, _scopes
    with _scope_lock:
        _scopes += 1
        if _held is None:
            _held = {}
    try:
        yield
    finally:
        with _scope_lock:
            _scopes -= 1
            if not _scopes:
                _held = None


def parse(text: str) -> Parsed:
    """Parse ``text`` into content tokens, atoms and cues (see :class:`Parsed`); aliases and
    abbreviations of :data:`consolidation.aliases.ALIASES` are replaced by their canonical form
    first ("NYC" and "New York City" give the same tokens).

    Memoised (16,384 texts, and every text while a :func:`parse_scope` is open): a planning
    pass judges each memory against many partners, and a parse costs ~1.5 ms. The result is
    shared: treat it as read-only.
    """
    held = _held
    if held is None:
        return _parse(text)
    out = held.get(text)
    if out is None:
        out = held[text] = _parse(text)
    return out


@lru_cache(maxsize=16384)
def _parse(text: str) -> Parsed:
    """:func:`parse` itself (memoised by the last 16,384 texts)."""
    sc = scan(canonical(text))
    toks: list[str] = []
    raw: list[str] = []
    kinds: dict[str, str] = {}
    for kind, value in sc.tokens:
        if kind == "word":
            word = _stem(_SYNONYMS.get(value, value))
            raw.append(word)
            if value in STOPWORDS or value in NOW_WORDS:
                continue
            toks.append(word)
        else:
            raw.append(value)
            toks.append(value)
            if kind in ATOM_KINDS:
                kinds[value] = kind
    neg = sum(1 for c in sc.cues if c.kind == NEGATION)
    past = tuple(c.phrase for c in sc.cues if c.kind == PAST_STATE)
    nums = frozenset(v for v, k in kinds.items() if k == "number")
    return Parsed(tuple(toks), kinds, neg, past, nums, fold(text), sc.rest, tuple(raw))


def content_tokens(text: str) -> list[str]:
    """Content tokens of ``text`` in order (stemmed English words, other words, CJK/Thai
    bigrams, atoms; stopwords and cues removed). Works for every script."""
    return list(parse(text).tokens)


@dataclass(frozen=True)
class Cue:
    """Why two similar texts disagree.

    ``kind`` is one of ``"negation"``, ``"past_state"``, ``"changed_number"``,
    ``"changed_value"``, ``"role_swap"``, ``"different_subject"``. ``unambiguous`` is True only
    when the texts are otherwise the same statement. ``detail`` is a short human-readable
    explanation.
    """

    kind: str
    unambiguous: bool
    detail: str


def _role_swap(a: tuple[str, ...], b: tuple[str, ...]) -> str | None:
    """A pivot word with the words before/after it exchanged
    ("Alice hired Bob" / "Bob hired Alice")."""
    for idx, w in enumerate(a):
        if a.count(w) != 1 or b.count(w) != 1:
            continue
        jdx = b.index(w)
        before_a, after_a = set(a[:idx]), set(a[idx + 1 :])
        before_b, after_b = set(b[:jdx]), set(b[jdx + 1 :])
        if (
            before_a
            and after_a
            and before_a == after_b
            and after_a == before_b
            and before_a != after_a
        ):
            return w
    return None


_STARTERS_TEXT = """The A An On In At Yesterday Today Tomorrow Last Next This That These Those I We
    You He She They It My Our Your His Her Their Thanks Thank Hey Hi Hello Wow Yes No Yeah Oh
    Sure Absolutely Awesome Great Nice Cool So And But After Before When While During Since For
    With As If
    Although Every Each Some Many Most All Both One Also Then Now Recently Lately Still Just Really
    Monday Tuesday Wednesday Thursday Friday Saturday Sunday January February March April May June
    July August September October November December What Why How Where Who Haha Aw Ah Congrats
    Congratulations Good Well Okay Ok OK Not Never Maybe Sorry Please Let Love Glad Is Was Has
    Der Die Das Ein Eine Er Sie Es Wir Ich Le La Les Un Une Il Elle Je Nous El Los Las Ella Yo
    Lo Gli Lei Io Het De Een Hij Zij Wij Ik Os Ele Ela Eu Он Она Они Мы Я"""
_STARTERS = frozenset(_STARTERS_TEXT.split())
"""Capitalised words that start sentences without naming anyone (en, de, fr, es, it, nl, pt,
ru articles and pronouns)."""

_CAP_RE = re.compile(r"(?<!\w)([^\W\d_][\w-]*)(?:['\u2019]s)?(?!\w)")


_VERB_RE = re.compile(
    "|".join(f"(?:{rx})" for rx in (*STATE_MARKERS.values(), EVENT_MARKERS["en"]))
)
_VERB_CUES = frozenset(r.phrase for r in CUES if r.stands_for and r.match == "word")
_IMPERATIVE_TEXT = "use avoid keep run prefer always never"
_LEADING_VERBS = leading_verbs() | frozenset(_IMPERATIVE_TEXT.split())
"""Verbs a subjectless note opens with: the change events of :mod:`consolidation.changes`
("Switched to Tortoise ORM …") and instructions ("Use SQLAlchemy ORM …"; hand-picked from the
field reports of other memory systems). Read as a name, "Use" and "Switched" were two subjects."""


@lru_cache(maxsize=65536)
def _opening_verb(word: str) -> bool:
    """A capitalised first word that is a statement verb, not a name: mem0 and other agents
    write subjectless facts ("Likes Chinese food", "Dislikes cheese pizza", "Prefiere el
    café"). Verbs are the state markers of every language, the English event markers and
    the verb cues ("dislikes", "hates"); an all-capitals word ("USA") stays a name."""
    if word.isupper():
        return False
    f = fold(word)
    return f in _VERB_CUES or f in _LEADING_VERBS or _VERB_RE.fullmatch(f) is not None


def _subject(text: str) -> str | None:
    """The first word when it is a capitalised name ("Caroline", "Jon:"), else ``None``."""
    m = _CAP_RE.match(text.strip())
    if not m or not m.group(1)[0].isupper() or m.group(1) in _STARTERS:
        return None
    if _opening_verb(m.group(1)):
        return None
    return m.group(1)


def subject_of(text: str) -> str | None:
    """The capitalised name a text opens with ("Caroline …", "Jon: …"), else ``None``."""
    return _subject(text)


_WORD_RE = re.compile(r"[^\W\d_]+")
_STARTERS_FOLDED = frozenset(fold(w) for w in _STARTERS)


def _first_words(rows: Sequence[Any]) -> frozenset[str]:
    return frozenset(
        fold(r.phrase.replace("…", " ")).split()[0]
        for r in rows
        if r.match == "word" and r.phrase.strip()
    )


_CUE_STARTS = _first_words(CUES) | _first_words(UPDATE_MARKERS)
_OPENERS = _STARTERS_FOLDED | STOPWORDS | (_first_words(UPDATE_MARKERS) - _first_words(CUES))
_SUBJECT_WORDS = 6


def subject_phrase(text: str) -> frozenset[str] | None:
    """The content words of the noun phrase a text opens with, up to its first verb: "The
    ember project is …" → ``{"ember", "project"}``, "Le projet ember n'est plus …" →
    ``{"projet", "ember"}``, "Alice no longer lives …" → ``{"alic"}`` (stemmed like
    :func:`parse`).

    The phrase ends at the first finite verb (a state marker of any language of
    :data:`consolidation.cues.STATE_MARKERS`, an English event marker or a verb cue), English
    function word, or first word of a cue or update marker ("no longer", "ne … plus", "nicht
    mehr", "switched to"); opening articles and pronouns (:data:`_STARTERS`) and one-letter
    elisions ("l'", "n'") are skipped, and so is an opening update marker ("Correction:").
    ``None`` when no such end is found within the first six words, or the phrase is empty
    (unspaced scripts, a pronoun, a subjectless fact): the subject is then unknown and
    :func:`consolidation.judgment.judge_pair` does not use it. Why: the demo store's "The ember
    project is no longer written in Kotlin …" superseded "The umber project is written in
    Kotlin." (cosine 0.698) — one modifier of the subject apart, every other word shared.
    """
    return _opening(text)[0]


def opening_words(text: str) -> frozenset[str]:
    """Every word before the end of :func:`subject_phrase` — the subject and the skipped
    articles ("das", "le": content tokens in languages without a stopword list) — stemmed like
    :func:`parse`; empty when the subject is unknown."""
    return _opening(text)[1]


@lru_cache(maxsize=16384)
def _opening(text: str) -> tuple[frozenset[str] | None, frozenset[str]]:
    words = _WORD_RE.findall(fold(canonical(text)))
    out: list[str] = []
    seen: list[str] = []
    for w in words[:_SUBJECT_WORDS]:
        stem = _stem(_SYNONYMS.get(w, w))
        if len(w) == 1 or (not out and w in _OPENERS):
            seen.append(stem)
            continue  # "l'", "The", "Correction: the …"
        if w in STOPWORDS or w in _CUE_STARTS or _opening_verb(w):
            return (frozenset(out), frozenset(out + seen)) if out else (None, frozenset())
        out.append(stem)
    return None, frozenset()


def _names(text: str) -> set[str]:
    out = {w for w in _CAP_RE.findall(text) if w[0].isupper() and w not in _STARTERS}
    m = _CAP_RE.match(text.strip())
    if m and m.group(1) in out and _opening_verb(m.group(1)):
        rest = _CAP_RE.findall(text.strip()[m.end() :])
        if m.group(1) not in rest:
            out.discard(m.group(1))
    return out


def proper_names(text: str) -> set[str]:
    """Capitalised words of ``text`` that are not sentence starters, as content tokens (folded,
    stemmed): ``proper_names("Alice moved to Berlin")`` → ``{"alice", "berlin"}``."""
    out = set()
    for w in _names(text):
        f = fold(w)
        out.add(_stem(_SYNONYMS.get(f, f)))
    return out


def detect_contradiction(a: str, b: str) -> Cue | None:
    """The contradiction cue between texts ``a`` and ``b``, or ``None`` when they agree.

    Shorthand for ``compare(a, b, parse(a), parse(b))``; see :func:`compare` for the rules.
    """
    return compare(a, b, parse(a), parse(b))


def compare(a: str, b: str, pa: Parsed, pb: Parsed) -> Cue | None:
    """The contradiction cue between texts ``a`` and ``b`` (parsed as ``pa``, ``pb``).

    Rules (checked in order; tokens are content tokens, :func:`content_tokens`):

    0. both texts open with a different name (the subject: "Caroline ...", "Jon: ..."): a role
       swap when each names the other's subject ("Caroline appreciates Melanie" / "Melanie
       appreciates Caroline"; LoCoMo dialog "Gina: Thanks, Jon!" / "Jon: Thanks, Gina!"),
       otherwise ``different_subject`` — both unsure, so never merged nor reconciled;
    1. negation parity differs ("likes jazz" / "doesn't like jazz" / "never liked jazz"), or
       one text has a past-state cue the other lacks ("used to", "no longer", "formerly" …,
       in any language of :data:`consolidation.cues.CUES`): unambiguous when the content
       tokens are identical, unsure when they overlap (Jaccard ≥ 0.5) but differ a little;
    2. same content words in a different order with a pivot whose sides swapped: role swap
       (unsure: symmetric verbs such as "met" make both true, and a swap is not an update in
       time, so it is never reconciled automatically — only kept apart);
    3. different numbers with otherwise identical words ("is 30" / "is 31"): changed number;
    4. exactly one content word replaced by another while a single-valued attribute
       ("lives in", "works at", "favorite", ...) is named: changed value (unambiguous). A
       one-word change on a many-valued attribute ("likes jazz" / "likes rock") is not a
       contradiction: both facts can hold.

    Identical content in the same order ("same fact twice") returns ``None``.
    """
    subj_a, subj_b = _subject(a), _subject(b)
    if subj_a and subj_b and subj_a != subj_b:
        if subj_b in _names(a) and subj_a in _names(b):
            return Cue("role_swap", False, f"{subj_a} and {subj_b} swap roles")
        return Cue("different_subject", False, f"about {subj_a} vs about {subj_b}")
    sa, sb = set(pa.tokens), set(pb.tokens)
    union = sa | sb
    jacc = len(sa & sb) / len(union) if union else 1.0
    past_a, past_b = bool(pa.past_state), bool(pb.past_state)
    if (pa.negations % 2) != (pb.negations % 2) or past_a != past_b:
        kind = "past_state" if past_a != past_b else "negation"
        words = ", ".join(sorted(set(pa.past_state) ^ set(pb.past_state))) or "not / never"
        if sa == sb:
            what = (
                "one text says it no longer holds"
                if kind == "past_state"
                else "one text negates the other"
            )
            return Cue(kind, True, f"{what} ({words})")
        if jacc >= 0.5:
            return Cue(
                kind, False, f"{kind.replace('_', ' ')} cue ({words}) and the wording differs"
            )
        return None
    if sa == sb and sorted(pa.tokens) == sorted(pb.tokens):
        if pa.tokens != pb.tokens:
            pivot = _role_swap(pa.tokens, pb.tokens)
            if pivot is not None:
                return Cue("role_swap", False, f"roles around {pivot!r} are swapped")
        return None
    da, db = sa - sb, sb - sa
    na, nb = pa.numbers - pb.numbers, pb.numbers - pa.numbers
    if na and nb:
        rest_a = {t for t in da if t not in pa.numbers}
        rest_b = {t for t in db if t not in pb.numbers}
        nums = f"{', '.join(sorted(na))} vs {', '.join(sorted(nb))}"
        if not rest_a and not rest_b:
            return Cue("changed_number", True, f"the number changed ({nums})")
        if jacc >= 0.5:
            return Cue("changed_number", False, f"numbers differ ({nums}) and so does the wording")
        return None
    if len(da) == 1 and len(db) == 1:
        (va,), (vb,) = da, db
        ma, mb = _SINGLE_VALUED_RE.search(pa.folded), _SINGLE_VALUED_RE.search(pb.folded)
        if ma and mb:
            if 0 <= pa.folded.find(va) < ma.start() and 0 <= pb.folded.find(vb) < mb.start():
                # the word before the attribute is its holder: "sister Anna lives in Rome" /
                # "sister Maria lives in Rome" are two sisters, not a move
                return Cue("different_subject", False, f"about {va!r} vs {vb!r}")
            return Cue("changed_value", True, f"the value changed ({va!r} vs {vb!r})")
    return None


def split_sentences(text: str) -> list[str]:
    """Sentences/clauses of ``text`` (split after . ! ? ; and on newlines), stripped, non-empty."""
    return [s.strip() for s in _SENT_RE.split(text) if s and s.strip()]


def _facts(text: str) -> set[str]:
    return set(parse(text).tokens)


def extractive_merge(texts: Sequence[str], max_chars: int) -> str | None:
    """Merge texts without an LLM so no source's distinct facts are dropped.

    Start from the most complete text (most distinct content words, then longest, then first in
    ``texts``); append, in source order, every sentence of the others that carries a content word
    or number not yet covered. Returns ``None`` when the result would exceed ``max_chars``
    (the caller then shrinks or skips the group).
    """
    if not texts:
        raise ValueError("extractive_merge needs at least one text")
    ranked = sorted(range(len(texts)), key=lambda i: (-len(_facts(texts[i])), -len(texts[i]), i))
    base = texts[ranked[0]].strip()
    covered = _facts(base)
    parts = [base]
    for i in range(len(texts)):
        if i == ranked[0]:
            continue
        for sent in split_sentences(texts[i]):
            new = _facts(sent) - covered
            if new:
                parts.append(sent if sent[-1] in ".!?;" else sent + ".")
                covered |= new
    if len(parts) > 1 and parts[0][-1] not in ".!?;":
        parts[0] += "."
    merged = " ".join(parts)
    return merged if len(merged) <= max_chars else None


def strip_label(text: str, label: str | None) -> str:
    """``text`` without a leading ``"<label>:"`` (a dialog turn's speaker prefix), stripped.

    ``strip_label("Jon: I lost my job.", "Jon")`` → ``"I lost my job."``; any other text is
    returned stripped.
    """
    t = text.strip()
    if label and t.startswith(label + ":"):
        return t[len(label) + 1 :].strip()
    return t


def novel_sentences(text: str, covered: set[str]) -> list[str]:
    """Sentences of ``text`` that carry a content word or number not in ``covered``, in order.

    ``covered`` holds stemmed content tokens (:func:`content_tokens`) and is updated in place
    with the tokens of every sentence returned, so a repeated fact is kept once. A sentence made
    only of covered words or stopwords ("Wow, thanks!" after "Thanks for the tip") is dropped.
    """
    out = []
    for sent in split_sentences(text):
        new = _facts(sent) - covered
        if new:
            out.append(sent)
            covered |= new
    return out


def labelled_fragment(text: str, label: str | None, covered: set[str]) -> str | None:
    """The novel part of one dialog turn as ``"<label>: sentence sentence"`` (or without the
    label when there is none); ``None`` when every sentence is already covered.

    The speaker prefix is stripped before splitting (so it is never mistaken for content) and put
    back in front of whatever is kept. ``covered`` is updated as in :func:`novel_sentences`.
    """
    kept = novel_sentences(strip_label(text, label), covered)
    if not kept:
        return None
    body = " ".join(kept)
    return f"{label}: {body}" if label else body
