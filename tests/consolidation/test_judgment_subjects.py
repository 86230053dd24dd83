"""The update rule reconciles only a pair about the same subject and the same attribute.

A reported case (the demo store): "The ember project is no longer written in Kotlin; it is now
written in Go." superseded "The umber project is written in Kotlin." (cosine 0.698) and "The
lumen project is written in Kotlin." (0.572) — another project, one modifier of the noun phrase
apart; and "The kelp project no longer uses Black" superseded "The kelp project is written in
Rust" (0.557) — the same project, another attribute (the formatter, not the language), the only
shared words being the subject's. Such a pair is never ``"supersedes"``: unsure means keep both
and ask, so it is a conflict for a person or stays distinct.

The English cosines are the ones measured on the demo store; the German and French rows and
the positive controls use assumed cosines (0.6–0.8, the range of the measured ones), fixed so
the table does not depend on the embedder.
"""

from __future__ import annotations

import pytest

from consolidation.judgment import CONFLICT, DISTINCT, SUPERSEDES, judge_pair
from consolidation.text import subject_phrase

OLD, NEW = "2025-09-01T09:00:00Z", "2025-11-20T09:00:00Z"
EMBER_GO = "The ember project is no longer written in Kotlin; it is now written in Go."


def _judge(a: str, b: str, cosine: float, *, dated: bool = True):
    ma = {"user_id": "alice", **({"created_at": OLD} if dated else {})}
    mb = {"user_id": "alice", **({"created_at": NEW} if dated else {})}
    return judge_pair(a, ma, b, mb, cosine=cosine)


OTHER_SUBJECT_OR_ATTRIBUTE = [
    ("The umber project is written in Kotlin.", EMBER_GO, 0.698),
    ("The lumen project is written in Kotlin.", EMBER_GO, 0.572),
    ("The kelp project is written in Rust", "The kelp project no longer uses Black", 0.557),
    (
        "Das Umber-Projekt ist in Kotlin geschrieben.",
        "Das Ember-Projekt ist nicht mehr in Kotlin geschrieben, sondern jetzt in Go.",
        0.7,
    ),
    (
        "Das Projekt Umber ist in Kotlin geschrieben.",
        "Das Projekt Ember ist nicht mehr in Kotlin geschrieben, sondern jetzt in Go.",
        0.7,
    ),
    (
        "Le projet umber est écrit en Kotlin.",
        "Le projet ember n'est plus écrit en Kotlin ; il est maintenant écrit en Go.",
        0.7,
    ),
    ("Das Projekt Kelp ist in Rust geschrieben.", "Das Projekt Kelp nutzt nicht mehr Black.", 0.6),
]

SAME_SUBJECT_AND_ATTRIBUTE = [
    ("The ember project is written in Kotlin.", EMBER_GO, 0.8),
    ("Alice lives in Paris.", "Alice no longer lives in Paris; she moved to Berlin.", 0.8),
    (
        "Das Projekt Ember ist in Kotlin geschrieben.",
        "Das Projekt Ember ist nicht mehr in Kotlin geschrieben, sondern jetzt in Go.",
        0.8,
    ),
    (
        "Le projet ember est écrit en Kotlin.",
        "Le projet ember n'est plus écrit en Kotlin ; il est maintenant écrit en Go.",
        0.8,
    ),
]


@pytest.mark.parametrize(("a", "b", "cosine"), OTHER_SUBJECT_OR_ATTRIBUTE)
@pytest.mark.parametrize("dated", [True, False])
def test_it_never_reconciles_another_subject_or_attribute(a, b, cosine, dated):
    for x, y in ((a, b), (b, a)):
        v = _judge(x, y, cosine, dated=dated)
        assert v.kind in (CONFLICT, DISTINCT), (x, y, v)
        assert v.cue != "update", (x, y, v)


@pytest.mark.parametrize(("a", "b", "cosine"), SAME_SUBJECT_AND_ATTRIBUTE)
def test_it_still_reconciles_an_update_of_the_same_subject_and_attribute(a, b, cosine):
    v = _judge(a, b, cosine)
    assert (v.kind, v.newer) == (SUPERSEDES, 1), v
    assert _judge(a, b, cosine, dated=False).kind == CONFLICT


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("The ember project is written in Kotlin.", {"ember", "project"}),
        ("The umber project is written in Kotlin.", {"umber", "project"}),
        (EMBER_GO, {"ember", "project"}),
        ("The kelp project no longer uses Black", {"kelp", "project"}),
        ("Alice lives in Paris.", {"alic"}),
        ("Alice no longer lives in Paris; she moved to Berlin.", {"alic"}),
        ("The team switched to Teams for chat.", {"team"}),
        ("Correction: the meeting is on Tuesdays, not Mondays.", {"meet"}),
        ("Das Ember-Projekt ist in Kotlin geschrieben.", {"ember", "projekt"}),
        ("Le projet ember n'est plus écrit en Kotlin.", {"projet", "ember"}),
        ("L'utilisateur ne boit plus de thé.", {"utilisateur"}),
        ("El usuario ya no bebe té.", {"usuario"}),
        ("用户住在北京。", None),  # no spaced words: unknown, the rule does not ask
    ],
)
def test_it_reads_the_subject_noun_phrase_before_the_verb(text, want):
    got = subject_phrase(text)
    assert (None if got is None else set(got)) == want


UPDATE_CASES = pytest.mark.parametrize(
    ("old_same", "new", "others"),
    [
        (
            "The ember project is written in Kotlin.",
            EMBER_GO,
            ["The umber project is written in Kotlin.", "The lumen project is written in Kotlin."],
        ),
        (
            "Das Projekt Ember ist in Kotlin geschrieben.",
            "Das Projekt Ember ist nicht mehr in Kotlin geschrieben, sondern jetzt in Go.",
            ["Das Projekt Umber ist in Kotlin geschrieben."],
        ),
    ],
    ids=["english", "german"],
)
"""One subject's update, and other subjects' look-alikes, in English and German."""


def _plan_attached(client, name: str, preset: str, tmp_path):
    """Read collection ``name`` with ``preset``'s field map and our embeddings, as the console
    attaches it, and plan it (no trimming to the guard) on 2025-06-01."""
    from datetime import UTC, datetime

    from consolidation import Policy
    from consolidation.adapters.chroma_layout import Layout
    from consolidation.adapters.chroma_store import ChromaMemoryStore
    from consolidation.adapters.embedder import get_default_embedder
    from consolidation.adapters.vector_cache import VectorCache
    from consolidation.planning import plan
    from consolidation.shapes import preset_field_map

    fm = preset_field_map(preset)
    layout = Layout(
        name,
        field_map=fm,
        embed=lambda t: get_default_embedder().embed(t),
        cache=VectorCache(tmp_path / "v.sqlite3"),
    )
    records = list(ChromaMemoryStore(client.get_collection(name), layout=layout).iter_records())
    return plan(records, Policy(trim_to_guard=False), now=datetime(2025, 6, 1, tzinfo=UTC),
                fieldmap=fm)  # fmt: skip


def _only_the_first_is_reconciled(p, ids: list[str], others: list[str]) -> None:
    """``ids`` = [old, *others, new, the other scope's copy of old]: only old leaves,
    superseded by new; the rest stay."""
    from consolidation import Fate, OpKind

    removed = {rid for op in p.operations for rid in op.removes}
    assert removed == {ids[0]}, [(o.kind, o.source_ids, o.reason) for o in p.operations]
    (op,) = [o for o in p.operations if o.removes]
    assert op.kind == OpKind.RECONCILE and op.source_ids[0] == ids[len(others) + 1]
    for rid in ids[1 : len(others) + 1] + [ids[-1]]:
        assert p.fates[rid] == Fate.KEPT


@UPDATE_CASES
def test_a_mem0_store_of_two_users_reconciles_only_the_same_subject_of_one_user(
    tmp_path, old_same, new, others
):
    """The store is written by mem0ai's own ``ChromaDB.insert`` (tests/agent_stores.py) and
    read with the mem0 preset and our embeddings, as the console attaches it: alice's own
    project moved to Go (reconciled, newest kept); her other projects, and bob's copy of the
    old fact, stay — another subject, another user."""
    import uuid
    from datetime import UTC, datetime

    import chromadb

    from tests.agent_stores import Mem0Memory, write_mem0

    client = chromadb.EphemeralClient()
    name = f"mem0-{uuid.uuid4().hex[:10]}"
    t_old, t_new = datetime(2025, 1, 5, tzinfo=UTC), datetime(2025, 5, 1, tzinfo=UTC)
    written = [Mem0Memory(old_same, user_id="alice", created_at=t_old)]
    written += [Mem0Memory(t, user_id="alice", created_at=t_old) for t in others]
    written += [
        Mem0Memory(new, user_id="alice", created_at=t_new),
        Mem0Memory(old_same, user_id="bob", created_at=t_old),
    ]
    ids = write_mem0(client, name, written)
    _only_the_first_is_reconciled(_plan_attached(client, name, "mem0", tmp_path), ids, others)


@UPDATE_CASES
def test_a_praisonai_store_of_two_agents_reconciles_only_the_same_subject_of_one_agent(
    tmp_path, old_same, new, others
):
    """The store is written by praisonaiagents' own ``Memory.store_long_term`` metadata path
    (``sanitize_chroma_metadata``, epoch-second ``timestamp``, ``time_ns`` ids;
    tests/agent_stores.py) and read with the praisonai preset (created_at = ``timestamp``,
    scope = ``agent_name``), as the console attaches it: the Coder agent's project moved to Go
    (reconciled, newest kept); its other projects, and the Reviewer agent's copy of the old
    fact, stay — another subject, another scope."""
    import uuid
    from datetime import UTC, datetime

    import chromadb

    from tests.agent_stores import PraisonMemory, write_praisonai

    client = chromadb.EphemeralClient()
    name = f"praison-{uuid.uuid4().hex[:10]}"
    t_old = datetime(2025, 1, 5, tzinfo=UTC).timestamp()
    t_new = datetime(2025, 5, 1, tzinfo=UTC).timestamp()
    written = [PraisonMemory(old_same, agent_name="Coder", timestamp=t_old)]
    written += [PraisonMemory(t, agent_name="Coder", timestamp=t_old) for t in others]
    written += [
        PraisonMemory(new, agent_name="Coder", task_id="task-2", timestamp=t_new),
        PraisonMemory(old_same, agent_name="Reviewer", timestamp=t_old),
    ]
    ids = write_praisonai(client, written, collection_name=name)
    _only_the_first_is_reconciled(_plan_attached(client, name, "praisonai", tmp_path), ids, others)
