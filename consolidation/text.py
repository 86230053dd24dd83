"""Text helpers for planning: normalisation, contradiction cues and the extractive merge.

Everything here is offline, deterministic string processing (no model, no LLM). The cues are
deliberately conservative: a pair is called a contradiction when the two texts say the same
thing except for a negation, a number, a single-valued attribute's value or the order of two
roles; anything less clear is reported as *unsure* so the planner leaves both memories alone.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "Cue",
    "content_tokens",
    "detect_contradiction",
    "extractive_merge",
    "labelled_fragment",
    "normalize_text",
    "novel_sentences",
    "split_sentences",
    "strip_label",
]

_PUNCT_RE = re.compile(r"[^\w\s]+", re.UNICODE)
_WS_RE = re.compile(r"\s+")
_WORD_RE = re.compile(r"[a-z0-9]+(?:[.,][0-9]+)?", re.UNICODE)
_SENT_RE = re.compile(r"(?<=[.!?;])\s+|\n+")


def normalize_text(text: str) -> str:
    """Key for exact-duplicate detection: NFKC, casefold, punctuation → space, whitespace collapsed.

    ``"Alice  likes JAZZ!"`` and ``"alice likes jazz"`` give the same key.
    """
    t = unicodedata.normalize("NFKC", text).casefold()
    t = t.replace("\u2019", "'").replace("'", "")
    t = _PUNCT_RE.sub(" ", t)
    return _WS_RE.sub(" ", t).strip()


# Contractions are expanded before tokenising so "doesn't" carries an explicit "not".
_CONTRACTIONS = [
    (re.compile(r"\bwon't\b"), "will not"),
    (re.compile(r"\bcan't\b"), "can not"),
    (re.compile(r"\bcannot\b"), "can not"),
    (re.compile(r"n't\b"), " not"),
    (re.compile(r"'re\b"), " are"),
    (re.compile(r"'s\b"), ""),
    (re.compile(r"'ve\b"), " have"),
    (re.compile(r"'ll\b"), " will"),
    (re.compile(r"'d\b"), " would"),
    (re.compile(r"'m\b"), " am"),
]

NEGATIONS = frozenset(
    {"not", "no", "never", "nor", "none", "nothing", "nobody", "neither", "stopped", "quit",
     "without", "dislike", "dislikes", "disliked", "hates", "hate", "hated"}
)
"""Words that flip a statement. "dislike"/"hate" flip "like" (they count as negation + like)."""

_FLIP_TO = {"dislike": "lik", "dislikes": "lik", "disliked": "lik", "hates": "lik", "hate": "lik",
            "hated": "lik"}

_STOP_TEXT = """a an the is are was were be been being am do does did doing has have had having to of in on
    at for with and or but that this these those it its he she they them his her hers their theirs
    i me my mine we us our ours you your yours him himself herself themselves itself myself also
    so very really just too as by from into about than then there here what which who whom whose
    when where why how all any some more most other such only own same can will would should could
    may might must shall longer anymore still again now used would ever yet both each few much
    many lot lots well even quite rather up out over off back"""
STOPWORDS = frozenset(_STOP_TEXT.split())
"""Function words ignored when comparing the facts two texts state (pronouns included, so
"She likes jazz" and "Alice likes jazz" are not a changed value)."""

_SINGLE_VALUED_RE = re.compile(
    r"\b(?:liv(?:e|es|ed|ing) in|mov(?:e|es|ed|ing) to|relocat\w* to|work(?:s|ed|ing)? (?:at|as|for)"
    r"|born (?:in|on)|years? old|age|aged|name is|named|called|favou?rite|married to|engaged to"
    r"|dating|based in|located in|stud(?:y|ies|ied|ying) at|major(?:s|ed|ing)? in|drives? an?"
    r"|job is|lives? with|birthday|is from|comes? from|grew up in|owns? an?|has an?|had an?)\b"
)
"""Attributes that hold one value at a time; a different value for one is a changed value
(``"lives in Paris"`` vs ``"lives in Berlin"``). Hand-picked from LoCoMo observations."""

_NUM_RE = re.compile(r"^[0-9]+(?:[.,][0-9]+)?$")
_NUMBER_WORDS = {
    "zero": "0", "one": "1", "two": "2", "three": "3", "four": "4", "five": "5", "six": "6",
    "seven": "7", "eight": "8", "nine": "9", "ten": "10", "eleven": "11", "twelve": "12",
    "twenty": "20", "thirty": "30", "forty": "40", "fifty": "50", "hundred": "100",
}


def _stem(w: str) -> str:
    """A tiny suffix stripper so "likes"/"like"/"liked" and "lives"/"lived" compare equal."""
    if _NUM_RE.match(w) or len(w) <= 3:
        return w
    for suf, rep in (("ies", "y"), ("ied", "y"), ("ing", ""), ("ed", ""), ("es", ""), ("s", "")):
        if w.endswith(suf) and len(w) - len(suf) >= 3 and not w.endswith("ss"):
            w = w[: len(w) - len(suf)] + rep
            break
    if w.endswith("e") and len(w) > 3:
        w = w[:-1]
    return w


_IDIOMS_RE = re.compile(
    r"\b(?:can not wait|no problem|no worries|long time no (?:see|talk|chat)|no doubt|not only"
    r"|never mind|no matter|never been better|could not be happier|can not thank)\b"
)
"""Negation words that do not negate a fact (seen in LoCoMo dialog: "can't wait!")."""


def _words(text: str) -> list[str]:
    t = unicodedata.normalize("NFKC", text).casefold().replace("\u2019", "'")
    for rx, rep in _CONTRACTIONS:
        t = rx.sub(rep, t)
    t = _IDIOMS_RE.sub(" ", t)
    return _WORD_RE.findall(t)


@dataclass(frozen=True)
class _Parsed:
    tokens: tuple[str, ...]  # stemmed content tokens, in order (negations removed)
    negations: int
    numbers: frozenset[str]
    norm: str


def _parse(text: str) -> _Parsed:
    toks: list[str] = []
    neg = 0
    nums: set[str] = set()
    for w in _words(text):
        w = _NUMBER_WORDS.get(w, w)
        if w in NEGATIONS:
            neg += 1
            if w in _FLIP_TO:
                toks.append(_FLIP_TO[w])
            continue
        if w in STOPWORDS:
            continue
        if _NUM_RE.match(w):
            nums.add(w.replace(",", "."))
        toks.append(_stem(w))
    return _Parsed(tuple(toks), neg, frozenset(nums), " ".join(_words(text)))


def content_tokens(text: str) -> list[str]:
    """Stemmed content words and numbers of ``text`` in order (stopwords and negations removed)."""
    return list(_parse(text).tokens)


@dataclass(frozen=True)
class Cue:
    """Why two similar texts disagree.

    ``kind`` is one of ``"negation"``, ``"changed_number"``, ``"changed_value"``,
    ``"role_swap"``, ``"different_subject"``. ``unambiguous`` is True only when
    the texts are otherwise the same statement; the planner reconciles only those. ``detail``
    is a short human-readable explanation.
    """

    kind: str
    unambiguous: bool
    detail: str


def _role_swap(a: tuple[str, ...], b: tuple[str, ...]) -> str | None:
    """A pivot word with the words before/after it exchanged ("Alice hired Bob" / "Bob hired Alice")."""
    for idx, w in enumerate(a):
        if a.count(w) != 1 or b.count(w) != 1:
            continue
        jdx = b.index(w)
        before_a, after_a = set(a[:idx]), set(a[idx + 1 :])
        before_b, after_b = set(b[:jdx]), set(b[jdx + 1 :])
        if before_a and after_a and before_a == after_b and after_a == before_b and before_a != after_a:
            return w
    return None


_STARTERS_TEXT = """The A An On In At Yesterday Today Tomorrow Last Next This That These Those I We You He She
    They It My Our Your His Her Their Thanks Thank Hey Hi Hello Wow Yes No Yeah Oh Sure Absolutely
    Awesome Great Nice Cool So And But After Before When While During Since For With As If
    Although Every Each Some Many Most All Both One Also Then Now Recently Lately Still Just Really
    Monday Tuesday Wednesday Thursday Friday Saturday Sunday January February March April May June
    July August September October November December What Why How Where Who Haha Aw Ah Congrats
    Congratulations Good Well Okay Ok OK Not Never Maybe Sorry Please Let Love Glad"""
_STARTERS = frozenset(_STARTERS_TEXT.split())
"""Capitalised words that start sentences without naming anyone."""

_CAP_RE = re.compile(r"\b([A-Z][a-zA-Z-]+)(?:['\u2019]s)?\b")


def _subject(text: str) -> str | None:
    """The first word when it is a capitalised name ("Caroline", "Jon:"), else ``None``."""
    m = _CAP_RE.match(text.strip())
    return m.group(1) if m and m.group(1) not in _STARTERS else None


def _names(text: str) -> set[str]:
    return {w for w in _CAP_RE.findall(text) if w not in _STARTERS}


def detect_contradiction(a: str, b: str) -> Cue | None:
    """The contradiction cue between texts ``a`` and ``b``, or ``None`` when they agree.

    Rules (checked in order; tokens are stemmed content words):

    0. both texts open with a different name (the subject: "Caroline ...", "Jon: ..."): a role
       swap when each names the other's subject ("Caroline appreciates Melanie" / "Melanie
       appreciates Caroline"; LoCoMo dialog "Gina: Thanks, Jon!" / "Jon: Thanks, Gina!"),
       otherwise ``different_subject`` — both unsure, so never merged nor reconciled;
    1. negation parity differs ("likes jazz" / "doesn't like jazz" / "no longer likes jazz" /
       "never liked jazz"): unambiguous when the content words are identical, unsure when they
       overlap (Jaccard ≥ 0.5) but differ a little;
    2. same content words in a different order with a pivot whose sides swapped: role swap
       (unsure: symmetric verbs such as "met" make both true, and a swap is not an update in
       time, so it is never reconciled automatically — only kept apart);
    3. different numbers with otherwise identical words ("is 30" / "is 31"): changed number;
    4. exactly one content word replaced by another while a single-valued attribute
       ("lives in", "works at", "favorite", ...) is named: changed value (unambiguous). A
       one-word change on a many-valued attribute ("likes jazz" / "likes rock") is not a
       contradiction: both facts can hold, and the extractive merge keeps both.

    Identical content in the same order ("same fact twice") returns ``None``.
    """
    subj_a, subj_b = _subject(a), _subject(b)
    if subj_a and subj_b and subj_a != subj_b:
        if subj_b in _names(a) and subj_a in _names(b):
            return Cue("role_swap", False, f"{subj_a} and {subj_b} swap roles")
        return Cue("different_subject", False, f"about {subj_a} vs about {subj_b}")
    pa, pb = _parse(a), _parse(b)
    sa, sb = set(pa.tokens), set(pb.tokens)
    union = sa | sb
    jacc = len(sa & sb) / len(union) if union else 1.0
    if (pa.negations % 2) != (pb.negations % 2):
        if sa == sb:
            return Cue("negation", True, "one text negates the other (not / no longer / never)")
        if jacc >= 0.5:
            return Cue("negation", False, "negation differs and the wording differs too")
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
        if _SINGLE_VALUED_RE.search(pa.norm) and _SINGLE_VALUED_RE.search(pb.norm):
            return Cue("changed_value", True, f"the value changed ({va!r} vs {vb!r})")
    return None


def split_sentences(text: str) -> list[str]:
    """Sentences/clauses of ``text`` (split after . ! ? ; and on newlines), stripped, non-empty."""
    return [s.strip() for s in _SENT_RE.split(text) if s and s.strip()]


def _facts(text: str) -> set[str]:
    return set(_parse(text).tokens)


def extractive_merge(texts: Sequence[str], max_chars: int) -> str | None:
    """Merge texts without an LLM so no source's distinct facts are dropped.

    Start from the most complete text (most distinct content words, then longest, then first in
    ``texts``); append, in source order, every sentence of the others that carries a content word
    or number not yet covered. Returns ``None`` when the result would exceed ``max_chars``
    (the caller then shrinks or skips the group).
    """
    if not texts:
        raise ValueError("extractive_merge needs at least one text")
    ranked = sorted(
        range(len(texts)), key=lambda i: (-len(_facts(texts[i])), -len(texts[i]), i)
    )
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
