"""Properties: one raw symbol, qualifier or value apart is never merged; an update is settled.

- A pair of texts that differ in exactly one raw symbol (a path prefix, an operator, a file
  extension, a flag), one qualifier (a time limit, condition, modality, subject or quantifier
  added) or one value of a single-valued attribute is never ``"same"``, at any cosine hypothesis
  picks, dated or not, in en / de / fr / es.
- An update pair (a state statement and a later text about the same subject and attribute that
  carries an update marker or a past-state cue) is ``"supersedes"`` — the newer one kept, when
  the dates order them — or a ``"conflict"``; never ``"same"`` and never ``"distinct"``.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from consolidation import Policy
from consolidation.judgment import CONFLICT, SAME, SUPERSEDES, judge_pair

SUBJECTS = ["The user", "Alice", "Bob", "Zoë"]
PATHS = ["~/cache", "./build", "src/app.py", "/etc/hosts", "config.yaml", "id_rsa", "notes.md"]
PATH_VARIANTS = [
    lambda p: "/" + p.lstrip("~./"),
    lambda p: "~/" + p.lstrip("~./"),
    lambda p: p + ".bak",
    lambda p: p + ".pub",
    lambda p: "./" + p.lstrip("~./"),
]
OPS = [">=", ">", "<", "<=", "==", "!="]
RAW_TEMPLATES = [
    "{s} keeps the key in {p}",
    "{s} runs `rm -rf {p}` every night",
    "{s} speichert die Daten in {p}",
    "{s} garde la config dans {p}",
    "{s} guarda el archivo en {p}",
]
OP_TEMPLATES = [
    "{s} gets an alert when load {op} 5",
    "{s} bekommt einen Alarm wenn x {op} 5",
    "{s} reçoit une alerte si x {op} 5",
]
QUALIFIED = [
    ("{s} drinks coffee", ["until June", "on weekdays", "for now", "when travelling"]),
    ("{s} works from home", ["temporarily", "on weekends", "until further notice"]),
    ("{s} trinkt Kaffee", ["bis Juni", "am Wochenende", "vorübergehend"]),
    ("{s} boit du café", ["jusqu'à juin", "en semaine", "pour l'instant"]),
    ("{s} bebe café", ["hasta junio", "entre semana", "por ahora"]),
]
PREFIXED = [
    ("I like jazz", "My sister likes jazz"),
    ("I drink tea", "My brother drinks tea"),
    ("All tests pass", "Some tests pass"),
    ("Alice moves to Berlin", "Alice plans to move to Berlin"),
    ("Alle Tests laufen", "Einige Tests laufen"),
    ("Todos los tests pasan", "Algunos tests pasan"),
    ("J'aime le jazz", "Mon frère aime le jazz"),
]
CITIES = ["Paris", "Berlin", "Lyon", "Madrid", "Osaka", "Lima"]
VALUE_TEMPLATES = ["{s} lives in {v}", "{s} works at {v}", "{s} wohnt in {v}", "{s} vit à {v}"]
UPDATES = [
    ("{s} prefers {x}.", "{s} no longer drinks {x}, prefers {y}."),
    ("{s} uses {x} for chat.", "{s} switched to {y} for chat."),
    ("{s} lives in {x}.", "{s} moved from {x} to {y}."),
    ("{s} uses {x}.", "{s} now uses {y} instead of {x}."),
    ("{s} trinkt {x}.", "{s} trinkt jetzt {y} statt {x}."),
    ("{s} boit du {x}.", "{s} ne boit plus de {x}, il préfère le {y}."),
    ("{s} bebe {x}.", "{s} ya no bebe {x}, ahora prefiere {y}."),
]
THINGS = ["tea", "coffee", "Slack", "Teams", "Python", "Rust", "Paris", "Berlin", "mate"]

cosines = st.floats(min_value=0.5, max_value=1.0, allow_nan=False)
dated = st.booleans()
policies = st.sampled_from([Policy(), Policy(link_threshold=0.8, contradiction_threshold=0.6)])


def _metas(with_dates: bool, newer: int = 1):
    if not with_dates:
        return {"user_id": "u"}, {"user_id": "u"}
    old, new = (
        {"user_id": "u", "created_at": "2025-01-01"},
        {
            "user_id": "u",
            "created_at": "2025-06-01",
        },
    )
    return (old, new) if newer == 1 else (new, old)


@st.composite
def one_apart(draw):
    """Two texts one raw symbol, qualifier or value apart."""
    s = draw(st.sampled_from(SUBJECTS))
    kind = draw(st.sampled_from(["path", "op", "qualifier", "prefixed", "value"]))
    if kind == "path":
        t = draw(st.sampled_from(RAW_TEMPLATES))
        p = draw(st.sampled_from(PATHS))
        q = draw(st.sampled_from(PATH_VARIANTS))(p)
        if q == p:
            q = p + ".bak"
        return t.format(s=s, p=p), t.format(s=s, p=q)
    if kind == "op":
        t = draw(st.sampled_from(OP_TEMPLATES))
        a, b = draw(st.lists(st.sampled_from(OPS), min_size=2, max_size=2, unique=True))
        return t.format(s=s, op=a), t.format(s=s, op=b)
    if kind == "qualifier":
        t, quals = draw(st.sampled_from(QUALIFIED))
        base = t.format(s=s)
        return base + ".", f"{base} {draw(st.sampled_from(quals))}."
    if kind == "prefixed":
        return draw(st.sampled_from(PREFIXED))
    t = draw(st.sampled_from(VALUE_TEMPLATES))
    a, b = draw(st.lists(st.sampled_from(CITIES), min_size=2, max_size=2, unique=True))
    return t.format(s=s, v=a), t.format(s=s, v=b)


@settings(max_examples=300, deadline=None)
@given(pair=one_apart(), cosine=cosines, with_dates=dated, policy=policies, swap=st.booleans())
def test_one_raw_symbol_qualifier_or_value_apart_is_never_merged(
    pair, cosine, with_dates, policy, swap
):
    a, b = pair[::-1] if swap else pair
    ma, mb = _metas(with_dates)
    v = judge_pair(a, ma, b, mb, cosine=cosine, policy=policy)
    assert v.kind != SAME, (a, b, v)


@st.composite
def update_pair(draw):
    s = draw(st.sampled_from(SUBJECTS))
    old, new = draw(st.sampled_from(UPDATES))
    x, y = draw(st.lists(st.sampled_from(THINGS), min_size=2, max_size=2, unique=True))
    return old.format(s=s, x=x, y=y), new.format(s=s, x=x, y=y)


@settings(max_examples=300, deadline=None)
@given(pair=update_pair(), cosine=cosines, with_dates=dated, newer=st.sampled_from([0, 1]))
def test_an_update_pair_is_reconciled_or_asked(pair, cosine, with_dates, newer):
    older, updated = pair
    ma, mb = _metas(with_dates, newer=1)
    # ``newer`` picks which side the updating text is on, and it is always the newer one
    a, b = (older, updated) if newer == 1 else (updated, older)
    ma, mb = (ma, mb) if newer == 1 else (mb, ma)
    v = judge_pair(a, ma, b, mb, cosine=cosine)
    assert v.kind in (SUPERSEDES, CONFLICT), (a, b, v)
    if with_dates:
        assert v.kind == SUPERSEDES and v.newer == newer, (a, b, v)
    else:
        assert v.kind == CONFLICT, (a, b, v)
