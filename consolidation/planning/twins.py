"""Second candidate channel: *twins*, two short texts one word (or one CJK/Thai character) apart.

The embedding search (:mod:`.candidates`) offers a pair to the contradiction stage only at
cosine ≥ ``contradiction_threshold`` (0.75). A correction that changes the one word that
matters can score far below that: all-MiniLM-L6-v2 gives "The human's first name is Chad" /
"… is Sarah" cosine 0.57 (letta-ai/letta#552) and "用户不能喝酒" / "用户能喝酒" ("the user
cannot / can drink alcohol") 0.64 (letta-ai/letta#1571), so neither was ever judged and no
reviewer was asked (tests/consolidation/test_public_reports.py). Two texts that differ in
exactly one token are offered here at whatever cosine they have; :func:`~consolidation
.judgment.judge_pair` still decides (a one-word swap of two values of one frame is reconciled
when dated and marked or single-valued, else asked, :mod:`consolidation.slots`; an undated
negation is a ``"conflict"`` for a reviewer).

How (the deletion neighbourhood of SymSpell, Garbe 2012, over tokens instead of letters):
each text of up to :data:`MAX_TOKENS` tokens (its
:func:`~consolidation.text.normalize_text` split on spaces; a text without spaces, as CJK or
Thai, split into characters) is keyed by its scope plus

- ``("=", tokens)``: the whole text,
- ``("-", tokens without token k)`` for each k: matched against another's whole text, a
  deletion/insertion ("不能" / "能"),
- ``("~", k, tokens without token k)``: matched against another's same key, a substitution
  at the same position ("Chad" / "Sarah").

Two texts sharing a key (and not already an embedding pair, not equal) are twins. A key held
by more than :data:`MAX_BUCKET` texts is a template ("User likes X" with many values) and is
skipped: those are distinct values, and the bucket would cost O(m²) judgements.

Which rows take part: every row in a full pass (``O(n × tokens)``: 1.0 s CPU per 100K
seven-word texts here, normalisation included); in a partial incremental pass, every row when
the store has at most :data:`PARTIAL_ALL_ROWS` rows, else only the new rows and their
embedding partners, so an incremental pass stays O(new) on a large store (a twin of a new
memory among old, unrelated rows of a store that big is found by the next full pass).
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable

import numpy as np

from ..text import normalize_text
from .state import PlanState, equal_runs

__all__ = ["MAX_BUCKET", "MAX_TOKENS", "MIN_TOKENS", "PARTIAL_ALL_ROWS", "twin_pairs"]

MIN_TOKENS = 3
"""Shorter texts are not keyed: two two-word texts one word apart share too little to be
one statement ("likes tea" / "likes jazz")."""
MAX_TOKENS = 16
"""Longer texts are not keyed: one word of a long text changing is the embedding's job (its
cosine stays high), and the keys grow with the length."""
MAX_BUCKET = 8
"""A key held by more texts than this is a template with many values, skipped (see above)."""
PARTIAL_ALL_ROWS = 100_000
"""In a partial incremental pass every row is keyed up to this store size (≈ 1 s CPU here)."""


def _tokens(key: str) -> tuple[str, ...]:
    words = key.split(" ")
    return tuple(words) if len(words) > 1 else tuple(key)


def _keys(
    st: PlanState, rows: Iterable[int]
) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[int, str]]:
    """Hashed keys of ``rows``: ``(hash int64, row int64, role int8)`` per key (role 0 = a whole
    text, 1 = a text with one token deleted, 2 = a substitution slot) and the normalised texts."""
    hashes, owners, roles = array("q"), array("q"), array("b")
    norm: dict[int, str] = {}
    for i in rows:
        key = kept if st.keys and (kept := st.keys[i]) is not None else normalize_text(st.docs[i])
        toks = _tokens(key) if key else ()
        if not MIN_TOKENS - 1 <= len(toks) <= MAX_TOKENS:
            continue
        norm[i] = key
        scope = st.scopes[i]
        hashes.append(hash(("-", scope, toks)))
        owners.append(i)
        roles.append(0)
        if len(toks) < MIN_TOKENS:
            continue  # only the shorter side of a deletion pair
        for k in range(len(toks)):
            rest = toks[:k] + toks[k + 1 :]
            hashes.extend((hash(("-", scope, rest)), hash(("~", scope, k, rest))))
            owners.extend((i, i))
            roles.extend((1, 2))
    as_np = (
        np.frombuffer(a, dtype=t) if len(a) else np.empty(0, t)
        for a, t in ((hashes, np.int64), (owners, np.int64), (roles, np.int8))
    )
    h, o, r = as_np
    return h, o, r, norm


def _one_apart(a: str, b: str) -> bool:
    """Whether token lists of ``a`` and ``b`` are one substitution, insertion or deletion apart
    (checks a hashed match exactly, so a hash collision never makes a pair)."""
    x, y = _tokens(a), _tokens(b)
    if len(x) < len(y):
        x, y = y, x
    if len(x) == len(y):
        return sum(p != q for p, q in zip(x, y, strict=True)) == 1
    if len(x) != len(y) + 1:
        return False
    return any(x[:k] + x[k + 1 :] == y for k in range(len(x)))


def twin_pairs(st: PlanState) -> dict[tuple[int, int], float]:
    """Twin pairs of ``st`` not already in ``st.sim``: ``{(i, j): cosine}``, ``i < j``, cosine of
    the normalised embeddings in [-1, 1] (float). Same scope only; empty texts never.

    Uses ``st.keys`` (normalised texts of the ``exact`` stage) where set. Keys are Python
    hashes held in numpy arrays (about 2 × tokens + 1 int64 per text: 15M keys, 0.3 GB, for 1M
    seven-word texts) and grouped by one sort; every matched pair is then checked exactly.
    """
    n = st.n
    if n < 2 or not len(st.new_idx):
        return {}
    rows = st.new_and_partners() if st.partial and n > PARTIAL_ALL_ROWS else range(n)
    h, owner, role, norm = _keys(st, rows)
    if len(h) < 2:
        return {}
    order, runs = equal_runs(h)
    owner, role = owner[order], role[order]
    found: set[tuple[int, int]] = set()
    skipped = 0
    st.bounds["twin_bucket"] = MAX_BUCKET
    for s0, stop in runs:
        size = stop - s0
        if size > MAX_BUCKET:
            skipped += 1
            continue  # a template with many values
        members = list(zip(owner[s0:stop].tolist(), role[s0:stop].tolist(), strict=True))
        for x in range(size):
            for y in range(x + 1, size):
                (a, ra), (b, rb) = members[x], members[y]
                # substitution slots pair with each other; a deleted-token key with a whole text
                if a != b and (ra == rb == 2 or {ra, rb} == {0, 1}):
                    found.add((a, b) if a < b else (b, a))
    if skipped:
        st.bounds_hit["twin_bucket"] = {"keys_skipped": skipped}
    new = st.is_new
    out: dict[tuple[int, int], float] = {}
    tpl = st.templates
    series = tpl.series_group if tpl is not None else {}
    for a, b in sorted(found):
        if (a, b) in st.sim or not (new[a] or new[b]) or norm[a] == norm[b]:
            continue
        if a in series and series[a] == series.get(b):
            continue  # two records of one numbered series: distinct (planning/templates.py)
        if _one_apart(norm[a], norm[b]):
            out[(a, b)] = float(np.dot(st.emb[a], st.emb[b]))
    return out
