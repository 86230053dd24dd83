"""Qualifiers and update markers, as data: one row per phrase, each with its language and source.

A **qualifier** is part of the fact it qualifies: "works remotely until June" is not "works
remotely", "drinks coffee on weekdays" is not "drinks coffee", "plans to move" is not "moved",
"my sister likes jazz" is not "I like jazz", "some tests pass" is not "all tests pass". Kinds:

- ``time_limit``: until, through, for now, temporarily (de *bis*, fr *jusqu'à*, es *hasta*,
  ja *まで*, zh *直到* …);
- ``condition``: if, when, on weekdays, when travelling, unless, only …;
- ``modality``: wants to, plans to, might, would like … (intent or possibility, not a fact);
- ``subject``: a relative or another person named as the subject (my sister, mein Bruder …);
- ``quantifier``: all, some, none, every, always, sometimes ….

:func:`consolidation.judgment.judge_pair` never calls two texts whose qualifier sets differ
``"same"`` (a merge would drop one); an older time-limited statement and a newer one without
the limit are an update (the newer wins), not a duplicate.

An **update marker** says a statement replaces an earlier one: "no longer", "now", "moved from
… to …", "switched to", "upgraded to", "changed to", "instead of", "correction", "actually" and
their equivalents in de, fr, es, ja, zh. A candidate pair about the same subject and attribute
with such a marker is reconciled (newer wins) or raised as a conflict, never left alone.

Rows are matched on text folded by :func:`consolidation.atoms.fold` (NFKC + casefold, English
``n't`` expanded); ``match`` is ``"word"`` (word boundaries) or ``"substring"`` (Chinese and
Japanese, written without spaces). Sources: each row names the English Wiktionary entry
(``wiktionary:<page>``) documenting the sense. The table is a heuristic: a phrase missing here
makes a pair look *less* different (so a qualified and an unqualified text could still merge);
a phrase that is a qualifier in one language and a content word in another can only keep two
texts apart — the safe direction.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from .phrases import PhraseIndex

__all__ = [
    "QUALIFIERS",
    "QUALIFIER_KINDS",
    "UPDATE_MARKERS",
    "PhraseRow",
    "marker_index",
    "qualifiers",
    "update_markers",
]

QUALIFIER_KINDS = ("time_limit", "condition", "modality", "subject", "quantifier")


@dataclass(frozen=True)
class PhraseRow:
    """One phrase: ``lang`` (ISO 639-1), folded ``phrase``, ``kind``, ``match``
    (``"word"``/``"substring"``) and ``source``."""

    lang: str
    phrase: str
    kind: str
    match: str
    source: str


def _rows(lang: str, kind: str, entries: str, match: str = "word") -> list[PhraseRow]:
    """Rows from ``"phrase=page; phrase"`` (the source page defaults to the phrase)."""
    out = []
    for item in entries.split(";"):
        phrase, _, page = item.strip().partition("=")
        if phrase.strip():
            src = f"wiktionary:{(page or phrase).strip()}"
            out.append(PhraseRow(lang, phrase.strip(), kind, match, src))
    return out


_T, _C, _M, _SU, _Q, _SUB = (
    "time_limit",
    "condition",
    "modality",
    "subject",
    "quantifier",
    "substring",
)

QUALIFIERS: tuple[PhraseRow, ...] = tuple(
    # English
    _rows(
        "en",
        _T,
        "until; till; through=through; for now=for now; temporarily; for the time being;"
        " until further notice=until further notice; for the moment=for the moment",
    )
    + _rows(
        "en",
        _C,
        "if; when; whenever; unless; except; only; on weekdays=weekday; on weekends=weekend;"
        " at weekends=weekend; when travelling=travel; when traveling=travel;"
        " while travelling=travel",
    )
    + _rows(
        "en",
        _M,
        "wants to=want; plans to=plan; planning to=plan; might; may; could; would like=would;"
        " hopes to=hope; intends to=intend; is going to=going to; considering=consider;"
        " thinking about=think; should; must; maybe; perhaps; probably",
    )
    + _rows(
        "en",
        _SU,
        "sister; brother; mother; father; mom; mum; dad; wife; husband; son; daughter;"
        " girlfriend; boyfriend; partner; friend; boss; colleague; coworker; parents=parent;"
        " grandmother; grandfather; aunt; uncle; cousin; neighbor; neighbour",
    )
    + _rows(
        "en",
        _Q,
        "all; every; everything; some; none; any; most; few; many; each; always; sometimes;"
        " often; usually; rarely; occasionally; mostly",
    )
    # German
    + _rows(
        "de",
        _T,
        "bis; vorübergehend; vorerst; vorläufig; befristet; bis auf weiteres=bis auf Weiteres;"
        " zurzeit",
    )
    + _rows(
        "de",
        _C,
        "wenn; falls; außer; nur; unter der woche=Woche; am wochenende=Wochenende;"
        " auf reisen=Reise; werktags",
    )
    + _rows(
        "de",
        _M,
        "möchte=mögen; plant=planen; will=wollen; könnte=können; vielleicht; wahrscheinlich;"
        " soll=sollen; muss=müssen; überlegt=überlegen; vor zu=vorhaben",
    )
    + _rows(
        "de",
        _SU,
        "schwester=Schwester; bruder=Bruder; mutter=Mutter; vater=Vater; frau=Frau;"
        " ehemann=Ehemann; sohn=Sohn; tochter=Tochter; freund=Freund; freundin=Freundin;"
        " kollege=Kollege; kollegin=Kollegin; eltern=Eltern; chef=Chef",
    )
    + _rows(
        "de",
        _Q,
        "alle=all; jeder; jede=jeder; einige=einig; manche=manch; immer; manchmal; oft; selten;"
        " meistens",
    )
    # French
    + _rows(
        "fr",
        _T,
        "jusqu'à=jusqu'à; jusqu'au=jusqu'à; jusqu'en=jusqu'à; temporairement;"
        " pour l'instant=pour l'instant; pour le moment=pour le moment; provisoirement",
    )
    + _rows(
        "fr",
        _C,
        "si; quand; lorsque; sauf; seulement; en semaine=semaine; le week-end=week-end;"
        " en voyage=voyage",
    )
    + _rows(
        "fr",
        _M,
        "veut=vouloir; voudrait=vouloir; prévoit=prévoir; compte=compter; pourrait=pouvoir;"
        " peut-être; envisage=envisager; devrait=devoir; doit=devoir; probablement",
    )
    + _rows(
        "fr",
        _SU,
        "sœur; frère; mère; père; femme; mari; fils; fille; ami; amie; collègue; parents=parent;"
        " patron",
    )
    + _rows(
        "fr",
        _Q,
        "tous=tout; toutes=tout; chaque; quelques=quelque; certains=certain; toujours; parfois;"
        " souvent; rarement; la plupart=plupart",
    )
    # Spanish
    + _rows(
        "es",
        _T,
        "hasta; temporalmente; por ahora=por ahora; de momento=momento; por el momento=momento;"
        " provisionalmente",
    )
    + _rows(
        "es",
        _C,
        "si; cuando; salvo; excepto; solo; sólo; entre semana=semana;"
        " los fines de semana=fin de semana; de viaje=viaje",
    )
    + _rows(
        "es",
        _M,
        "quiere=querer; quisiera=querer; planea=planear; piensa=pensar; podría=poder;"
        " quizás; quizá; tal vez=tal vez; debería=deber; debe=deber; probablemente",
    )
    + _rows(
        "es",
        _SU,
        "hermana; hermano; madre; padre; esposa; esposo; marido; hijo; hija; amigo; amiga;"
        " colega; padres=padre; jefe",
    )
    + _rows(
        "es",
        _Q,
        "todos=todo; todas=todo; cada; algunos=alguno; algunas=alguno; siempre;"
        " a veces=vez; a menudo=menudo; rara vez=vez; la mayoría=mayoría",
    )
    # Japanese (no spaces)
    + _rows("ja", _T, "まで; 一時的; 当分; 今のところ=今の所; しばらく", _SUB)
    + _rows("ja", _C, "なら; たら; 場合; 平日; 週末; 出張中=出張; 旅行中=旅行; だけ", _SUB)
    + _rows("ja", _M, "たい; 予定; かもしれない; つもり; 検討; はず", _SUB)
    + _rows("ja", _SU, "姉; 妹; 兄; 弟; 母; 父; 妻; 夫; 息子; 娘; 友達; 同僚; 両親; 上司", _SUB)
    + _rows("ja", _Q, "すべて; 全部; いくつか; 一部; いつも; 時々; たまに; ほとんど", _SUB)
    # Chinese (no spaces; simplified and traditional)
    + _rows("zh", _T, "直到; 暂时=暫時; 暫時; 目前; 截至; 为止=為止; 為止", _SUB)
    + _rows(
        "zh", _C, "如果; 要是; 的时候=時候; 的時候=時候; 周末=週末; 週末; 工作日; 出差时=出差", _SUB
    )
    + _rows("zh", _M, "想要; 打算; 计划=計劃; 計劃; 可能; 也许=也許; 也許; 应该=應該; 應該", _SUB)
    + _rows(
        "zh",
        _SU,
        "姐姐; 妹妹; 哥哥; 弟弟; 妈妈=媽媽; 媽媽; 爸爸; 妻子; 丈夫; 儿子=兒子; 兒子; 女儿=女兒;"
        " 女兒; 朋友; 同事; 父母; 老板=老闆",
        _SUB,
    )
    + _rows(
        "zh",
        _Q,
        "所有; 全部; 一些; 有些; 每个=每個; 每個; 总是=總是; 總是; 有时=有時; 有時; 经常=經常",
        _SUB,
    )
)
"""The qualifier table (every kind in en de fr es ja zh)."""

UPDATE_MARKERS: tuple[PhraseRow, ...] = tuple(
    _rows(
        "en",
        "update",
        "no longer; now; currently; anymore; moved from=move; moved to=move; switched to=switch;"
        " switched from=switch; upgraded to=upgrade; upgraded from=upgrade; changed to=change;"
        " changed from=change; instead of=instead of; instead; correction; actually;"
        " updated to=update;"
        " replaced=replace; migrated to=migrate; not anymore=anymore; these days=these days",
    )
    + _rows(
        "de",
        "update",
        "nicht mehr=mehr; jetzt; inzwischen; mittlerweile; nun; stattdessen; statt; anstatt;"
        " gewechselt=wechseln; umgestiegen=umsteigen; umgezogen=umziehen; geändert=ändern;"
        " korrektur=Korrektur; berichtigung=Berichtigung",
    )
    + _rows(
        "fr",
        "update",
        "ne … plus=plus; désormais; maintenant; dorénavant; au lieu de=au lieu de;"
        " plutôt que=plutôt;"
        " passé à=passer; déménagé=déménager; changé=changer; correction; rectification",
    )
    + _rows(
        "es",
        "update",
        "ya no=ya; ahora; actualmente; en lugar de=en lugar de; en vez de=en vez de;"
        " cambió a=cambiar; se cambió=cambiar; se mudó=mudar; pasó a=pasar; corrección;"
        " actualizó=actualizar",
    )
    + _rows(
        "ja",
        "update",
        "今は=今; 現在; もう; 変更; 変えた=変える; 乗り換え=乗り換える; 引っ越し=引っ越す;"
        " ではなく; じゃなくて; 訂正; 代わりに=代わり",
        _SUB,
    )
    + _rows(
        "zh",
        "update",
        "不再; 现在=現在; 現在; 改为=改為; 改為; 换成=換成; 換成; 改成; 搬到; 而不是; 更正;"
        " 升级到=升級; 升級到",
        _SUB,
    )
)
"""The update-marker table (en de fr es ja zh)."""

_GAP = "…"


@lru_cache(maxsize=8)
def _compiled(table: str) -> tuple[PhraseIndex, list[tuple[re.Pattern[str], PhraseRow]]]:
    """The rows of ``table`` (``"q"``: qualifiers, ``"u"``: update markers), longest phrase
    first, each with its regex, and an index of their first pieces (a row can match only where
    its first piece occurs)."""
    rows = QUALIFIERS if table == "q" else UPDATE_MARKERS
    out = []
    for r in sorted(rows, key=lambda r: -len(r.phrase)):
        pieces = [re.escape(p.strip()) for p in r.phrase.split(_GAP)]
        if r.match == "word":
            pieces = [rf"(?<!\w){p}(?!\w)" for p in pieces]
            gap = r"(?:\W+\w+){0,4}?\W+"
        else:
            gap = r".{0,12}?"
        out.append((re.compile(gap.join(pieces)), r))
    firsts = [row.phrase.split(_GAP)[0].strip() for _, row in out]
    index = PhraseIndex(firsts, [row.match == "word" for _, row in out])
    return index, out


def marker_index() -> PhraseIndex:
    """An index of the update markers' first pieces: :func:`update_markers` finds none in a
    text where it finds none."""
    return _compiled("u")[0]


def _find(folded: str, table: str) -> frozenset[PhraseRow]:
    index, rows = _compiled(table)
    found = set()
    for k in index.present(folded):
        rx, row = rows[k]
        if rx.search(folded):
            found.add(row)
    return frozenset(found)


@lru_cache(maxsize=16384)
def qualifiers(folded: str) -> frozenset[tuple[str, str]]:
    """``{(kind, source)}`` of the qualifiers in ``folded`` text (from
    :func:`consolidation.atoms.fold`). Two phrases with one source page (``"on weekdays"``,
    ``"weekday"``) count as one qualifier, so a spelling variant is not a difference."""
    return frozenset((r.kind, r.source) for r in _find(folded, "q"))


@lru_cache(maxsize=16384)
def update_markers(folded: str) -> frozenset[str]:
    """The update-marker phrases in ``folded`` text (table rows, :data:`UPDATE_MARKERS`), but
    not one inside a qualifier found there ("now" in "for now", "ahora" in "por ahora": a time
    limit, not a replacement)."""
    markers = _find(folded, "u")
    if not markers:
        return frozenset()  # most texts: no marker, no qualifier to read
    quals = [r.phrase for r in _find(folded, "q")]
    return frozenset(r.phrase for r in markers if not any(r.phrase in q for q in quals))
