"""Table tests per kind of judgment: what a merge may drop, updates, lossless duplicates.

Each kind is a table (English and other languages) judged by ``judge_pair`` and, for the kinds
a plan must act on, planned end to end with the engine's own embeddings (all-MiniLM-L6-v2), in
two scopes of one store (``alice`` and ``bob`` hold the same memories; nothing crosses them).

Kinds:

1. a raw symbol (path, operator, file, flag, code span, version, unit) differs → never merged;
2. a qualifier (time limit, condition, modality, subject, quantifier) differs → never merged;
   an older time-limited statement and a newer unqualified one → the newer supersedes;
3. a labelled number ("note 159" / "note 1594", ticket, row, order …) → two records, neither
   merged nor reconciled, however many template lines a store holds;
4. an update (marker, negation, past-state cue) about the same subject and attribute →
   reconciled (newer kept) or a conflict when the order is unknown — never nothing;
5. a lossless duplicate (one text covers the other's words, aliases included) → merged
   keeping the covering text; a name spelled differently (Jon / John) → kept apart;
6. one single-valued attribute with two values in one text → a conflict, never a merge.
"""

from __future__ import annotations

from datetime import UTC, datetime
from functools import lru_cache

import numpy as np
import pytest

from consolidation import MemoryRecord, OpKind, Policy
from consolidation.adapters.embedder import get_default_embedder
from consolidation.judgment import CONFLICT, DISTINCT, SAME, SUPERSEDES, judge_pair
from consolidation.planning import plan

NOW = datetime(2026, 12, 1, tzinfo=UTC)
OLD, NEW = "2025-09-01T09:00:00Z", "2025-11-20T09:00:00Z"
SCOPES = ("alice", "bob")
POLICY = Policy(trim_to_guard=False)


@lru_cache(maxsize=1)
def _embedder():
    return get_default_embedder()


def _cos(a: str, b: str) -> float:
    va, vb = np.asarray(_embedder().embed([a, b]), dtype=np.float32)
    return float(np.dot(va, vb) / (np.linalg.norm(va) * np.linalg.norm(vb)))


def _judge(a: str, b: str, *, dated: bool = True, cosine: float | None = None):
    ma = {"user_id": "alice", **({"created_at": OLD} if dated else {})}
    mb = {"user_id": "alice", **({"created_at": NEW} if dated else {})}
    return judge_pair(a, ma, b, mb, cosine=_cos(a, b) if cosine is None else cosine)


def _plan(pairs: list[tuple[str, str]], *, dated: bool = True):
    """Both scopes hold every pair (older ``a``, newer ``b``); returns the plan."""
    texts, metas, ids = [], [], []
    for scope in SCOPES:
        for k, (a, b) in enumerate(pairs):
            for side, text, at in (("a", a, OLD), ("b", b, NEW)):
                ids.append(f"{scope}-{k}-{side}")
                texts.append(text)
                metas.append({"user_id": scope, **({"created_at": at} if dated else {})})
    vecs = np.asarray(_embedder().embed(texts), dtype=np.float32)
    records = [
        MemoryRecord(i, t, vecs[n], m)
        for n, (i, t, m) in enumerate(zip(ids, texts, metas, strict=True))
    ]
    return plan(records, POLICY, now=NOW)


def _scopes_of(op) -> set[str]:
    return {sid.split("-")[0] for sid in op.source_ids}


# --- 1. raw symbols ------------------------------------------------------------------------------

RAW = [
    ("Run `rm -rf ~/cache` to free space.", "Run `rm -rf /cache` to free space."),
    ("Alert when x >= 5.", "Alert when x > 5."),
    ("The deploy key is id_rsa.", "The deploy key is id_rsa.pub."),
    ("Settings live in config.yaml.", "Settings live in config.yaml.bak."),
    ("The build script is scripts/build.sh.", "The build script is /scripts/build.sh."),
    ("Start the server with --verbose.", "Start the server with --quiet."),
    (
        "Die Konfiguration liegt in ~/app/config.toml.",
        "Die Konfiguration liegt in /app/config.toml.",
    ),
    ("Le script est ./deploy.sh.", "Le script est deploy.sh.bak."),
    ("El límite es x <= 10.", "El límite es x < 10."),
    ("日志在 /var/log/app.log。", "日志在 ~/var/log/app.log。"),
]


@pytest.mark.parametrize(("a", "b"), RAW)
def test_a_raw_symbol_difference_is_never_merged(a, b):
    v = _judge(a, b, dated=False, cosine=0.99)
    assert v.kind != SAME and not v.may_merge, v


def test_raw_symbol_pairs_stay_apart_in_a_plan():
    p = _plan(RAW)
    assert not p.by_kind(OpKind.MERGE) and not p.by_kind(OpKind.RECONCILE)


# --- 2. qualifiers -------------------------------------------------------------------------------

QUALIFIED = [
    # condition
    ("User drinks coffee.", "User drinks coffee on weekdays."),
    ("Der Nutzer trinkt Kaffee.", "Der Nutzer trinkt Kaffee am Wochenende."),
    ("L'utilisateur boit du café.", "L'utilisateur boit du café en semaine."),
    ("用户喝咖啡。", "用户周末喝咖啡。"),
    # modality
    ("Alice moves to Berlin.", "Alice plans to move to Berlin."),
    ("El usuario aprende alemán.", "El usuario quiere aprender alemán."),
    ("ユーザーはドイツ語を勉強します。", "ユーザーはドイツ語を勉強したいです。"),
    # subject
    ("I like jazz.", "My sister likes jazz."),
    ("Ich mag Jazz.", "Meine Schwester mag Jazz."),
    ("J'aime le jazz.", "Mon frère aime le jazz."),
    # quantifier
    ("All tests pass.", "Some tests pass."),
    ("Alle Tests laufen durch.", "Einige Tests laufen durch."),
    ("Todos los tests pasan.", "Algunos tests pasan."),
]


@pytest.mark.parametrize(("a", "b"), QUALIFIED)
def test_a_qualifier_is_never_dropped_by_a_merge(a, b):
    for cosine in (0.8, 0.95, 0.999):
        v = _judge(a, b, dated=False, cosine=cosine)
        assert v.kind != SAME, (cosine, v)


TIME_LIMITED = [
    ("Alice works remotely until June.", "Alice works remotely."),
    ("The user drinks decaf for now.", "The user drinks decaf."),
    ("Der Nutzer arbeitet vorübergehend von zu Hause.", "Der Nutzer arbeitet von zu Hause."),
    ("L'utilisateur travaille temporairement à Lyon.", "L'utilisateur travaille à Lyon."),
    ("El usuario vive en Madrid por ahora.", "El usuario vive en Madrid."),
]


@pytest.mark.parametrize(("a", "b"), TIME_LIMITED)
def test_an_older_time_limit_is_replaced_by_a_newer_plain_statement(a, b):
    v = _judge(a, b)
    assert v.kind == SUPERSEDES and v.newer == 1, v
    # the other way round the newer (limited) text covers the older: it is the current state
    w = judge_pair(
        b, {"user_id": "u", "created_at": OLD}, a, {"user_id": "u", "created_at": NEW}, cosine=0.9
    )
    assert w.kind == SUPERSEDES and w.newer == 1, w
    # undated: asked
    assert _judge(a, b, dated=False).kind == CONFLICT


# --- 3. labelled numbers -------------------------------------------------------------------------

LABELLED = [
    ("User likes tea (note 159)", "User likes tea (note 1594)"),
    ("Ticket #4411 is open.", "Ticket #4412 is open."),
    ("Row 17 has a missing price.", "Row 18 has a missing price."),
    ("Bestellung Nr. 5501 ist versandt.", "Bestellung Nr. 5502 ist versandt."),
    ("El pedido 300 está pagado.", "El pedido 301 está pagado."),
    ("注文番号123は発送済みです。", "注文番号124は発送済みです。"),
]


@pytest.mark.parametrize(("a", "b"), LABELLED)
def test_a_labelled_number_is_an_identifier_not_a_changed_value(a, b):
    v = _judge(a, b, cosine=0.99)
    assert v.kind == DISTINCT, v


def test_a_templated_store_of_notes_plans_no_reconcile():
    lines = [f"The user asked about the invoice (note {k})" for k in range(150, 190)]
    vecs = np.asarray(_embedder().embed(lines), dtype=np.float32)
    records = [
        MemoryRecord(
            f"n{k}", t, vecs[k], {"user_id": "alice", "created_at": f"2025-01-{k % 28 + 1:02d}"}
        )
        for k, t in enumerate(lines)
    ]
    p = plan(records, POLICY, now=NOW)
    assert not p.by_kind(OpKind.RECONCILE) and not p.by_kind(OpKind.MERGE)


# --- 4. updates ----------------------------------------------------------------------------------

UPDATES = [
    ("The user prefers tea.", "The user no longer drinks tea, prefers coffee."),
    ("User lives in Paris.", "User moved from Paris to Berlin."),
    ("The team uses Slack for chat.", "The team switched to Teams for chat."),
    ("User uses Python 3.11.", "User upgraded to Python 3.12."),
    ("The project uses PostgreSQL.", "The project migrated to MySQL instead of PostgreSQL."),
    ("The meeting is on Mondays.", "Correction: the meeting is on Tuesdays, not Mondays."),
    ("Der Nutzer trinkt gern Tee.", "Der Nutzer trinkt jetzt lieber Kaffee statt Tee."),
    ("Der Nutzer wohnt in Köln.", "Der Nutzer ist von Köln nach Bonn umgezogen."),
    ("L'utilisateur boit du thé.", "L'utilisateur ne boit plus de thé, il préfère le café."),
    ("L'utilisateur habite à Lyon.", "L'utilisateur habite désormais à Paris au lieu de Lyon."),
    ("El usuario bebe té.", "El usuario ya no bebe té, ahora prefiere café."),
    ("El usuario vive en Madrid.", "El usuario se mudó de Madrid a Sevilla."),
    ("ユーザーは紅茶が好きです。", "ユーザーは今はコーヒーが好きです。紅茶ではなく。"),
    ("用户住在北京。", "用户不再住在北京，搬到上海了。"),
]


@pytest.mark.parametrize(("a", "b"), UPDATES)
def test_an_update_is_settled_by_recency_or_asked(a, b):
    assert _judge(a, b).kind == SUPERSEDES
    assert _judge(a, b).newer == 1
    assert _judge(a, b, dated=False).kind == CONFLICT


def test_every_update_pair_is_reconciled_in_both_scopes_of_a_plan():
    p = _plan(UPDATES)
    recs = p.by_kind(OpKind.RECONCILE)
    kept = sorted(op.source_ids[0] for op in recs)
    want = sorted(f"{s}-{k}-b" for s in SCOPES for k in range(len(UPDATES)))
    assert kept == want, [op.reason for op in recs]
    assert all(len(_scopes_of(op)) == 1 for op in p.operations)
    assert p.context["candidates"]["update_pairs"] > 0


def test_undated_update_pairs_become_conflicts_never_nothing():
    p = _plan(UPDATES, dated=False)
    asked = {frozenset(op.source_ids) for op in p.by_kind(OpKind.CONFLICT)}
    for s in SCOPES:
        for k in range(len(UPDATES)):
            assert frozenset({f"{s}-{k}-a", f"{s}-{k}-b"}) in asked, UPDATES[k]
    assert not p.by_kind(OpKind.RECONCILE) and not p.by_kind(OpKind.MERGE)


# --- 5. lossless duplicates ----------------------------------------------------------------------

LOSSLESS = [
    ("The user lives in NYC.", "The user lives in New York City."),
    ("The user likes green tea.", "The user really likes green tea a lot."),
    ("Alice prefers dark roast coffee.", "Alice prefers dark roast coffee in the morning cup."),
    ("Der Nutzer studiert an der Uni Köln.", "Der Nutzer studiert an der Universität Köln."),
    ("L'utilisateur dîne au resto italien.", "L'utilisateur dîne au restaurant italien."),
    ("El usuario ve una peli cada viernes.", "El usuario ve una película cada viernes."),
]


@pytest.mark.parametrize(("a", "b"), LOSSLESS)
def test_a_lossless_duplicate_is_merged_keeping_the_covering_text(a, b):
    v = _judge(a, b, dated=False)
    assert v.kind == SAME and v.lossless, v


def test_lossless_pairs_merge_in_both_scopes_keeping_every_word():
    p = _plan(LOSSLESS, dated=False)
    merges = p.by_kind(OpKind.MERGE)
    groups = sorted(tuple(sorted(op.source_ids)) for op in merges)
    want = sorted((f"{s}-{k}-a", f"{s}-{k}-b") for s in SCOPES for k in range(len(LOSSLESS)))
    assert groups == want
    for op in merges:
        k = int(op.source_ids[0].split("-")[1])
        assert op.result_document.strip() == LOSSLESS[k][1]


SPELLINGS = [
    ("Jon likes jazz.", "John likes jazz."),
    ("Steven works at Acme.", "Stephen works at Acme."),
    ("Jon mag Jazz.", "John mag Jazz."),
    ("Jon aime le jazz.", "John aime le jazz."),
]


@pytest.mark.parametrize(("a", "b"), SPELLINGS)
def test_a_name_spelled_differently_stays_apart(a, b):
    assert _judge(a, b, dated=False, cosine=0.99).kind != SAME


# --- 6. one attribute, two values ----------------------------------------------------------------

TWO_VALUES = [
    ("The head office is in Paris.", "The head office is in Paris and Berlin."),
    ("Alice's birthday is on 3 May.", "Alice's birthday is on 3 May and 5 June."),
    ("The price is $5.", "The price is $5 or $7."),
]


@pytest.mark.parametrize(("a", "b"), TWO_VALUES)
def test_a_merged_text_never_holds_two_values_of_one_attribute(a, b):
    v = _judge(a, b, dated=False, cosine=0.97)
    assert v.kind in (CONFLICT, DISTINCT), v


# --- scopes -------------------------------------------------------------------------------------


@pytest.mark.parametrize(("a", "b"), UPDATES[:3] + LOSSLESS[:3])
def test_nothing_crosses_scopes(a, b):
    v = judge_pair(a, {"user_id": "alice"}, b, {"user_id": "bob"}, cosine=0.99)
    assert v.kind == DISTINCT


# --- the tables ---------------------------------------------------------------------------------


def test_the_tables_cover_every_kind_in_six_languages_with_a_source_per_row():
    from consolidation.aliases import ALIASES
    from consolidation.qualifiers import QUALIFIER_KINDS, QUALIFIERS, UPDATE_MARKERS

    langs = {"en", "de", "fr", "es", "ja", "zh"}
    for kind in QUALIFIER_KINDS:
        assert {r.lang for r in QUALIFIERS if r.kind == kind} >= langs, kind
    assert {r.lang for r in UPDATE_MARKERS} >= langs
    assert {r.lang for r in ALIASES} >= {"en", "de", "fr", "es"}
    for row in (*QUALIFIERS, *UPDATE_MARKERS, *ALIASES):
        assert row.source.startswith("wiktionary:") and len(row.source) > len("wiktionary:")
