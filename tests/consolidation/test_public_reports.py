"""Small inputs distilled from public bug reports of other memory systems, through ``plan()``.

Each case is a 2–4 memory store taken from a report (cited next to it) where a memory system
merged, overwrote or deleted the wrong memory, and the outcome an operator would sign:

- ``"keep"``: nothing removed and nothing asked (different facts, scopes, readings or events);
- ``"conflict"``: a ``conflict`` item, nothing removed (a contradiction the engine cannot
  settle: **unsure means keep both and ask**);
- ``"merge"``: the listed memories become one merge (and, with ``must_keep``, the merged text
  keeps those words, so no source's fact is dropped);
- ``"reconcile:<id>"``: one reconcile keeps ``<id>`` and supersedes the other memory.

Embeddings are the engine's own (all-MiniLM-L6-v2), so the cosines are the ones a real pass
sees. Every case runs under the default policy (budget off: these stores are tiny, one removal
is over the 25 % budget) and the aggressive named policy; a case gives one outcome for both,
or ``(default, aggressive)`` when only the aggressive link threshold makes a paraphrase pair
a merge candidate.
"""

from __future__ import annotations

from datetime import UTC, datetime
from functools import lru_cache

import numpy as np
import pytest

from consolidation import NAMED_POLICIES, Fate, MemoryRecord, OpKind, Plan, Policy
from consolidation.adapters.embedder import get_default_embedder
from consolidation.planning import plan

NOW = datetime(2026, 9, 1, tzinfo=UTC)
POLICIES = {
    "default": Policy(trim_to_guard=False),
    "aggressive": NAMED_POLICIES["aggressive"].with_(trim_to_guard=False),
}
OLD, MID, NEW = "2026-03-01T10:00:00Z", "2026-05-01T10:00:00Z", "2026-08-01T10:00:00Z"
U = {"user_id": "alice"}


def m(mid: str, text: str, **meta) -> tuple[str, str, dict]:
    return (mid, text, {**U, **meta} if "user_id" not in meta else meta)


def case(system: str, ref: str, memories, expected, *, must_keep=(), untouched=(), marks=()):
    """A table row: id ``<system>-<issue>``; ``expected`` is one outcome or (default,
    aggressive); ``must_keep``: words every merged text keeps; ``untouched``: ids kept as is."""
    return pytest.param(
        memories, expected, tuple(must_keep), tuple(untouched), id=f"{system}-{ref}", marks=marks
    )


CASES = [
    # --- mem0 ----------------------------------------------------------------------------------
    # https://github.com/mem0ai/mem0/pull/2709 — "Loves cheese pizza" → "Dislikes cheese pizza"
    # was a DELETE; the preference changed (an UPDATE), so the newer statement is kept and the
    # older one superseded (archived, undoable). Before the fix "Loves" / "Dislikes" were read
    # as two people's names and the pair was left alone.
    case(
        "mem0",
        "pr2709",
        [
            m("old", "Loves cheese pizza", created_at=OLD),
            m("new", "Dislikes cheese pizza", created_at=NEW),
        ],
        "reconcile:new",
    ),
    # https://github.com/mem0ai/mem0/pull/4580 (mem0ai/mem0#4536) — "I hate Chinese food" after
    # "I love Chinese food" deleted the old memory and discarded the new one.
    case(
        "mem0",
        "4536",
        [
            m("old", "I love Chinese food", created_at=OLD),
            m("new", "I hate Chinese food", created_at=NEW),
        ],
        "reconcile:new",
    ),
    # Same report in mem0's own subjectless style.
    case(
        "mem0",
        "4536-likes",
        [
            m("old", "Likes Chinese food", created_at=OLD),
            m("new", "Dislikes Chinese food", created_at=NEW),
        ],
        "reconcile:new",
    ),
    # https://github.com/mem0ai/mem0/pull/5940 — compact() must "only cluster within the same
    # agent_id/run_id scope": the same fact written by two agents stays with each agent.
    case(
        "mem0",
        "pr5940",
        [
            m("a", "Customer prefers email over phone calls", user_id="u1", agent_id="support"),
            m("b", "Customer prefers email over phone calls", user_id="u1", agent_id="sales"),
        ],
        "keep",
    ),
    # https://github.com/bojieli/ai-agent-book/pull/597 (mem0 case study) — lives in Beijing,
    # later moved to Shanghai: the newer residence replaces the older.
    case(
        "mem0",
        "book597",
        [
            m("old", "User lives in Beijing", created_at=OLD),
            m("new", "User lives in Shanghai", created_at=NEW),
        ],
        "reconcile:new",
    ),
    # Same case, recency from mem0's updated_at: the first memory was rewritten last.
    case(
        "mem0",
        "book597-updated_at",
        [
            m("first", "User lives in Shanghai", created_at=OLD, updated_at=NEW),
            m("second", "User lives in Beijing", created_at=MID),
        ],
        "reconcile:first",
    ),
    # Same case in Chinese (the book's own language): the engine has no single-valued
    # attribute table for Chinese, so it may not supersede; it must not merge either.
    case(
        "mem0",
        "book597-zh",
        [m("old", "用户住在北京", created_at=OLD), m("new", "用户住在上海", created_at=NEW)],
        "keep",
    ),
    # --- MemMachine ------------------------------------------------------------------------------
    # https://github.com/MemMachine/MemMachine/issues/320 — test_user1's search returned
    # test_user's memory: two users' near-identical memories are never compared.
    case(
        "memmachine",
        "320",
        [
            m("a", "This is a simple test memory.", user_id="test_user"),
            m("b", "This is a simple test memory.", user_id="test_user1"),
            m("c", "This is a simple test1 memory.", user_id="test_user1"),
        ],
        "keep",
    ),
    # --- Graphiti / Zep ------------------------------------------------------------------------
    # https://github.com/getzep/graphiti/issues/1728 — an additive role retired a still-true
    # fact ("works at" killed by "administers the org account").
    case(
        "graphiti",
        "1728",
        [
            m("job", "Dana works at Acme as the compliance manager", created_at=OLD),
            m("admin", "Dana administers Acme's GitHub organization", created_at=NEW),
        ],
        "keep",
    ),
    case(
        "graphiti",
        "1728-audit",
        [
            m(
                "job",
                "Dana is employed by Acme and manages its compliance function",
                created_at=OLD,
            ),
            m("audit", "Dana imposed an audit requirement on Acme's vendors", created_at=NEW),
        ],
        "keep",
    ),
    # https://github.com/getzep/graphiti/issues/1666 — "User sold X" vs "User owns X": selling
    # ends owning (a change event of the table, consolidation/changes.py), but names no new
    # value, so it is asked, never merged (the aggressive policy merged them into one text) nor
    # kept silently.
    case(
        "graphiti",
        "1666",
        [
            m("owns", "User owns a Tesla Model 3", created_at=OLD),
            m("sold", "User sold the Tesla Model 3", created_at=NEW),
        ],
        "conflict",
    ),
    # https://github.com/getzep/graphiti/issues/893 — timestamps with and without a zone are
    # different instants; two meetings at different times are two events.
    case(
        "graphiti",
        "893",
        [
            m("a", "Meeting with Bob on 2025-09-05T21:00:00+02:00", created_at=OLD),
            m("b", "Meeting with Bob on 2025-09-05T21:00:00Z", created_at=NEW),
        ],
        "keep",
    ),
    # Same clock time in two zones: two different times, never one memory.
    case(
        "graphiti",
        "893-clock",
        [
            m("a", "Daily standup is at 9:00 CET", created_at=OLD),
            m("b", "Daily standup is at 9:00 PST", created_at=NEW),
        ],
        "keep",
    ),
    # --- netclaw ---------------------------------------------------------------------------------
    # https://github.com/netclaw-dev/netclaw/issues/1241 — the merge path "overwrote a pair of
    # dated point-in-time readings": readings on different dates are both kept.
    case(
        "netclaw",
        "1241",
        [
            m("a", "Weight on 2026-05-01: 82.4 kg", created_at=OLD),
            m("b", "Weight on 2026-05-20: 81.9 kg", created_at=NEW),
        ],
        "keep",
    ),
    case(
        "netclaw",
        "1241-disk",
        [
            m("a", "Disk usage on build-01 was 71% on May 3", created_at=OLD),
            m("b", "Disk usage on build-01 was 88% on May 17", created_at=NEW),
        ],
        "keep",
    ),
    # https://github.com/netclaw-dev/netclaw/issues/1241 — the curation prompt "wrongly merged
    # ~45% of the hard 'looks similar but is actually distinct' pairs": one value swapped for
    # another (cosine 0.91 here, above both link thresholds) is never merged. Undated, one
    # slot with two values: asked (unsure means ask, never both silently).
    case(
        "netclaw",
        "1241-near-distinct",
        [m("a", "Prefers dark roast coffee"), m("b", "Prefers light roast coffee")],
        "conflict",
    ),
    # --- Vellum --------------------------------------------------------------------------------
    # https://github.com/vellum-ai/vellum-assistant/pull/24045 — duplicates must be the same
    # fact, not the same topic (745 of 931 memories were destroyed).
    case(
        "vellum",
        "pr24045",
        [
            m("a", "Prefers Python for data analysis scripts"),
            m("b", "Prefers Go for backend services"),
        ],
        "keep",
    ),
    # --- OpenViking ----------------------------------------------------------------------------
    # https://github.com/volcengine/OpenViking/issues/1486 — colleague G was dropped when near
    # duplicates were merged: a merge must keep every name.
    case(
        "openviking",
        "1486",
        [
            m(
                "a",
                "User's colleagues at Initech are Alice, Bob, Chen, Dmitri, Eva, Farah and Gustavo",
            ),
            m("b", "User's colleagues at Initech are Alice, Bob, Chen, Dmitri, Eva and Farah"),
        ],
        "merge",
        must_keep=("Gustavo",),
    ),
    # --- uteke ---------------------------------------------------------------------------------
    # https://github.com/codecoradev/uteke/pull/85 — a true paraphrase (sim 0.82 there): one
    # memory. Before the fix the opening verb "Uses" was read as a name ("about Uses vs about
    # React") and the duplicate stayed.
    case(
        "uteke",
        "pr85",
        [
            m("a", "Uses React for the frontend framework"),
            m("b", "React is used for the frontend framework"),
        ],
        "merge",
    ),
    # --- Letta / MemGPT ------------------------------------------------------------------------
    # https://github.com/letta-ai/letta/issues/552 — the human's name corrected from Chad to
    # Sarah (newer): a changed name is always asked, never reconciled (a spelling fix
    # and another person look alike); the pair's cosine (0.57) is below
    # contradiction_threshold 0.75, so only the twin channel (planning/twins.py) offers it.
    case(
        "letta",
        "552",
        [
            m("a", "The human's first name is Chad", created_at=OLD),
            m("b", "The human's first name is Sarah", created_at=NEW),
        ],
        "conflict",
    ),
    # https://github.com/letta-ai/letta/issues/1571 — "请牢记,我不能喝酒" (remember: I cannot
    # drink alcohol) and the agent blanked the memory. Undated negation pair → ask; judge_pair
    # says "conflict"; MiniLM gives the Chinese pair cosine 0.64 < 0.75, so only the twin
    # channel (one character deleted) offers it to the reviewer.
    case("letta", "1571", [m("a", "用户不能喝酒"), m("b", "用户能喝酒")], "conflict"),
    case("letta", "1571-empty", [m("a", "用户不能喝酒"), m("b", "")], "keep"),
    # --- MatrixOne Memoria ---------------------------------------------------------------------
    # https://github.com/matrixorigin/memoria/issues/89 — a corrected stack (PostgreSQL →
    # MySQL): two versions of one statement that differ in one value, never merged; no change
    # marker and no attribute table for it, so the slot is asked (it was left
    # silently beside the stale stack).
    case(
        "memoria",
        "89",
        [
            m(
                "old",
                "项目技术栈：FastAPI + PostgreSQL + Redis，部署在 Docker 容器中",
                created_at=OLD,
            ),
            m("new", "项目技术栈：FastAPI + MySQL + Redis，部署在 Docker 容器中", created_at=NEW),
        ],
        "conflict",
    ),
    # https://github.com/matrixorigin/memoria/issues/88 — the migration note next to the old
    # stack was not flagged; the two are different statements (a stack, a migration event),
    # never merged into one, and the note does not replace the whole stack: asked.
    case(
        "memoria",
        "88",
        [
            m(
                "old",
                "项目技术栈：FastAPI + PostgreSQL + Redis，部署在 Docker 容器中，使用 GitHub "
                "Actions 做 CI/CD",
                created_at=OLD,
            ),
            m(
                "new",
                "项目技术栈已迁移：从 PostgreSQL 切换到 MySQL，原因是团队更熟悉 MySQL",
                created_at=NEW,
            ),
        ],
        "conflict",
    ),
    # --- Hindsight -----------------------------------------------------------------------------
    # https://github.com/vectorize-io/hindsight/issues/1094 — exact duplicates created by
    # repeated retain cycles, next to an obsolete operational fact: the duplicates are one
    # memory; the other fact (a different time) is untouched.
    case(
        "hindsight",
        "1094",
        [
            m("a", "Deploy window is Tuesday 14:00-16:00 UTC", created_at=OLD),
            m("b", "Deploy window is Tuesday 14:00-16:00 UTC", created_at=NEW),
            m("c", "Deploy window is Thursday 09:00-11:00 UTC", created_at=MID),
        ],
        "merge",
        untouched=("c",),
    ),
    # --- croit llm-gateway (German) ------------------------------------------------------------
    # https://github.com/croit/llm-gateway/issues/17 — "ich bin jetzt nicht mehr im
    # Platform-Team" stored next to the old fact; the newer past-state statement wins. Before
    # the fix "jetzt" (now) counted as a changed word: kept apart (default) or a conflict.
    case(
        "llm-gateway",
        "17",
        [
            m("old", "Ich bin im Platform-Team", created_at=OLD),
            m("new", "Ich bin jetzt nicht mehr im Platform-Team", created_at=NEW),
        ],
        "reconcile:new",
    ),
    # --- memo (Spanish / English) --------------------------------------------------------------
    # https://github.com/jagoff/memo/pull/263 — Spanish/English paraphrases of one fact score
    # ~0.87; our model scores them far lower, so they are kept (never a wrong merge).
    case(
        "memo",
        "pr263",
        [m("es", "Prefiere el café sin azúcar"), m("en", "Prefers coffee without sugar")],
        "keep",
    ),
    case(
        "memo",
        "pr263-negation",
        [
            m("a", "El usuario toma café por la mañana"),
            m("b", "El usuario no toma café por la mañana"),
        ],
        "conflict",
    ),
    # --- Cognee --------------------------------------------------------------------------------
    # https://github.com/topoteretes/cognee/issues/1831 — a later ingestion brings a different
    # value (weight 2040 → 2100 g) and a new property (capacity): first write wins there. A
    # changed number of one state statement: the newer value is kept. Before
    # the fix "2040 g" was read as the year 2040 and the pair as two dated events.
    case(
        "cognee",
        "1831",
        [
            m("old", "The Osprey Atmos 65 backpack weighs 2040 g", created_at=OLD),
            m("new", "The Osprey Atmos 65 backpack weighs 2100 g", created_at=NEW),
        ],
        "reconcile:new",
    ),
    # The added property is more detail, never a reason to drop it: the longer text covers
    # every word of the shorter (a lossless duplicate), so one merge keeps the capacity.
    case(
        "cognee",
        "1831-property",
        [
            m("a", "The Osprey Atmos 65 is a backpack"),
            m("b", "The Osprey Atmos 65 is a backpack with a capacity of 65 litres"),
        ],
        "merge",
        must_keep=("capacity",),
    ),
    # https://github.com/topoteretes/cognee/pull/3534 — "New York City" vs "NYC" stay two
    # entities because the id is derived from the name. The alias table says NYC is New York
    # City, so the two statements are one fact, merged at any cosine.
    case(
        "cognee",
        "3534",
        [
            m("a", "The user lives in New York City."),
            m("b", "The user lives in NYC."),
        ],
        "merge",
        must_keep=("New York City",),
    ),
    # --- Graphiti (updates) --------------------------------------------------------------------
    # https://github.com/getzep/graphiti/issues/1841 — "Kiran lives in Whitefield." then "Kiran
    # moved from Whitefield to Electronic City.": an update (cosine 0.81, under the
    # contradiction threshold before the update channel): the newer statement is kept.
    case(
        "graphiti",
        "1841",
        [
            m("old", "Kiran lives in Whitefield.", created_at=OLD),
            m("new", "Kiran moved from Whitefield to Electronic City.", created_at=NEW),
        ],
        "reconcile:new",
    ),
    # The same report's shape with an unknown order: asked, never left alone.
    case(
        "graphiti",
        "1841-undated",
        [
            m("a", "Kiran lives in Whitefield."),
            m("b", "Kiran moved from Whitefield to Electronic City."),
        ],
        "conflict",
    ),
    # --- sage-wiki / graphify (identifiers) ----------------------------------------------------
    # https://github.com/xoai/sage-wiki/issues/164 — monitoring wells "mw-3" / "mw-2" merged at
    # cosine 0.87; https://github.com/Graphify-Labs/graphify/issues/878 — chip models ASR1603 /
    # ASR1605. Different identifiers are different things.
    case(
        "sage-wiki",
        "164",
        [
            m("a", "Sample taken at mw-3 showed no contamination."),
            m("b", "Sample taken at mw-2 showed no contamination."),
        ],
        "keep",
    ),
    case(
        "graphify",
        "878",
        [
            m("a", "The board uses the ASR1603 chip."),
            m("b", "The board uses the ASR1605 chip."),
        ],
        "keep",
    ),
    # --- aihub-core (mem0's reconcile pass) ----------------------------------------------------
    # https://github.com/bbvch-ai/aihub-core/issues/1717 — "I moved to Zurich" should
    # supersede "User lives in Bern": a newer change event that names the attribute it changes
    # ("moved" → lives) and the new value replaces the state (it was kept beside it before).
    case(
        "aihub-core",
        "1717",
        [
            m("old", "User lives in Bern", created_at=OLD),
            m("new", "I moved to Zurich", created_at=NEW),
        ],
        "reconcile:new",
    ),
    # --- MeetOnMemory --------------------------------------------------------------------------
    # https://github.com/imuniqueshiv/MeetOnMemory/issues/267 — three wordings of one home city.
    case(
        "meetonmemory",
        "267",
        [
            m("a", "I live in Delhi"),
            m("b", "I live in Delhi."),
            m("c", "I currently live in Delhi"),
        ],
        "merge",
        must_keep=("Delhi",),
    ),
    # https://github.com/mem0ai/mem0/issues/5205 — "喜欢喝可乐" then "改成喜欢咖啡" (Chinese):
    # preference changes were never merged and recall picked one at random. The newer text
    # carries an update marker (改成, 现在): it is kept.
    case(
        "mem0",
        "5205",
        [
            m("old", "用户喜欢喝可乐。", created_at=OLD),
            m("new", "用户现在改成喜欢喝咖啡。", created_at=NEW),
        ],
        "reconcile:new",
    ),
    # The operator's own upload (1 Sep / 20 Nov, cosine 0.82): both stayed live in three
    # passes. The newer one says "no longer": it supersedes the older.
    case(
        "operator",
        "tea",
        [
            m("old", "The user prefers tea.", created_at="2025-09-01T09:00:00Z"),
            m(
                "new",
                "The user no longer drinks tea, prefers coffee.",
                created_at="2025-11-20T09:00:00Z",
            ),
        ],
        "reconcile:new",
    ),
    # --- MemOS ---------------------------------------------------------------------------------
    # https://github.com/MemTensor/MemOS/issues/130 — Chinese input became "The user plans to
    # visit Paris on 2025-05-26."; a plan on another date is another plan.
    case(
        "memos",
        "130",
        [
            m("a", "The user plans to visit Paris on 2025-05-26."),
            m("b", "The user plans to visit Paris on 2025-06-26."),
        ],
        "keep",
    ),
]


@lru_cache(maxsize=1)
def _embedder():
    return get_default_embedder()


def records_of(memories) -> list[MemoryRecord]:
    vecs = np.asarray(
        _embedder().embed([t if t.strip() else "." for _, t, _ in memories]), dtype=np.float32
    )
    return [MemoryRecord(mid, text, vecs[k], meta) for k, (mid, text, meta) in enumerate(memories)]


def outcome(p: Plan) -> str:
    """``"keep"``, ``"conflict"``, ``"merge"``, ``"reconcile:<kept id>"`` or a description of
    anything else the plan does (so a wrong plan shows up readably in the assertion)."""
    kinds = sorted({op.kind.value for op in p.operations})
    if not p.operations:
        return "keep"
    if kinds == ["conflict"]:
        return "conflict"
    if kinds == ["merge"] and len(p.operations) == 1:
        return "merge"
    if kinds == ["reconcile"] and len(p.operations) == 1:
        return f"reconcile:{p.operations[0].source_ids[0]}"
    return "; ".join(
        f"{op.kind.value}({','.join(op.source_ids)} -{','.join(op.removes)})" for op in p.operations
    )


@pytest.mark.parametrize("policy_name", list(POLICIES))
@pytest.mark.parametrize(("memories", "expected", "must_keep", "untouched"), CASES)
def test_public_report(memories, expected, must_keep, untouched, policy_name):
    want = expected if isinstance(expected, str) else expected[policy_name == "aggressive"]
    p = plan(records_of(memories), POLICIES[policy_name], now=NOW)
    assert outcome(p) == want
    for op in p.by_kind(OpKind.MERGE):
        for word in must_keep:
            assert word in op.result_document
    for mid in untouched:
        assert p.fates[mid] == Fate.KEPT
