"""The twin channel (planning/twins.py): a correction one word apart is judged even when its
cosine is far below the contradiction threshold; a template with many values is not."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from consolidation import Fate, MemoryRecord, OpKind, Policy
from consolidation.planning import plan

from ._vectors import at_cosine, basis

NOW = datetime(2025, 6, 1, tzinfo=UTC)
POLICY = Policy(trim_to_guard=False)


def day(n: float) -> str:
    return (NOW - timedelta(days=n)).isoformat()


def rec(mid: str, text: str, vec, **meta) -> MemoryRecord:
    return MemoryRecord(mid, text, vec, meta)


def test_a_renamed_value_at_low_cosine_is_reconciled_newest_kept():
    records = [
        rec("old", "The user lives in Lyon now", basis(0), created_at=day(30)),
        rec("new", "The user lives in Porto now", at_cosine(0, 0.40, 1), created_at=day(1)),
    ]
    p = plan(records, POLICY, now=NOW)
    (op,) = p.by_kind(OpKind.RECONCILE)
    assert op.source_ids == ["new", "old"] and op.removes == ["old"]
    assert p.fates["old"] == Fate.SUPERSEDED and p.context["candidates"]["twin_pairs"] == 1


def test_an_undated_negation_in_chinese_goes_to_the_reviewer_and_removes_nothing():
    records = [
        rec("a", "用户不能喝酒", basis(0)),
        rec("b", "用户能喝酒", at_cosine(0, 0.30, 1)),
    ]
    p = plan(records, POLICY, now=NOW)
    (op,) = p.by_kind(OpKind.CONFLICT)
    assert sorted(op.source_ids) == ["a", "b"] and op.removes == []
    assert not p.by_kind(OpKind.RECONCILE) and not p.by_kind(OpKind.MERGE)


def test_twins_of_two_users_are_never_compared():
    records = [
        rec("a", "The user lives in Lyon now", basis(0), created_at=day(30), user_id="alice"),
        rec("b", "The user lives in Porto now", basis(1), created_at=day(1), user_id="bob"),
    ]
    p = plan(records, POLICY, now=NOW)
    assert not p.operations and p.context["candidates"]["twin_pairs"] == 0


def test_a_template_with_many_values_is_not_a_pile_of_twins():
    """ "Likes X" for nine different X: nine values, no pair judged, nothing removed."""
    foods = ["tea", "coffee", "jazz", "chess", "rain", "tennis", "opera", "sushi", "hiking"]
    records = [
        rec(f"m{k}", f"The user really likes {w}", basis(k), created_at=day(k + 1))
        for k, w in enumerate(foods)
    ]
    p = plan(records, POLICY, now=NOW)
    assert p.context["candidates"]["twin_pairs"] == 0 and not p.operations


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("Meeting with Dana on 2025-03-04", "Meeting with Dana on 2025-03-05"),  # a date
        ("Order 4411 shipped to the office", "Order 4412 shipped to the office"),  # an id
        ("The user likes tea very much", "The user likes coffee very much"),  # two values
        ("Der Nutzer wohnt jetzt in Berlin", "Der Nutzer wohnt jetzt in Hamburg"),  # de: no table
        ("用户喜欢喝茶", "用户喜欢喝酒"),  # zh: likes tea / likes alcohol, two values
    ],
)
def test_a_twin_that_differs_in_a_fact_atom_or_value_is_kept(a, b):
    records = [
        rec("x", a, basis(0), created_at=day(10)),
        rec("y", b, at_cosine(0, 0.5, 1), created_at=day(1)),
    ]
    p = plan(records, POLICY, now=NOW)
    assert p.context["candidates"]["twin_pairs"] == 1
    assert not [op for op in p.operations if op.removes], [op.reason for op in p.operations]


def test_an_incremental_pass_finds_the_twin_of_a_new_memory_among_old_ones():
    old = [rec("old", "The user lives in Lyon now", basis(0), created_at=day(30))]
    others = [rec(f"o{k}", f"Unrelated fact number {k} here", basis(k + 2)) for k in range(5)]
    checkpoint = {r.id: r.content_hash for r in old + others}
    new = rec("new", "The user lives in Porto now", at_cosine(0, 0.40, 1), created_at=day(1))
    p = plan(old + others + [new], POLICY, now=NOW, checkpoint=checkpoint)
    (op,) = p.by_kind(OpKind.RECONCILE)
    assert op.removes == ["old"]


def test_a_correction_in_a_mem0_store_of_two_users_reconciles_only_its_own_user(tmp_path):
    """mem0ai's own ChromaDB.insert writes the store (text in metadata ``data``, 1536-d
    foreign vectors, mem0's created_at/updated_at); the planner reads it with the mem0 preset
    and our embeddings. alice corrected her city (one word apart, newer: whichever channel
    offers the pair, embedding or twin, judge_pair decides); bob's same old text
    stays: a twin across users is never compared."""
    import uuid

    import chromadb

    from consolidation.adapters.chroma_layout import Layout
    from consolidation.adapters.chroma_store import ChromaMemoryStore
    from consolidation.adapters.embedder import get_default_embedder
    from consolidation.adapters.vector_cache import VectorCache
    from consolidation.shapes import preset_field_map
    from tests.agent_stores import Mem0Memory, write_mem0

    client = chromadb.EphemeralClient()
    name = f"mem0-{uuid.uuid4().hex[:10]}"
    old, new = datetime(2025, 1, 5, tzinfo=UTC), datetime(2025, 5, 1, tzinfo=UTC)
    ids = write_mem0(
        client,
        name,
        [
            Mem0Memory("Alice lives in Lyon now", user_id="alice", created_at=old),
            Mem0Memory("Alice lives in Porto now", user_id="alice", created_at=new),
            Mem0Memory("Alice lives in Lyon now", user_id="bob", created_at=old),
        ],
    )
    fm = preset_field_map("mem0")
    layout = Layout(
        name,
        field_map=fm,
        embed=lambda t: get_default_embedder().embed(t),
        cache=VectorCache(tmp_path / "v.sqlite3"),
    )
    records = list(ChromaMemoryStore(client.get_collection(name), layout=layout).iter_records())
    p = plan(records, POLICY, now=NOW, fieldmap=fm)
    (op,) = [o for o in p.operations if o.removes]
    assert op.kind == OpKind.RECONCILE and op.removes == [ids[0]] and op.source_ids[0] == ids[1]
    assert p.fates[ids[2]] == Fate.KEPT


def _one_token_apart(x: list[str], y: list[str]) -> bool:
    if len(x) < len(y):
        x, y = y, x
    if len(x) == len(y):
        return sum(p != q for p, q in zip(x, y, strict=True)) == 1
    return len(x) == len(y) + 1 and any(x[:k] + x[k + 1 :] == y for k in range(len(x)))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_channel_offers_exactly_the_pairs_one_token_apart_at_any_position(seed):
    """Texts of 2 to 16 words (and CJK strings of characters) of two users, each edited once
    at a random position (first, middle, last) by a substitution, a deletion or an insertion:
    the channel offers every same-user pair one token apart of which the longer has ≥ 3
    tokens, and nothing else (counted against every pair compared directly)."""
    import random

    rnd = random.Random(seed)
    vocab = [f"w{chr(97 + a)}{chr(97 + b)}" for a in range(26) for b in range(26)]
    cjk = [chr(0x4E00 + k) for k in range(2000)]
    toks: list[list[str]] = []
    for _ in range(60):
        script = cjk if rnd.random() < 0.25 else vocab
        base = rnd.sample(script, rnd.randint(2, 16))
        edited = list(base)
        k, how = rnd.randrange(len(base)), rnd.choice(["sub", "del", "ins"])
        if how == "sub":
            edited[k] = rnd.choice(script)
        elif how == "del" and len(base) > 2:
            del edited[k]
        else:
            edited.insert(k, rnd.choice(script))
        toks += [base, edited[:16]]
    users = ["alice" if rnd.random() < 0.5 else "bob" for _ in toks]
    for k in range(1, len(toks), 2):  # most edits stay with their user
        users[k] = users[k - 1] if rnd.random() < 0.8 else users[k]
    texts = ["".join(t) if t[0] in cjk else " ".join(t) for t in toks]
    records = [rec(f"m{k}", text, basis(k), user_id=users[k]) for k, text in enumerate(texts)]
    expected = sum(
        1
        for a in range(len(toks))
        for b in range(a + 1, len(toks))
        if users[a] == users[b]
        and texts[a] != texts[b]
        and max(len(toks[a]), len(toks[b])) >= 3
        and _one_token_apart(toks[a], toks[b])
    )
    p = plan(records, POLICY, now=NOW)
    assert expected >= 40
    assert p.context["candidates"]["twin_pairs"] == expected
