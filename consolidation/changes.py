"""Change events, as data: words that report that a state ended or changed, with their sources.

A *change event* is a text such as "Bob moved to Paris", "User switched to Svelte", "Broke up
with Sarah last month", "Ist nach Zürich gezogen" or "The security review has landed": it
reports that something which held before no longer holds. :mod:`consolidation.events` uses
the table to decide what such a text does to an older *state* memory of the same scope.

One row per phrase: ``lang`` (ISO 639-1), folded ``phrase``, ``kind`` and ``match``
(``"word"``: word boundaries, ``"substring"``: anywhere — Japanese and Chinese), ``source``
(the English Wiktionary entry that documents the sense, ``wiktionary:<page>``),
``strict`` (a phrase with common other senses, "left the keys at home", links a state only
through its attributes, never through a shared object word) and ``attributes``: the folded
words of the states the event changes ("moved" changes where one *lives*, "broke up" ends a
*partner*), so an event is linked to a state that names none of its words ("Wohnt in Bern" /
"Ist nach Zürich gezogen"). ``kind``:

- ``"change"``: the state now has another value ("moved", "switched", "upgraded", "extended");
- ``"end"``: the state ended ("broke up", "quit", "left", "cancelled", "landed");
- ``"begin"``: a new state began ("started", "joined"); it changes an older state only when
  it names its attribute and a new value.

Matching is on text folded by :func:`consolidation.atoms.fold`, without language detection.
A missing phrase only means the older state is not linked by the event rule (the other rules
still apply); the languages are those of the update-marker table (en de fr es ja zh).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from .phrases import PhraseIndex

__all__ = [
    "CHANGE_EVENTS",
    "ChangeRow",
    "change_events",
    "event_index",
    "from_span",
    "leading_verbs",
]


@dataclass(frozen=True)
class ChangeRow:
    """One change-event phrase (module docstring): ``lang``, folded ``phrase``, ``kind``
    (``"change"``/``"end"``/``"begin"``), ``match``, ``source`` and ``attributes``."""

    lang: str
    phrase: str
    kind: str
    match: str
    source: str
    attributes: frozenset[str]
    strict: bool = False


_LIVE = "lives live living wohnt wohne lebt habite habites vit vive vivo reside 住んで 住在 住"
_USE = (
    "uses use using prefers prefer likes runs run nutzt benutzt verwendet utilise préfère usa"
    " utiliza prefiere 使って 使用 用"
)
_WORK = "works work job employed member team arbeitet travaille trabaja 勤め 働いて 工作 在"
_PARTNER = (
    "partner girlfriend boyfriend wife husband dating married engaged freundin freund partnerin"
    " copine copain épouse mari novia novio esposa esposo pareja 彼女 彼氏 恋人 女朋友 男朋友 对象"
)
_PLAN = (
    "plan subscription valid validity expires contract licence license abo abonnement suscripción"
    " gültig gültigkeit valable validité válido validez lizenz 契約 订阅"
)
_UNTIL = "until till bis jusqu hasta まで 直到"
_HABIT = "smokes smoke drinks drink raucht fume fuma 吸 抽烟"


def _rows(
    lang: str, kind: str, attrs: str, entries: str, match: str = "word", *, strict: bool = False
) -> list[ChangeRow]:
    """Rows from ``"phrase=page; phrase"`` (the source page defaults to the phrase)."""
    words = frozenset(attrs.split())
    out = []
    for item in entries.split(";"):
        phrase, _, page = item.strip().partition("=")
        if phrase.strip():
            src = f"wiktionary:{(page or phrase).strip()}"
            out.append(ChangeRow(lang, phrase.strip(), kind, match, src, words, strict))
    return out


_C, _E, _B, _S = "change", "end", "begin", "substring"

CHANGE_EVENTS: tuple[ChangeRow, ...] = tuple(
    # English
    _rows("en", _C, _LIVE, "moved=move; relocated=relocate")
    + _rows("en", _C, _USE, "switched=switch; migrated=migrate")
    + _rows("en", _C, _USE, "upgraded=upgrade", strict=True)  # "upgraded some equipment"
    + _rows("en", _C, _PLAN, "extended=extend; renewed=renew", strict=True)
    + _rows("en", _E, _PARTNER, "broke up=break up; split up=split up; divorced=divorce")
    + _rows("en", _E, _WORK + " " + _HABIT, "quit; resigned=resign")
    + _rows("en", _E, _WORK, "left=leave", strict=True)
    + _rows("en", _E, _PLAN, "cancelled=cancel; canceled=cancel")
    + _rows("en", _E, _UNTIL, "landed=land; has landed=land; was merged=merge")
    + _rows("en", _B, _WORK, "started=start; joined=join")
    # German
    + _rows("de", _C, _LIVE, "gezogen=ziehen; umgezogen=umziehen")
    + _rows("de", _C, _USE, "gewechselt=wechseln; umgestiegen=umsteigen")
    + _rows("de", _C, _PLAN, "verlängert=verlängern")
    + _rows("de", _E, _PARTNER, "getrennt=trennen; schluss gemacht=Schluss machen")
    + _rows("de", _E, _WORK, "gekündigt=kündigen; aufgehört=aufhören")
    + _rows("de", _B, _WORK, "angefangen=anfangen; begonnen=beginnen")
    # French
    + _rows("fr", _C, _LIVE, "déménagé=déménager; installé=installer")
    + _rows("fr", _C, _USE, "passé à=passer; changé=changer")
    + _rows("fr", _C, _PLAN, "prolongé=prolonger; prolongée=prolonger")
    + _rows("fr", _E, _PARTNER, "rompu=rompre; séparé=séparer; divorcé=divorcer")
    + _rows("fr", _E, _WORK, "quitté=quitter; démissionné=démissionner")
    + _rows("fr", _E, _PLAN, "annulé=annuler; résilié=résilier")
    + _rows("fr", _B, _WORK, "commencé=commencer; rejoint=rejoindre")
    # Spanish
    + _rows("es", _C, _LIVE, "se mudó=mudar; mudó=mudar; se trasladó=trasladar")
    + _rows("es", _C, _USE, "cambió=cambiar; pasó a=pasar")
    + _rows("es", _C, _PLAN, "extendió=extender; renovó=renovar")
    + _rows("es", _E, _PARTNER, "rompió=romper; terminó con=terminar; se separó=separar")
    + _rows("es", _E, _WORK, "renunció=renunciar")
    + _rows("es", _E, _WORK, "dejó=dejar", strict=True)
    + _rows("es", _E, _PLAN, "canceló=cancelar")
    + _rows("es", _B, _WORK, "empezó=empezar; comenzó=comenzar; se unió=unir")
    # Japanese
    + _rows("ja", _C, _LIVE, "引っ越した=引っ越す; 引っ越し=引っ越す; 移った=移る", _S)
    + _rows("ja", _C, _USE, "乗り換えた=乗り換える; 切り替えた=切り替える", _S)
    + _rows("ja", _E, _PARTNER, "別れた=別れる", _S)
    + _rows("ja", _E, _WORK, "辞めた=辞める; 退職した=退職", _S)
    + _rows("ja", _E, _PLAN, "解約した=解約; キャンセルした=キャンセル", _S)
    + _rows("ja", _B, _WORK, "始めた=始める; 入社した=入社", _S)
    # Chinese
    + _rows("zh", _C, _LIVE, "搬到=搬; 搬家=搬家; 搬去=搬", _S)
    + _rows("zh", _C, _USE, "换成=換成; 換成; 改用=改用; 切换到=切換", _S)
    + _rows("zh", _E, _PARTNER, "分手=分手; 离婚=離婚", _S)
    + _rows("zh", _E, _WORK, "辞职=辭職; 离职=離職", _S)
    + _rows("zh", _E, _PLAN, "取消了=取消", _S)
    + _rows("zh", _B, _WORK, "开始=開始; 加入=加入", _S)
)
"""The change-event table (en de fr es ja zh; from field reports of other memory systems:
"broke up with Sarah", "nach Zürich gezogen", "switched to Svelte", "the security review has
landed")."""


@lru_cache(maxsize=1)
def _compiled() -> tuple[PhraseIndex, list[tuple[re.Pattern[str], ChangeRow]]]:
    out = []
    for r in sorted(CHANGE_EVENTS, key=lambda r: -len(r.phrase)):
        esc = re.escape(r.phrase)
        out.append((re.compile(rf"(?<!\w){esc}(?!\w)" if r.match == "word" else esc), r))
    index = PhraseIndex([row.phrase for _, row in out], [row.match == "word" for _, row in out])
    return index, out


def event_index() -> PhraseIndex:
    """An index of the change-event phrases: :func:`change_events` finds none in a text where
    it finds none."""
    return _compiled()[0]


@lru_cache(maxsize=16384)
def change_events(folded: str) -> tuple[ChangeRow, ...]:
    """The change-event rows found in ``folded`` text (from :func:`consolidation.atoms.fold`),
    longest phrase first; a phrase inside a longer one found ("has landed" / "landed") counts
    once. Memoised per text: a memory's events are computed once, not per pair."""
    found: list[ChangeRow] = []
    index, rows = _compiled()
    for k in index.present(folded):  # the rows whose phrase can match, in table order
        rx, row = rows[k]
        if rx.search(folded) and not any(row.phrase in f.phrase for f in found):
            found.append(row)
    return tuple(found)


_FROM_RE = re.compile(
    r"(?<!\w)(?:from|von|aus|de|desde)\s+(.+?)\s+(?:to|nach|zu|à|a|au|en|hacia)(?!\w)"
    r"|(?<!\w)(?:instead of|rather than|statt|anstatt|au lieu de|plutôt que|en lugar de"
    r"|en vez de)\s+([^,;.]+)|从(.+?)(?:搬到|到|换成|改用)|而不是([^，。,;]+)"
    r"|(.+?)から|(.+?)ではなく"
)


def from_span(folded: str) -> str:
    """The old value an event names ("moved from *Lyon* to Paris", "von Bern nach Zürich",
    "migrated to MySQL instead of *PostgreSQL*", "从上海搬到北京", "東京から大阪に"), folded;
    empty when there is none."""
    m = _FROM_RE.search(folded)
    if not m:
        return ""
    return next((g for g in m.groups() if g), "")


def leading_verbs() -> frozenset[str]:
    """Single-word English, German, French and Spanish change-event phrases ("switched",
    "moved", "quit"): a text that opens with one of them is subjectless ("Switched to Tortoise
    ORM …"), never about a person named "Switched"."""
    return frozenset(r.phrase for r in CHANGE_EVENTS if r.match == "word" and " " not in r.phrase)
