"""Copies beside a conflict: one question, and the spare copies pruned.

A memory stored three times ("Alice is allergic to penicillin." × 3) that contradicts another
("Alice is not allergic to penicillin.") gave three conflict items, one per copy, and the copies
never merged (a memory held by a conflict is kept out of merges, folds and windows). Now the
contradiction stage asks once: the first conflict between two texts stands for every pair of
their copies (same scope, same :func:`~consolidation.text.normalize_text` key: the ``exact``
stage's links), and each other copy is a PRUNE (rule ``exact_copy``) that keeps the copy the
conflict holds — it loses nothing, every word stays in that copy. A copy that may not be
removed (pinned or curated, kept by a decision, held by another conflict or a winner of this
pass) keeps its own question, as before.
"""

from __future__ import annotations

from ..plans import Fate, Operation, OpKind
from .constraints import held_kept
from .state import PlanState, short

__all__ = ["copy_representatives", "spare_copies"]


def copy_representatives(st: PlanState) -> dict[int, int]:
    """Row → the first row of its copies (the ``exact`` stage's edges ``(first, other)``);
    rows without a copy are absent."""
    return {j: i for i, j in st.exact_edges}


def _prune_copy(st: PlanState, spare: int, keep: int) -> bool:
    """PRUNE ``spare``, an exact copy of ``keep`` (which a conflict holds); False when it may
    not be removed."""
    if spare == keep or st.removed[spare] or st.protected[spare]:
        return spare == keep
    if spare in st.held or spare in st.winners:
        return False
    if held_kept(st, spare, "prune", "an exact copy of a memory asked about in a conflict"):
        return False
    ids = st.ids
    st.removed[spare] = True
    st.fates[ids[spare]] = Fate.PRUNED
    st.ops_prune.append(
        Operation(
            kind=OpKind.PRUNE,
            source_ids=[ids[spare]],
            source_hashes=[st.hashes[spare]],
            removes=[ids[spare]],
            rule="exact_copy",
            reason=(
                f"an exact copy of “{short(st.docs[keep])}” ({ids[keep]}), which stays and is "
                "asked about in a conflict: nothing is lost"
            ),
            scores={"copy_of": ids[keep]},
        )
    )
    return True


def spare_copies(
    st: PlanState,
    reps: dict[int, int],
    asked: dict[tuple[int, int], tuple[int, int]],
    a: int,
    b: int,
) -> bool:
    """Whether the conflict ``a``/``b`` repeats one already asked between copies of the same
    two texts (``asked``: representative pair → the pair its conflict holds; this pair is
    recorded when it is the first). Its copies of the held memories are then pruned
    (:func:`_prune_copy`) and True is returned: no second question. False — ask it — when it is
    the first, when the policy merges no exact copies, or when a copy may not be removed."""
    ra, rb = reps.get(a, a), reps.get(b, b)
    key = (min(ra, rb), max(ra, rb))
    first = asked.get(key)
    if first is None:
        asked[key] = (a, b)
        return False
    if not st.policy.merge_exact:
        return False
    fa, fb = first
    keep_a, keep_b = (fa, fb) if reps.get(fa, fa) == ra else (fb, fa)
    return _prune_copy(st, a, keep_a) and _prune_copy(st, b, keep_b)
