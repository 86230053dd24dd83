"""Negation and past-state cues, as data: one row per cue, each with its language and source.

A cue is a word or phrase that changes what a statement asserts without changing what it is
about: a *negation* flips it ("Sam smokes" / "Sam does not smoke"), a *past-state* cue says it
held before and no longer does ("Sam used to smoke", "no longer", "formerly", "stopped").
Two memories whose texts differ by such a cue are never the same fact.

Rows are matched on text already folded by :func:`consolidation.atoms.fold` (NFKC + casefold,
English ``n't`` and French ``n'`` expanded). ``match`` says how:

- ``"word"``: the phrase with word boundaries on both sides (scripts that use spaces);
- ``"substring"``: anywhere (Chinese, Japanese, Thai and bound Korean endings: no spaces);
- a phrase containing ``…`` is a discontinuous pair ("ne … pas", "not … anymore"): both
  halves within four words (``word``) or twelve characters (``substring``); only the two
  halves are cues, the words between them are content.

``stands_for`` is put back in place of the cue so the rest of the text compares equal: "没有"
("not have") leaves "有" ("have"), Korean "없" ("not exist") leaves "있" ("exist"), English
"hates" leaves "likes" (``"Alice hates jazz"`` is ``"Alice likes jazz"`` negated).

Sources: each row names the English Wiktionary entry (``wiktionary:<page>``) that documents the
word's negating or past-state sense, or the grammar topic for a discontinuous pair. Matching is
language-independent (no language detection): a word that is a cue in one listed language and a
content word in another (Dutch "pas" = "only") can at worst make two texts look different,
which keeps both memories — the safe direction.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from .phrases import PhraseIndex

__all__ = [
    "CUES",
    "DEADLINE_RE",
    "NEGATION",
    "PAST_STATE",
    "POLAR_EMOJI",
    "CueHit",
    "CueRow",
    "cue_index",
    "find_cues",
    "languages",
]

NEGATION = "negation"
PAST_STATE = "past_state"


@dataclass(frozen=True)
class CueRow:
    """One cue: ``lang`` (ISO 639-1), folded ``phrase``, ``kind`` (``"negation"`` or
    ``"past_state"``), ``match`` (``"word"``/``"substring"``), ``source`` and ``stands_for``."""

    lang: str
    phrase: str
    kind: str
    match: str
    source: str
    stands_for: str = ""


def _rows(lang: str, kind: str, match: str, entries: str, stands_for: str = "") -> list[CueRow]:
    """Rows from ``"phrase=source; phrase=source"`` (source defaults to the phrase's page)."""
    out = []
    for item in entries.split(";"):
        item = item.strip()
        if not item:
            continue
        phrase, _, page = item.partition("=")
        phrase = phrase.strip()
        out.append(
            CueRow(lang, phrase, kind, match, f"wiktionary:{(page or phrase).strip()}", stands_for)
        )
    return out


_W, _S, _N, _P = "word", "substring", NEGATION, PAST_STATE

CUES: tuple[CueRow, ...] = tuple(
    # English
    _rows("en", _N, _W, "not; no; never; nor; none; nothing; nobody; no one; neither; without")
    # The negating verb leaves the positive verb in the same form, so the statement keeps its
    # kind ("Dislikes pizza" is a state like "Likes pizza"; "hated" an event like "liked").
    + _rows("en", _N, _W, "dislike; hate", stands_for="like")
    + _rows("en", _N, _W, "dislikes=dislike; hates=hate", stands_for="likes")
    + _rows("en", _N, _W, "disliked=dislike; hated=hate", stands_for="liked")
    + _rows(
        "en",
        _P,
        _W,
        "no longer; not … anymore=anymore; not … any more=any more;"
        " anymore; no more; used to=used to; formerly; former; previously; ex=ex-;"
        " stopped=stop; quit; gave up=give up; in the past=in the past",
    )
    # German
    + _rows(
        "de",
        _N,
        _W,
        "nicht; kein; keine=kein; keinen=kein; keinem=kein; keiner=kein;"
        " keines=kein; nie; niemals; nichts; niemand; ohne",
    )
    + _rows(
        "de",
        _P,
        _W,
        "nicht mehr=nicht; kein … mehr=kein; keine … mehr=kein;"
        " keinen … mehr=kein; nie mehr=nie; nicht länger=nicht; früher; ehemals;"
        " ehemalig; ehemalige=ehemalig; ehemaliger=ehemalig; ehemaligen=ehemalig; einst;"
        " vorher; zuvor; aufgehört=aufhören",
    )
    # French (n' is expanded to "ne " before matching)
    + _rows(
        "fr",
        _N,
        _W,
        "ne … pas=ne … pas; ne … jamais=ne … jamais; ne … rien=ne … rien;"
        " ne … personne=ne … personne; ne … aucun=ne … aucun; ne … aucune=ne … aucun;"
        " pas; jamais; ne; sans; aucun; aucune=aucun",
    )
    + _rows(
        "fr",
        _P,
        _W,
        "ne … plus=ne … plus; plus jamais=jamais; autrefois; auparavant;"
        " anciennement; arrêté de=arrêter",
    )
    # Spanish
    + _rows(
        "es",
        _N,
        _W,
        "no; nunca; jamás; nada; nadie; ningún=ninguno; ninguno; ninguna=ninguno; sin; tampoco",
    )
    + _rows(
        "es",
        _P,
        _W,
        "ya no=ya; solía=soler; solían=soler; solías=soler;"
        " solíamos=soler; antes; anteriormente; dejó de=dejar; dejado de=dejar",
    )
    # Portuguese
    + _rows("pt", _N, _W, "não; nunca; jamais; nada; ninguém; nenhum; nenhuma=nenhum; sem")
    + _rows(
        "pt",
        _P,
        _W,
        "já não=já; não … mais=não; costumava=costumar;"
        " costumavam=costumar; antigamente; anteriormente; deixou de=deixar;"
        " parou de=parar",
    )
    # Italian
    + _rows("it", _N, _W, "non; mai; niente; nulla; nessuno; nessuna=nessuno; senza")
    + _rows(
        "it",
        _P,
        _W,
        "non … più=più; non più=più; un tempo=tempo; in passato=passato;"
        " precedentemente; smesso di=smettere; ex",
    )
    # Dutch
    + _rows("nl", _N, _W, "niet; geen; nooit; niets; niemand; zonder")
    + _rows(
        "nl",
        _P,
        _W,
        "niet meer=niet; geen … meer=geen; nooit meer=nooit; vroeger;"
        " voorheen; voormalig; voormalige=voormalig; gestopt met=stoppen",
    )
    # Russian
    + _rows("ru", _N, _W, "не; нет; никогда; ничего; никто; ни; без")
    + _rows(
        "ru",
        _P,
        _W,
        "больше не=больше; уже не=уже; раньше; прежде; когда-то;"
        " бывший; бывшая=бывший; бывшее=бывший; бывшие=бывший; перестал=перестать;"
        " перестала=перестать; перестали=перестать; бросил=бросить; бросила=бросить",
    )
    # Chinese (simplified and traditional; no spaces)
    + _rows(
        "zh",
        _N,
        _S,
        "不; 没=沒; 沒; 别; 別; 不要; 无=無; 無; 从不=從不; 從不;"
        " 从来不=從來; 從來不=從來; 从未=從未; 從未; 并非=並非; 並非",
    )
    + _rows("zh", _N, _S, "没有=沒有; 沒有", stands_for="有")
    + _rows(
        "zh",
        _P,
        _S,
        "不再; 再也不=再也; 已经不=已經; 已經不=已經; 以前; 曾经=曾經;"
        " 曾經; 过去=過去; 過去; 原来=原來; 原來; 从前=從前; 從前; 前任; 戒了=戒; 停止",
    )
    # Japanese
    + _rows(
        "ja",
        _N,
        _S,
        "ない; なかった=ない; ではない=ではない; じゃない=じゃない; 無い;"
        " 決して…ない=決して; 一度も…ない=一度も",
    )
    + _rows("ja", _N, _S, "ません=ません", stands_for="ます")
    + _rows(
        "ja",
        _P,
        _S,
        "もう…ない=もう; もう…ません=もう; 以前は=以前; 以前; かつて;"
        " 昔は=昔; 前は=前; やめた=やめる; 辞めた=辞める; 止めた=止める",
    )
    # Korean (spaced words, plus bound endings matched as substrings)
    + _rows("ko", _N, _W, "안; 못; 절대")
    + _rows("ko", _N, _S, "않; 아니=아니다")
    + _rows("ko", _N, _S, "없=없다", stands_for="있")
    + _rows("ko", _P, _W, "더 이상=이상; 예전에=예전; 이전에=이전; 전에는=전; 옛날에=옛날")
    + _rows("ko", _P, _S, "더이상=이상; 그만두었=그만두다; 그만뒀=그만두다; 끊었=끊다")
    # Thai (no spaces)
    + _rows("th", _N, _S, "ไม่; ไม่เคย")
    + _rows("th", _P, _S, "ไม่…แล้ว=แล้ว; ไม่…อีกต่อไป=อีกต่อไป; เคย; เลิก")
)
"""The cue table (≥ 1 negation and ≥ 1 past-state row per language: en de fr es pt it nl ru zh
ja ko th)."""

POLAR_EMOJI: tuple[tuple[str, str], ...] = (
    ("👍", "👎"),
    ("✅", "❌"),
    ("✔", "✖"),
    ("❤", "💔"),
    ("🙂", "🙁"),
    ("😀", "☹"),
)
"""Emoji pairs with opposite meaning (Unicode CLDR short names: thumbs up/down, check mark/
cross mark, red heart/broken heart, slightly smiling/frowning face); a difference between the
two sides of a pair is a contradiction, not just a changed symbol."""


@dataclass(frozen=True)
class CueHit:
    """One cue found in a text: its ``kind``, the table ``phrase`` and ``lang``."""

    kind: str
    phrase: str
    lang: str


_GAP = "…"


def _piece(row: CueRow, text: str) -> str:
    esc = re.escape(text)
    return rf"(?<!\w){esc}(?!\w)" if row.match == _W else esc


def _compile() -> tuple[
    list[tuple[re.Pattern[str], CueRow, str, str]], list[CueRow], dict[str, CueRow]
]:
    gaps: list[tuple[re.Pattern[str], CueRow, str, str]] = []
    single: dict[str, CueRow] = {}
    for row in CUES:
        if _GAP in row.phrase:
            left, right = (p.strip() for p in row.phrase.split(_GAP))
            gap = r"((?:\W+\w+){0,4}?\W+)" if row.match == _W else r"(.{0,12}?)"
            rx = re.compile(f"({_piece(row, left)}){gap}({_piece(row, right)})")
            gaps.append((rx, row, left, right))
        else:
            single.setdefault((row.phrase, row.match), row)  # type: ignore[arg-type]
    gaps.sort(key=lambda g: -len(g[1].phrase))
    ordered = sorted(single.values(), key=lambda r: (-len(r.phrase), r.phrase))
    by_phrase: dict[str, CueRow] = {}
    for r in ordered:
        by_phrase.setdefault(r.phrase, r)
    return gaps, ordered, by_phrase


_GAPS, _SINGLES, _BY_PHRASE = _compile()
_GAP_LEFTS = PhraseIndex([g[2] for g in _GAPS], [g[1].match == _W for g in _GAPS])
_SINGLE_PHRASES = PhraseIndex([r.phrase for r in _SINGLES], [r.match == _W for r in _SINGLES])


def cue_index() -> PhraseIndex:
    """An index of every phrase that can start a cue (single phrases and the left piece of a
    discontinuous pair): :func:`find_cues` finds no cue in a text where it finds none."""
    return PhraseIndex.union(_GAP_LEFTS, _SINGLE_PHRASES)


@lru_cache(maxsize=4096)
def _alternation(rows: tuple[CueRow, ...]) -> re.Pattern[str]:
    """One regex over ``rows`` (longest phrase first): the first alternative that matches at a
    position wins."""
    return re.compile("|".join(f"(?:{_piece(r, r.phrase)})" for r in rows))


def _fill(row: CueRow) -> str:
    if row.stands_for:
        return row.stands_for if row.match == _S else f" {row.stands_for} "
    return "" if row.match == _S else " "


def find_cues(folded: str) -> tuple[list[CueHit], str]:
    """Cues in ``folded`` text and the text with each cue replaced by its ``stands_for``.

    ``folded`` must come from :func:`consolidation.atoms.fold`. Discontinuous pairs are found
    first (so "ne … pas" counts once), then single phrases, longest first. A removed
    ``substring`` cue leaves nothing (so "不要在代码里使用分号" becomes "在代码里使用分号"); a
    removed ``word`` cue leaves a space. Returns ``(hits in text order, rest)``.
    """
    hits: list[tuple[int, CueHit]] = []
    text = folded
    live = set(_GAP_LEFTS.present(text))  # the pairs whose left piece can match
    for g, (rx, row, left, right) in enumerate(_GAPS):
        if g not in live:
            continue
        changed = False
        while left in text and right in text:  # both pieces present, else no match (fast)
            m = rx.search(text)
            if m is None:
                break
            hits.append((m.start(), CueHit(row.kind, row.phrase, row.lang)))
            right = "" if row.match == _S else " "
            text = text[: m.start(1)] + _fill(row) + m.group(2) + right + text[m.end(3) :]
            changed = True
        if changed:
            live = set(_GAP_LEFTS.present(text))
    out: list[str] = []
    pos = 0
    # Only the phrases the text contains can match; dropping the others from the alternation
    # changes no match (each alternative needs its phrase) and spares the regex engine trying
    # ~300 alternatives at every position (it was half of a pair judgement's time).
    present = tuple(_SINGLES[k] for k in _SINGLE_PHRASES.present(text))
    for m in _alternation(present).finditer(text) if present else ():
        row = _BY_PHRASE[m.group(0)]
        hits.append((m.start(), CueHit(row.kind, row.phrase, row.lang)))
        out.append(text[pos : m.start()])
        out.append(_fill(row))
        pos = m.end()
    out.append(text[pos:])
    hits.sort(key=lambda h: h[0])
    return [h for _, h in hits], "".join(out)


def languages() -> list[str]:
    """Languages with at least one cue row, sorted."""
    return sorted({r.lang for r in CUES})


# --- statement markers (heuristics, not cues) ---------------------------------------------------

EVENT_MARKERS: dict[str, str] = {
    "en": (
        r"\b(?:was|were|had|did|went|met|saw|bought|ate|drank|ran|wrote|made|took|gave|left"
        r"|came|began|won|lost|sold|told|said|found|sent|built|paid|flew|drove|broke|chose|fell"
        r"|forgot|got|grew|heard|kept|knew|meant|rode|rose|sang|sat|slept|spoke|spent|stood"
        r"|swam|taught|thought|threw|understood|woke|wore|became|brought|caught|fought|felt"
        r"|held|stole|struck|tore|yesterday|ago|last)\b"
    ),
    "de": r"\bge[a-zäöüß]{3,}(?:t|en)\b|\b(?:war|waren|hatte|hatten|gestern)\b",
    "nl": r"\bge[a-zë]{3,}(?:d|t|en)\b|\b(?:was|waren|had|hadden|gisteren)\b",
    "fr": (
        r"\b(?:ai|as|a|avons|avez|ont|est|sont|suis|es|sommes|êtes)\s+[a-zéèêàâîôûç]+"
        r"(?:é|ée|és|ées|i|is|it|u|us|ue|ues)\b|\b[a-zéèêàâîôûç]{2,}(?:ait|aient)\b"
        r"|\bhier\b"
    ),
    "es": (
        r"\b(?:he|has|ha|hemos|han)\s+[a-záéíóúñ]+(?:ado|ido)\b|\b[a-záéíóúñ]{2,}"
        r"(?:ó|aron|ieron)\b|\b(?:ayer|fue|era|tenía)\b"
    ),
    "pt": r"\b[a-záâãéêíóôõúç]{2,}(?:ou|eu|iu|aram|eram|iram)\b|\b(?:ontem|foi|era|tinha)\b",
    "it": (
        r"\b(?:ho|hai|ha|abbiamo|avete|hanno|è|sono|sei|siamo|siete)\s+[a-zàèéìòù]+"
        r"(?:ato|ata|ati|ate|uto|uta|uti|ute|ito|ita|iti|ite)\b|\b(?:ieri|era|aveva)\b"
    ),
    "ru": (
        r"\b[а-яё]{2,}(?:ал|ала|ало|али|ял|яла|яли|ил|ила|или|ел|ела|ели|ыл|ыла|ыли)\b"
        r"|\b(?:был|была|было|были|вчера)\b"
    ),
    "zh": r"了|过|過|昨天|去年|上周|上週|上个月",
    "ja": r"ました|でした|った|んだ|いた|昨日|去年",
    "ko": r"었|았|였|했|어제|작년",
    "th": r"แล้ว|เมื่อวาน",
}
"""Past-tense / perfect-aspect markers per language (hand-picked from the languages' usual
past forms; a heuristic). A statement with one of them, or with a date, reports an event or a
reading, which a newer text never supersedes."""

STATE_MARKERS: dict[str, str] = {
    "en": (
        r"\b(?:is|are|am|has|have|does|do|lives|works|likes|loves|prefers|wants|needs|uses"
        r"|like|love|prefer|want|need|own"  # first person: "I love Chinese food" (mem0)
        r"|owns|knows|speaks|weighs|costs|earns|smokes|drinks|eats|plays|believes|holds"
        r"|manages|leads|contains|includes|supports|allows|requires)\b"
    ),
    "de": (
        r"\b(?:ist|sind|bin|bist|hat|haben|habe|wohnt|lebt|arbeitet|mag|mögen|liebt"
        r"|bevorzugt|raucht|trinkt|isst|spielt|spricht|besitzt|heißt|nutzt|benutzt"
        r"|verwendet|braucht|will)\b"
    ),
    "fr": (
        r"\b(?:est|sont|suis|es|a|ont|ai|avons|habite|vit|travaille|aime|aiment|préfère"
        r"|fume|boit|mange|joue|parle|possède|utilise|appelle|veut)\b"
    ),
    "es": (
        r"\b(?:es|son|soy|eres|está|están|estoy|tiene|tienen|tengo|vive|vivo|trabaja"
        r"|gusta|gustan|prefiere|fuma|bebe|come|juega|habla|usa|utiliza|llama|quiere)\b"
    ),
    "pt": (
        r"\b(?:é|são|sou|está|estão|tem|têm|tenho|mora|vive|trabalha|gosta|prefere|fuma"
        r"|bebe|come|joga|fala|usa|utiliza|chama|quer)\b"
    ),
    "it": (
        r"\b(?:è|sono|sei|ha|hanno|ho|vive|abita|lavora|piace|preferisce|fuma|beve|mangia"
        r"|gioca|parla|usa|utilizza|chiama|vuole)\b"
    ),
    "nl": (
        r"\b(?:is|zijn|ben|heeft|hebben|heb|woont|werkt|houdt|vindt|rookt|drinkt|eet"
        r"|speelt|spreekt|gebruikt|heet|wil)\b"
    ),
    "ru": (
        r"\b(?:живёт|живет|работает|любит|предпочитает|курит|пьёт|пьет|ест|играет"
        r"|говорит|использует|имеет|есть|является|зовут|хочет)\b"
    ),
    "zh": r"是|有|住在|喜欢|喜歡|爱|愛|偏好|使用|用|抽烟|抽菸|吸烟|喝|吃|工作|叫|要",
    "ja": r"です|だ|いる|います|ある|あります|好き|使う|使います|吸う|吸います|飲む|住んで|働いて",
    "ko": (
        r"이다|입니다|이에요|예요|있다|있습니다|있어요|산다|살아요"
        r"|살고|일한다|일해요|좋아|사용|피운다|피워"
    ),
    "th": r"เป็น|มี|อยู่|ชอบ|ใช้|ดื่ม|สูบ",
}
"""Present-tense copulas, possession and habitual/stative verbs per language (hand-picked; a
heuristic). A statement is a *state* only when it has one of these and no event marker."""

DEADLINE_RE = re.compile(
    r"\b(?:valid|good|open|available|runs?|lasts?|closed|until|till|through|thru|expires?"
    r"|due|gültig|bis|valable|jusqu'(?:au|à)|válido|hasta)\s+(?:on\s+|the\s+|el\s+|le\s+|am\s+)?"
    r"(?:until\s+|till\s+|through\s+|bis\s+(?:zum\s+)?)?(?:[^\W\d]+\s+)?\d"
)
"""A state with a deadline: "valid until March 3", "expires on 2026-05-01", "due 30 June",
"gültig bis 3. März", "valable jusqu'au 3 mars", "válido hasta el 3 de marzo" (hand-picked; a
heuristic). A present-tense statement whose date follows one of these words says until when
it holds — a state that a change event ("extended to April 30") updates — not an event."""
