"""Script-aware tokens and *fact atoms*: the parts of a text that a paraphrase never changes.

A fact atom is a number, a date or time, an identifier (``#260``, ``PR-480``, a commit hash, a
UUID, an e-mail, a URL, a version, a ticker, a code with digits such as ``gpt4``), a symbol that
is part of a name (``C++``, ``C#``, ``A+``, ``°``, ``€``) or an emoji. Two memories that differ
in an atom state different facts, whatever their cosine similarity.

Tokens cover every script: words of scripts that use spaces (accented Latin, Cyrillic, Greek,
Hangul, …) are split on non-letters; scripts written without spaces (Chinese, Japanese, Thai,
Lao, Khmer, Myanmar) become overlapping character bigrams (a one-character run stays whole).
Bigrams need no dictionary, are deterministic and are the usual baseline for CJK retrieval;
a segmenter would add a model-sized dependency for a comparison that only asks "same words?".
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from .cues import CueHit, find_cues

__all__ = ["ATOM_HINT_RE", "ATOM_KINDS", "ATOM_RE", "Scan", "cue_hits", "fold", "grams", "scan"]

ATOM_KINDS = frozenset({"number", "date", "id", "symbol", "emoji"})
"""Token kinds that are fact atoms (the others are ``"word"`` and ``"gram"``)."""

_L = "a-z\u00df-\u024f\u0370-\u03ff\u0400-\u04ff"
"""Lower-case letters of the Latin, Greek and Cyrillic scripts (text is case-folded first)."""
_AW = f"[0-9{_L}_]"  # a character that continues an identifier or a number
_NB = f"(?<!{_AW})"
_NA = f"(?!{_AW})"

_NOSPACE = (
    "\u0e00-\u0e7f\u0e80-\u0eff\u1000-\u109f\u1780-\u17ff"  # Thai, Lao, Myanmar, Khmer
    "\u3040-\u30ff\u31f0-\u31ff"  # Hiragana, Katakana
    "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002ffff"  # Han
)
_NOSPACE_RUN = re.compile(f"[{_NOSPACE}]+")

_MONTHS = (
    "january|february|march|april|may|june|july|august|september|october|november|december"
    "|jan|feb|mar|apr|jun|jul|aug|sept|sep|oct|nov|dec"
    "|januar|februar|märz|mai|juni|juli|oktober|dezember"
    "|janvier|février|mars|avril|juin|juillet|août|septembre|octobre|novembre|décembre"
    "|enero|febrero|marzo|abril|mayo|junio|julio|agosto|septiembre|octubre|noviembre|diciembre"
    "|janeiro|fevereiro|março|maio|junho|julho|setembro|outubro|dezembro"
    "|gennaio|febbraio|aprile|maggio|giugno|luglio|settembre|ottobre|novembre|dicembre"
    "|januari|februari|maart|mei|augustus"
    "|января|февраля|марта|апреля|мая|июня|июля|августа|сентября|октября|ноября|декабря"
)
_UNITS_Y = "k|m|bn|km|kg|g|mg|ml|l|cm|mm|h|min|ms|gb|mb|tb|kb|px|litres|liters|grams|meters|metres"
"""Units after a bare 1800–2199 number that make it a quantity, not a year ("weighs 2040 g",
cognee#1831); "s" is left out ("the 1990 s" is rare, "in 2021 s…" is not a unit)."""
_WEEKDAYS = "monday|tuesday|wednesday|thursday|friday|saturday|sunday"
_ORD = "(?:st|nd|rd|th|\\.)?"
_DATE = "|".join(
    [
        r"\d{4}-\d{1,2}-\d{1,2}(?:[t ]\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:z|[+-]\d{2}:?\d{2})?)?",
        r"\d{1,4}\s*[年년](?:\s*\d{1,2}\s*[月월](?:\s*\d{1,2}\s*[日일])?)?",
        r"\d{1,2}\s*[月월]\s*\d{1,2}\s*[日일]",
        rf"{_NB}\d{{1,2}}[/.]\d{{1,2}}[/.]\d{{2,4}}{_NA}",
        rf"{_NB}(?:{_MONTHS})\.?\s+\d{{1,2}}{_ORD}(?:,?\s+\d{{4}})?(?!\d)",
        rf"{_NB}\d{{1,2}}{_ORD}\s+(?:of\s+|de\s+)?(?:{_MONTHS})(?:,?\s+(?:de\s+)?\d{{4}})?{_NA}",
        rf"{_NB}(?:{_MONTHS})\s+(?:de\s+)?\d{{4}}{_NA}",
        rf"{_NB}\d{{1,2}}:\d{{2}}(?::\d{{2}})?(?:\s*[ap]\.?m\.?)?{_NA}",
        rf"{_NB}\d{{1,2}}\s*[ap]\.?m\.?{_NA}",
        rf"{_NB}(?:{_WEEKDAYS}){_NA}",
        rf"{_NB}(?:1[89]\d\d|2[01]\d\d)(?![0-9{_L}_]|[.,]\d|\s?(?:%|°|(?:{_UNITS_Y}){_NA}))",
    ]
)
"""Dates and times: ISO 8601, CJK (年月日), d/m/y, month names (en de fr es pt it nl ru),
clock times, English weekdays, and a bare year 1800–2199 not followed by a unit (a heuristic:
"in 2021", not "2040 g")."""

_LABELS = (
    "note|notes|ticket|row|order|item|issue|case|invoice|entry|record|line|page|step|id|no"
    "|nr|nº|n°|number|ref|req|request|job|run|build|task|log|message|msg"
    "|notiz|zeile|bestellung|rechnung|eintrag|vorgang|nummer"
    "|ligne|commande|facture|entrée|numéro|dossier"
    "|nota|fila|pedido|factura|entrada|número|caso"
)
_LABELLED = (
    rf"{_NB}(?:{_LABELS})\.?\s?(?:#|no\.?\s?|nr\.?\s?|n[º°]\s?|:)?\s?\d+{_NA}"
    r"|(?:注文番号|注文|チケット|番号|ノート|メモ|工单|订单|訂單|票号|编号|編號|笔记|筆記|第)\s?#?\d+"
)
"""A number after a label word (en de fr es, ja zh) is an identifier of one event or record,
not a value: "(note 159)" / "(note 1594)" are two notes, never a changed number to reconcile.
Hand-picked labels of the record kinds agents log (notes, tickets, rows, orders …)."""

_UNITS = "st|nd|rd|th|k|m|bn|km|kg|g|mg|ml|l|cm|mm|h|min|s|ms|x|gb|mb|tb|kb|px"
_ID = "|".join(
    [
        r"(?:https?://|www\.)[^\s<>\"']+[^\s<>\"'.,;:!?)\]]",  # URL
        r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+",  # e-mail
        r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",  # UUID
        rf"{_NB}v\d+(?:\.\d+)*(?:[-+][0-9a-z.]+)?{_NA}",  # v2, v1.4.0-rc1
        rf"(?<![\w.])\d+(?:\.\d+){{2,}}(?:[-+][0-9a-z.]+)?(?!{_AW}|\.\d)",  # 1.2.3
        rf"\$[a-z]{{1,5}}{_NA}",  # ticker
        rf"{_NB}#[0-9{_L}_][0-9{_L}_-]*",  # #260, #general (not the # of C#)
        rf"(?<![{_L}0-9_-])[a-z][a-z0-9]*-\d+{_NA}",  # PR-480, abc-123
        rf"{_NB}(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{{7,64}}{_NA}",  # hash
        _LABELLED,  # note 159, ticket #12, row 4, Bestellung Nr. 5, 注文番号 12
    ]
)
_NUMBER = (
    rf"(?<![0-9{_L}_.])(?:[+-](?=[$€£¥₹]?\d))?[$€£¥₹]?\d+(?:[.,]\d+)*"
    rf"(?:\s?%|°[cf]?|[€£¥₹]|(?:{_UNITS}){_NA})?(?!{_AW})"
)
_CODE = rf"{_NB}(?=[0-9{_L}_]*\d)(?=[0-9{_L}_]*[{_L}])[0-9{_L}][0-9{_L}_]*{_NA}"
ATOM_RE = re.compile(f"(?P<date>{_DATE})|(?P<id>{_ID})|(?P<number>{_NUMBER})|(?P<code>{_CODE})")
"""The fact atoms cut out of a text before its cues are matched: a date, an identifier, a
number, a code (the groups name the kind)."""
ATOM_HINT_RE = re.compile(rf"\d|https?://|www\.|@|\$|#|[0-9a-f]{{8}}-|{_WEEKDAYS}")
"""What every alternative of :data:`ATOM_RE` needs somewhere in its match: a digit, or a
URL's scheme or ``www.``, an e-mail's ``@``, a ticker's ``$``, a tag's ``#``, a UUID's first
group, a weekday name. A text without any of them holds no atom, and ``scan`` skips the
protection pass (a search at every position of ~30 alternatives: most of a parse's time)."""

_EMOJI_BASE = "\U0001f000-\U0001faff\u2600-\u27bf\u2b00-\u2bff\u2300-\u23ff"
_EMOJI = (
    f"(?:[\U0001f1e6-\U0001f1ff]{{2}}|[{_EMOJI_BASE}])"
    f"(?:[\ufe0f\U0001f3fb-\U0001f3ff]|\u200d[{_EMOJI_BASE}])*"
)
_TOKEN = re.compile(
    r"\x00(?P<atom>\d+)\x00"
    f"|(?P<emoji>{_EMOJI})"
    rf"|(?P<symword>[0-9{_L}]+(?:\+\+|#)(?![0-9{_L}])|(?<![0-9{_L}])[{_L}]\+(?![0-9{_L}+]))"
    f"|(?P<gram>[{_NOSPACE}]+)"
    r"|(?P<word>[^\W\d_]+(?:'[^\W\d_]+)*)"
    r"|(?P<digits>\d+)"
    r"|(?P<other>[^\w\s])"
)

# English contractions, expanded so "doesn't" carries an explicit "not"; French "n'" → "ne ".
_CONTRACTIONS = [
    # (a literal every match contains, so the regex runs only on texts holding it; pattern)
    ("won't", re.compile(r"\bwon't\b"), "will not"),
    ("can't", re.compile(r"\bcan't\b"), "can not"),
    ("cannot", re.compile(r"\bcannot\b"), "can not"),
    ("n't", re.compile(r"n't\b"), " not"),
    ("'re", re.compile(r"'re\b"), " are"),
    ("'s", re.compile(r"'s\b"), ""),
    ("'ve", re.compile(r"'ve\b"), " have"),
    ("'ll", re.compile(r"'ll\b"), " will"),
    ("'d", re.compile(r"'d\b"), " would"),
    ("'m", re.compile(r"'m\b"), " am"),
    ("n'", re.compile(r"(?<!\w)n'(?=[^\W\d_])"), "ne "),
]

_IDIOMS_RE = re.compile(
    r"\b(?:can not wait|no problem|no worries|long time no (?:see|talk|chat)|no doubt|not only"
    r"|never mind|no matter|never been better|could not be happier|can not thank)\b"
)
"""English negation words that do not negate a fact (LoCoMo dialog: "can't wait!")."""

_NUMBER_WORDS = {
    "zero": "0",
    "one": "1",
    "two": "2",
    "three": "3",
    "four": "4",
    "five": "5",
    "six": "6",
    "seven": "7",
    "eight": "8",
    "nine": "9",
    "ten": "10",
    "eleven": "11",
    "twelve": "12",
    "twenty": "20",
    "thirty": "30",
    "forty": "40",
    "fifty": "50",
    "hundred": "100",
}
_THOUSANDS = re.compile(r"^([+-]?[$€£¥₹]?)(\d{1,3}(?:,\d{3})+)((?:\.\d+)?)(.*)$")


def fold(text: str) -> str:
    """NFKC + casefold, typographic quotes and the minus sign unified, whitespace collapsed,
    English contractions and French ``n'`` expanded, English negation idioms removed.

    This is the analysis form only; the exact-duplicate key is
    :func:`consolidation.text.normalize_text`.
    """
    t = unicodedata.normalize("NFKC", text).casefold()
    t = t.replace("\u2019", "'").replace("\u2018", "'").replace("\u2212", "-")
    for lit, rx, rep in _CONTRACTIONS:
        if lit in t:
            t = rx.sub(rep, t)
    if "no" in t or "ne" in t:  # every idiom holds "no" or "never"
        t = _IDIOMS_RE.sub(" ", t)
    return " ".join(t.split())


def grams(run: str) -> list[str]:
    """Bigrams of the characters of a run of a script without spaces (the run itself when it
    is one character). A combining mark (Thai vowel and tone marks) stays with its base."""
    chars: list[str] = []
    for ch in run:
        if chars and unicodedata.category(ch).startswith("M"):
            chars[-1] += ch
        else:
            chars.append(ch)
    if len(chars) < 2:
        return ["".join(chars)] if chars else []
    return [chars[i] + chars[i + 1] for i in range(len(chars) - 1)]


def _number_value(raw: str) -> str:
    raw = raw.replace(" ", "")
    m = _THOUSANDS.match(raw)
    if m:
        return m.group(1) + m.group(2).replace(",", "") + m.group(3) + m.group(4)
    return raw.replace(",", ".")


def _emoji_value(raw: str) -> str:
    return raw.replace("\ufe0f", "")  # presentation selector only; skin tones are kept


@dataclass(frozen=True)
class Scan:
    """A text taken apart.

    - ``tokens``: ``(kind, value)`` in text order; ``kind`` is ``"word"`` (folded, unstemmed),
      ``"gram"`` (a character bigram), or an atom kind (:data:`ATOM_KINDS`); cues are removed.
    - ``cues``: the negation/past-state cues found (:func:`consolidation.cues.find_cues`).
    - ``rest``: the folded text with atoms and cues taken out (for verb/tense markers).
    """

    tokens: tuple[tuple[str, str], ...]
    cues: tuple[CueHit, ...]
    rest: str

    def atoms(self, kind: str) -> frozenset[str]:
        """Values of the atoms of ``kind`` (``"number"``, ``"date"``, ``"id"``, …)."""
        return frozenset(v for k, v in self.tokens if k == kind)


def _masked(folded: str) -> tuple[str, list[tuple[str, str]]]:
    """``folded`` with each fact atom replaced by ``" \\x00k\\x00 "`` (``k`` its index) and the
    atoms as ``(kind, value)``."""
    atoms: list[tuple[str, str]] = []

    def protect(m: re.Match[str]) -> str:
        kind = m.lastgroup or "id"
        raw = m.group(0)
        if kind == "code":
            kind = "id"
        value = _number_value(raw) if kind == "number" else " ".join(raw.split())
        atoms.append((kind, value))
        return f" \x00{len(atoms) - 1}\x00 "

    masked = ATOM_RE.sub(protect, folded) if ATOM_HINT_RE.search(folded) else folded
    return masked, atoms


def cue_hits(folded: str) -> list[CueHit]:
    """The negation and past-state cues of a text in text order, given ``folded`` =
    :func:`fold` of it: exactly :func:`scan`'s ``cues``, without taking the rest of the text
    apart into tokens (a third of the cost)."""
    return find_cues(_masked(folded)[0])[0]


def scan(text: str) -> Scan:
    """Take ``text`` apart into tokens, fact atoms and cues (see :class:`Scan`).

    Atoms are cut out before cues are matched, so a date such as "3 mai 2024" is never read as
    the Italian cue "mai". Never raises; an empty text gives an empty scan.
    """
    masked, atoms = _masked(fold(text))
    hits, rest = find_cues(masked)
    rest = _NOSPACE_RUN.sub(lambda m: f" {m.group(0)} ", rest)
    tokens: list[tuple[str, str]] = []
    for m in _TOKEN.finditer(rest):
        kind = m.lastgroup
        raw = m.group(0)
        if kind == "atom":
            tokens.append(atoms[int(m.group("atom"))])
        elif kind == "emoji":
            tokens.append(("emoji", _emoji_value(raw)))
        elif kind == "symword":
            tokens.append(("symbol", raw))
        elif kind == "gram":
            tokens.extend(("gram", g) for g in grams(raw))
        elif kind == "word":
            num = _NUMBER_WORDS.get(raw)
            tokens.append(("number", num) if num else ("word", raw))
        elif kind == "digits":
            tokens.append(("number", raw))
        elif unicodedata.category(raw).startswith("S"):
            tokens.append(("symbol", raw))
    plain = _TOKEN.sub(lambda m: " " if m.lastgroup == "atom" else m.group(0), rest)
    return Scan(tuple(tokens), tuple(hits), " ".join(plain.split()))
