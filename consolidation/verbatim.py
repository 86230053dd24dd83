"""Raw symbols a merge may never drop: code, commands, paths, files, operators, flags, ids.

The analysis tokens of :mod:`consolidation.atoms` fold and split text so paraphrases compare
equal; for a few kinds of token that folding is wrong, because one character is the fact:
``rm -rf ~/cache`` and ``rm -rf /cache`` delete different directories, ``x >= 5`` and ``x > 5``
are different conditions, ``id_rsa`` is a private key and ``id_rsa.pub`` its public half,
``config.yaml.bak`` is not ``config.yaml``, ``src/app.py`` is not ``/src/app.py``.

:func:`verbatim_tokens` takes those tokens from the text after NFKC and case folding only (no
other normalisation), and :func:`verbatim_difference` says whether two texts differ in one
(the tokens are compared as strings, whatever kind found them).
:func:`consolidation.judgment.judge_pair` never calls such a pair ``"same"``: any difference in
a verbatim token is a different fact, so both memories are kept (an update marker can still
make the pair a reconcile or a conflict, e.g. "upgraded to v1.3").

Kinds (checked in this order, so a path is not also read as a file name):

- ``code``: every word of a backtick span (Markdown inline code);
- ``url`` and ``email``;
- ``path``: a token with a ``/`` or ``\\`` (``~/cache``, ``./run.sh``, ``/etc/hosts``,
  ``src/app.py``, ``C:\\Temp``), kept with its leading ``~``, ``.``, ``/``;
- ``flag``: ``-x`` / ``--long-flag`` after a space or at the start;
- ``file``: a name with an extension (``config.yaml.bak``, ``id_rsa.pub``, ``main.rs``);
- ``ident``: a word with an underscore (``id_rsa``, ``max_tokens``);
- ``version``: ``v2``, ``1.4.0``, ``3.11`` after a name;
- ``unit``: a number with a unit (``5 ms``, ``10gb``, ``3 °C``), the space removed;
- ``op``: a comparison, assignment, arrow or logical operator (``>=``, ``!=``, ``->``, ``&&``,
  ``>``, ``<``, ``=``).

Trailing sentence punctuation is not part of a token ("... in config.yaml." → ``config.yaml``).
Heuristics (a regular expression per kind, not a parser): a token missed here is still compared
by the analysis tokens; a token matched wrongly (an abbreviation such as "e.g." read as a file
name) can only make two texts look different, which keeps both memories — the safe direction.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

__all__ = ["verbatim_difference", "verbatim_tokens"]

_UNITS = (
    "ms|s|sec|min|h|hr|hrs|kb|mb|gb|tb|kib|mib|gib|tib|b|kbps|mbps|gbps|hz|khz|mhz|ghz|px|pt|em"
    "|rem|mm|cm|m|km|mi|ft|in|kg|g|mg|lb|lbs|oz|l|ml|°c|°f|°|%|v|w|kw|kwh|mah|rpm|fps|dpi"
)
_TRAIL = ".,;:!?)]}\"'"
_KINDS = [
    ("code", r"`[^`\n]+`"),
    ("url", r"(?:https?://|ftp://|www\.)[^\s<>\"'`]+"),
    ("email", r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+"),
    ("path", r"(?<![\w@])(?:~|\.{1,2})?(?:[a-z]:)?[\\/]?(?:[\w.@+-]+[\\/])+[\w.@+-]*"),
    ("path", r"(?<![\w@])(?:~|\.{1,2})?[\\/][\w.@+-]+"),
    ("flag", r"(?<!\S)--?[a-z][\w-]*"),
    ("file", r"(?<![\w.])[\w-]+(?:\.[\w-]+)*\.[a-z][a-z0-9]{0,5}(?![\w.]*\w)"),
    ("ident", r"(?<![\w.])[a-z0-9]+(?:_[a-z0-9]+)+(?![\w])"),
    ("unit", rf"(?<![\w.,])\d+(?:[.,]\d+)?\s?(?:{_UNITS})(?![\w])"),
    ("version", r"(?<![\w.])v\d+(?:\.\d+)*(?:[-+][0-9a-z.]+)?(?![\w])"),
    ("version", r"(?<![\w.,])\d+(?:\.\d+){1,3}(?:[-+][0-9a-z.]+)?(?![\w.,]*\d)"),
    ("op", r"(?:>=|<=|==|!=|=>|->|<-|&&|\|\||≥|≤|≠|(?<![<>=!-])[<>=](?![<>=]))"),
]
_ABBREV = re.compile(r"(?:[a-z]\.)+[a-z]")
_RX = re.compile("|".join(f"(?P<k{i}>{rx})" for i, (_, rx) in enumerate(_KINDS)))


def _fold(text: str) -> str:
    return unicodedata.normalize("NFKC", text).casefold()


@lru_cache(maxsize=16384)
def verbatim_tokens(text: str) -> frozenset[tuple[str, str]]:
    """``{(kind, token)}`` of ``text`` (kinds: module docstring), NFKC + casefold only.

    A version is only read as one when it is not a plain decimal that the analysis tokens
    already compare (``3.5`` stays a number there too: either way a difference keeps both).
    Never raises; memoised (16,384 texts).
    """
    folded = _fold(text)
    out: set[tuple[str, str]] = set()
    for m in _RX.finditer(folded):
        kind = _KINDS[int((m.lastgroup or "k0")[1:])][0]
        tok = m.group(0)
        if kind == "code":
            out.update(("code", w) for w in tok[1:-1].split())
            continue
        if kind != "op":
            tok = tok.rstrip(_TRAIL)
        if kind == "unit":
            tok = tok.replace(" ", "")
        if kind == "file" and _ABBREV.fullmatch(tok):
            continue  # "e.g", "i.e", "a.m": letters and dots, not a file
        if tok:
            out.add((kind, tok))
    return frozenset(out)


def verbatim_difference(a: str, b: str) -> str | None:
    """A short description of the verbatim tokens in which ``a`` and ``b`` differ (``"~/cache
    vs /cache"``), or ``None`` when their verbatim tokens are the same set."""
    ta = {t for _, t in verbatim_tokens(a)}
    tb = {t for _, t in verbatim_tokens(b)}
    if ta == tb:
        return None
    only_a, only_b = sorted(ta - tb), sorted(tb - ta)
    return f"{', '.join(only_a) or '—'} vs {', '.join(only_b) or '—'}"
