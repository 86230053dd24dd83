"""Property: two memories that differ only in one fact atom, cue or scope value are never merged.

Generated pairs differ in exactly one number, date, identifier, sign, symbol, emoji, negation /
past-state cue or scope value, in several languages, at a cosine and link threshold chosen by
hypothesis (aggressive ones included).

- Without timestamps no pair can be ordered, so no verdict may remove either memory: never
  ``"same"`` (a merge) and never ``"supersedes"`` (a reconcile).
- With timestamps, ``"supersedes"`` is allowed only where dates settle the change: a changed
  number, sign or negation/past-state cue between two *state* statements (``statement_kind``);
  never for an identifier, a date, a symbol, an emoji or a scope. The state-number rule is asserted
  rather than avoided: the templates mix states ("The team has {x} engineers") and events
  ("{n} paid {x} for it").
"""

from __future__ import annotations

from datetime import date

from hypothesis import given, settings
from hypothesis import strategies as st

from consolidation import Policy
from consolidation.judgment import SAME, SUPERSEDES, judge_pair, statement_kind

NAMES = ["Alice", "Bob", "Zoë", "Мария", "小明", "민수", "Sam"]
TEMPLATES = [
    "{n} merged {x} into main",
    "{n} paid {x} for the tickets",
    "The team has {x} engineers",
    "{n} prefers {x} for scripts",
    "{n} lives at {x}",
    "{n} hat {x} gekauft",
    "{n} a noté {x} dans le carnet",
    "{n} tiene {x} libros",
    "{n}有{x}只猫",
    "{n}昨天买了{x}",
    "{n}は{x}を使います",
    "{n} купил {x}",
    "{n}는 {x}를 샀다",
]
NEGATIONS = [
    ("{n} smokes", "{n} does not smoke"),
    ("{n} drinks coffee", "{n} never drinks coffee"),
    ("{n} eats meat", "{n} no longer eats meat"),
    ("{n} smokes", "{n} used to smoke"),
    ("{n} is allergic to nuts", "{n} is not allergic to nuts"),
    ("{n} raucht", "{n} raucht nicht mehr"),
    ("{n} trinkt Kaffee", "{n} trinkt keinen Kaffee"),
    ("{n} fume", "{n} ne fume pas"),
    ("{n} boit du café", "{n} ne boit plus de café"),
    ("{n} fuma", "{n} ya no fuma"),
    ("{n} fuma", "{n} não fuma"),
    ("{n} mangia carne", "{n} non mangia più carne"),
    ("{n} eet vlees", "{n} eet geen vlees meer"),
    ("{n} курит", "{n} больше не курит"),
    ("{n}喝咖啡", "{n}不喝咖啡"),
    ("{n}吃肉", "{n}不再吃肉"),
    ("{n}はコーヒーを飲みます", "{n}はコーヒーを飲みません"),
    ("{n}는 고양이가 있다", "{n}는 고양이가 없다"),
    ("{n}ดื่มกาแฟ", "{n}ไม่ดื่มกาแฟ"),
]
SYMBOLS = [("C++", "C"), ("C#", "C"), ("C++", "C#"), ("F#", "F"), ("A+", "A"), ("A+", "B+")]
EMOJI = ["👍", "👎", "✅", "❌", "🎉", "🔥", "❤️", "💔", "😀", "🙁", "⭐", "🚀"]

ints = st.integers(min_value=0, max_value=10**6)


def _distinct_pair(values: st.SearchStrategy) -> st.SearchStrategy:
    return st.tuples(values, values).filter(lambda p: p[0] != p[1])


def _ids() -> st.SearchStrategy:
    return st.one_of(
        ints.map(lambda n: f"#{n}"),
        ints.map(lambda n: f"PR-{n}"),
        ints.map(lambda n: f"{n:06x}f1"),
        st.uuids().map(str),
        ints.map(lambda n: f"user{n}@example.com"),
        ints.map(lambda n: f"https://example.com/items/{n}"),
        st.tuples(ints, ints, ints).map(lambda t: f"v{t[0]}.{t[1]}.{t[2]}"),
    )


_MONTHS = ["January", "February", "March", "April", "June", "July", "August", "October"]
dates = st.dates(min_value=date(1900, 1, 1), max_value=date(2100, 12, 31)).flatmap(
    lambda d: st.sampled_from(
        [
            d.isoformat(),
            f"{_MONTHS[d.month % 8]} {d.day}, {d.year}",
            f"{d.year}年{d.month}月{d.day}日",
        ]
    )
)


@st.composite
def slot_pairs(draw):
    """``(kind, text_a, text_b, meta_a, meta_b)`` differing in one slot value."""
    kind = draw(
        st.sampled_from(["number", "date", "id", "sign", "symbol", "emoji", "negation", "scope"])
    )
    name = draw(st.sampled_from(NAMES))
    template = draw(st.sampled_from(TEMPLATES))
    if kind == "negation":
        pos, neg = draw(st.sampled_from(NEGATIONS))
        a, b = pos.format(n=name), neg.format(n=name)
    elif kind == "scope":
        x = draw(ints.map(str))
        a = b = template.format(n=name, x=x)
        u, v = draw(_distinct_pair(st.sampled_from(["alice", "bob", "carol", "dave"])))
        return kind, a, b, {"user_id": u}, {"user_id": v}
    else:
        if kind == "number":
            x, y = draw(_distinct_pair(ints.map(str)))
        elif kind == "date":
            x, y = draw(_distinct_pair(dates))
        elif kind == "id":
            x, y = draw(_distinct_pair(_ids()))
        elif kind == "sign":
            n = draw(st.integers(min_value=1, max_value=10**6))
            x, y = draw(st.sampled_from([(f"+{n}", f"-{n}"), (f"-{n}", f"{n}")]))
        elif kind == "symbol":
            x, y = draw(st.sampled_from(SYMBOLS))
        else:
            x, y = draw(_distinct_pair(st.sampled_from(EMOJI)))
        a, b = template.format(n=name, x=x), template.format(n=name, x=y)
    if draw(st.booleans()):
        a, b = b, a
    return kind, a, b, {}, {}


policies = st.builds(
    lambda link, contra: Policy(link_threshold=link, contradiction_threshold=contra),
    st.floats(min_value=0.3, max_value=0.99),
    st.floats(min_value=0.3, max_value=0.99),
)


@settings(max_examples=400, deadline=None)
@given(slot_pairs(), st.floats(min_value=0.5, max_value=1.0), policies)
def test_a_single_changed_atom_cue_or_scope_never_removes_a_memory(pair, cosine, policy):
    kind, a, b, am, bm = pair
    v = judge_pair(a, am, b, bm, cosine=cosine, policy=policy)
    assert v.kind not in (SAME, SUPERSEDES), (kind, a, b, v)


@settings(max_examples=400, deadline=None)
@given(slot_pairs(), st.floats(min_value=0.5, max_value=1.0), policies, st.booleans())
def test_with_dates_only_a_changed_state_supersedes(pair, cosine, policy, flip):
    kind, a, b, am, bm = pair
    older, newer = {"created_at": "2025-01-01"}, {"updated_at": "2025-06-01"}
    am, bm = ({**am, **older}, {**bm, **newer}) if flip else ({**am, **newer}, {**bm, **older})
    v = judge_pair(a, am, b, bm, cosine=cosine, policy=policy)
    assert v.kind != SAME, (kind, a, b, v)
    if v.kind == SUPERSEDES:
        assert kind in ("number", "sign", "negation"), (kind, a, b, v)
        assert statement_kind(a) == statement_kind(b) == "state", (a, b)
        assert v.newer == (1 if flip else 0)
