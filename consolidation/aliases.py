"""Aliases, abbreviations and synonyms, as data: one row per variant, each with its source.

A *lossless duplicate* (:func:`consolidation.judgment.judge_pair`) is a text whose content words
the other text covers; "lives in NYC" is covered by "lives in New York City" only when a table
says NYC *is* New York City. Each row maps a variant to a canonical form, both folded; the
variant is replaced before tokenising (:func:`canonical`), so both texts carry the same token.

- ``case``: ``"exact"`` for abbreviations matched only in capitals as written ("LA" is Los
  Angeles, "la" is a French article), ``"fold"`` for words and names matched after case folding.
- A variant listed with two canons (German and Spanish "uni") is not replaced; each canon is
  replaced by it instead, so either language's pair still compares equal.
- Sources: the English Wiktionary entry of the variant (``wiktionary:<page>``) that gives the
  sense. A name spelled differently (Jon / John, Steven / Stephen) is never a row here: two
  spellings are two people until a person says otherwise (a standing decision).

Languages: en, de, fr, es, plus city names with their common abbreviation. Cross-language
duplicates ("likes tea" / "mag Tee") are never matched by this table: only the optional LLM
judge (:mod:`consolidation.llm_judge`) may call those the same.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

__all__ = ["ALIASES", "AliasRow", "canonical"]


@dataclass(frozen=True)
class AliasRow:
    """``lang``, ``variant`` (as matched), ``canon`` (folded replacement), ``case`` and
    ``source``."""

    lang: str
    variant: str
    canon: str
    case: str
    source: str


def _rows(lang: str, case: str, entries: str) -> list[AliasRow]:
    """Rows from ``"variant>canon; variant>canon"`` (source: the variant's Wiktionary page)."""
    out = []
    for item in entries.split(";"):
        variant, _, canon = item.strip().partition(">")
        if variant.strip():
            v = variant.strip()
            out.append(AliasRow(lang, v, canon.strip(), case, f"wiktionary:{v}"))
    return out


_X, _F = "exact", "fold"

ALIASES: tuple[AliasRow, ...] = tuple(
    # city and country abbreviations (English usage)
    _rows(
        "en",
        _X,
        "NYC>new york city; NY>new york; SF>san francisco; LA>los angeles; DC>washington dc;"
        " UK>united kingdom; U.K.>united kingdom; US>united states; U.S.>united states;"
        " USA>united states; U.S.A.>united states; UAE>united arab emirates; EU>european union;"
        " JS>javascript; TS>typescript; K8s>kubernetes; k8s>kubernetes; Postgres>postgresql;"
        " ML>machine learning; AI>artificial intelligence",
    )
    + _rows(
        "en",
        _F,
        "the big apple>new york city; philly>philadelphia;"
        " vegas>las vegas; postgres>postgresql; mom>mother; mum>mother;"
        " dad>father; tv>television; phone>telephone; bike>bicycle; fridge>refrigerator;"
        " flat>apartment; holiday>vacation; holidays>vacation; autumn>fall; colour>color;"
        " favourite>favorite; travelling>traveling; doc>doctor",
    )
    # German
    + _rows(
        "de",
        _X,
        "BRD>deutschland; Hbf>hauptbahnhof; FFM>frankfurt am main",
    )
    + _rows(
        "de",
        _F,
        "uni>universität; kita>kindertagesstätte; kfz>kraftfahrzeug; auto>kraftfahrzeug;"
        " handy>mobiltelefon; frankfurt a. m.>frankfurt am main;"
        " frankfurt/main>frankfurt am main",
    )
    # French
    + _rows("fr", _X, "RATP>ratp; SNCF>sncf; ÉU>états-unis; USA>états-unis")
    + _rows(
        "fr",
        _F,
        "fac>faculté; appart>appartement; resto>restaurant; ciné>cinéma; vélo>bicyclette;"
        " télé>télévision; portable>téléphone portable",
    )
    # Spanish
    + _rows(
        "es",
        _X,
        "EE. UU.>estados unidos; EEUU>estados unidos; CDMX>ciudad de méxico; DF>ciudad de méxico",
    )
    + _rows(
        "es",
        _F,
        "uni>universidad; finde>fin de semana; peli>película; cole>colegio; bici>bicicleta;"
        " tele>televisión; celu>celular; móvil>teléfono móvil",
    )
)
"""The alias table (en de fr es)."""


@lru_cache(maxsize=1)
def _compiled() -> tuple[
    re.Pattern[str] | None, dict[str, str], re.Pattern[str] | None, dict[str, str]
]:
    exact = {r.variant: r.canon for r in ALIASES if r.case == _X and r.variant != r.canon}
    fold: dict[str, str] = {}
    canons: dict[str, set[str]] = {}
    for r in ALIASES:
        if r.case == _F and r.variant != r.canon:
            canons.setdefault(r.variant, set()).add(r.canon)
    for variant, targets in canons.items():
        if len(targets) == 1:
            fold[variant] = next(iter(targets))
        else:  # "uni": universität (de), universidad (es): each canon becomes the variant
            for t in targets:
                fold[t] = variant

    def rx(keys: dict[str, str]) -> re.Pattern[str] | None:
        if not keys:
            return None
        alts = "|".join(re.escape(k) for k in sorted(keys, key=len, reverse=True))
        return re.compile(rf"(?<![\w.])(?:{alts})(?![\w]|\.\w)")

    return rx(exact), exact, rx(fold), fold


@lru_cache(maxsize=16384)
def canonical(text: str) -> str:
    """``text`` with every table variant replaced by its canonical form (exact-case variants
    first, on the text as written; then folded variants, on the case-folded text). The result
    is case-folded where a folded variant matched, else unchanged; it is an analysis form, never
    shown or stored. ``canonical("Lives in NYC")`` → ``"Lives in new york city"``."""
    ex_rx, exact, fo_rx, fold = _compiled()
    out = ex_rx.sub(lambda m: exact[m.group(0)], text) if ex_rx else text
    if fo_rx is not None:
        low = out.casefold()
        if fo_rx.search(low):
            out = fo_rx.sub(lambda m: fold[m.group(0)], low)
    return out
