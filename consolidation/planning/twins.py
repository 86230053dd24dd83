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

Which rows take part: every row in a full pass (``O(n × tokens)``: ≈ 0.35 s per 100K
seven-word texts here, their normalised texts given: a third of the time of one tuple built
and hashed per key, measured on 200K texts in one process); in a partial incremental pass,
every row when the store has at most :data:`PARTIAL_ALL_ROWS` rows, else only the new rows
and their embedding partners, so an incremental pass stays O(new) on a large store (a twin of
a new memory among old, unrelated rows of a store that big is found by the next full pass).
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable
from itertools import chain, compress, islice

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


_U = np.uint64
_P = 0x9E3779B97F4A7C15  # odd: invertible modulo 2**64
_POW = np.array([pow(_P, j, 1 << 64) for j in range(MAX_TOKENS + 1)], dtype=_U)
_P_INV = _U(pow(_P, -1, 1 << 64))
_CHUNK = 1 << 14
"""Rows keyed at a time: their token lists (≈ 8 MB) and the padded ``(rows, MAX_TOKENS)``
matrices (2 MB each) exist for one chunk only."""


def _mix(x: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser (Steele et al. 2014), ``uint64`` in and out, wrapping."""
    x = x ^ (x >> _U(30))
    x = x * _U(0xBF58476D1CE4E5B9)
    x = x ^ (x >> _U(27))
    x = x * _U(0x94D049BB133111EB)
    return x ^ (x >> _U(31))


def _keyed(
    rest: np.ndarray, scope: np.ndarray, length: np.ndarray, slot: np.ndarray, ns: int
) -> np.ndarray:
    """One 64-bit key per token sequence: its polynomial hash ``rest`` mixed with its scope's
    hash, its length and, for a substitution key (``ns`` 1), the position ``slot``."""
    tag = (length.astype(_U) << _U(8)) | (slot.astype(_U) << _U(1)) | _U(ns)
    return _mix(rest ^ _mix(scope ^ _mix(tag)))


def _keys(
    st: PlanState, rows: Iterable[int]
) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[int, str]]:
    """Hashed keys of ``rows``: ``(hash int64, row int64, role int8)`` per key (role 0 = a whole
    text, 1 = a text with one token deleted, 2 = a substitution slot) and the normalised texts.

    A text's tokens are hashed once; the key of the text without token ``k`` is then read off
    the prefix sums of its polynomial hash ``Σ h(t_j)·P^j`` (mod 2⁶⁴: the tokens before ``k``
    as they are, the ones after shifted down one power by ``P⁻¹``), for every row and ``k`` at
    once — not one tuple built and hashed per key. Equal token sequences of one scope always
    share a key; a collision only offers a pair that :func:`twin_pairs` then refuses."""
    pending = iter(rows)
    norm: dict[int, str] = {}
    # grown in place (as a list over-allocates): the keys are held once, not per chunk and
    # then again whole
    hashes, owners, roles = array("q"), array("q"), array("b")
    while chunk := list(islice(pending, _CHUNK)):  # a chunk's tokens only: 1M's are ~0.5 GB
        texts = _texts(st, chunk)
        toks = list(map(_tokens, texts))
        length = np.fromiter(map(len, toks), np.int64, len(toks))
        ok = ((length >= MIN_TOKENS - 1) & (length <= MAX_TOKENS)).tolist()
        own = np.fromiter(compress(chunk, ok), np.int64)
        length = length[np.asarray(ok, dtype=bool)]
        norm.update(zip(own.tolist(), compress(texts, ok), strict=True))
        sc = np.fromiter(map(hash, map(st.scopes.__getitem__, own.tolist())), np.int64).view(_U)
        tokens = np.fromiter(map(hash, chain.from_iterable(compress(toks, ok))), np.int64)
        for keys, who, role in _chunk_keys(own, length, sc, tokens.view(_U)) if len(own) else ():
            hashes.frombytes(keys.tobytes())
            owners.frombytes(who.tobytes())
            roles.frombytes(role.tobytes())
    return (
        np.frombuffer(hashes, np.int64) if len(hashes) else np.empty(0, np.int64),
        np.frombuffer(owners, np.int64) if len(owners) else np.empty(0, np.int64),
        np.frombuffer(roles, np.int8) if len(roles) else np.empty(0, np.int8),
        norm,
    )


def _texts(st: PlanState, rows: list[int]) -> list[str]:
    """The normalised texts of ``rows``: ``st.keys`` where the ``exact`` stage set them."""
    kept, docs = st.keys, st.docs
    return [t if kept and (t := kept[i]) is not None else normalize_text(docs[i]) for i in rows]


def _chunk_keys(
    own: np.ndarray, length: np.ndarray, sc: np.ndarray, tokens: np.ndarray
) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """:func:`_keys` of ``m`` texts: rows ``own``, token counts ``length`` (2 to
    :data:`MAX_TOKENS`), scope hashes ``sc`` and their token hashes ``tokens`` (``uint64``, the
    texts' tokens one after another): ``(keys, rows, role)`` for roles 0, 1 and 2."""
    m = len(own)
    grid = np.zeros((m, MAX_TOKENS), dtype=_U)
    starts = np.concatenate(([0], np.cumsum(length)[:-1]))
    grid[np.repeat(np.arange(m), length), np.arange(len(tokens)) - np.repeat(starts, length)] = (
        tokens
    )
    cum = np.cumsum(grid * _POW[:MAX_TOKENS], axis=1, dtype=_U)  # Σ_{j≤k} h_j·P^j
    whole = cum[:, -1]
    before = np.concatenate((np.zeros((m, 1), _U), cum[:, :-1]), axis=1)  # Σ_{j<k}
    rest = before + (whole[:, None] - cum) * _P_INV  # the tokens without token k
    r, k = np.nonzero((np.arange(MAX_TOKENS) < length[:, None]) & (length[:, None] >= 3))
    rest_k, sc_k, len_k = rest[r, k], sc[r], length[r] - 1
    no_slot = np.zeros(len(r), np.int64)
    return [
        (_keyed(whole, sc, length, np.zeros(m, np.int64), 0), own, np.zeros(m, np.int8)),
        (_keyed(rest_k, sc_k, len_k, no_slot, 0), own[r], np.ones(len(r), np.int8)),
        (_keyed(rest_k, sc_k, len_k, k, 1), own[r], np.full(len(r), 2, np.int8)),
    ]


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

    Uses ``st.keys`` (normalised texts of the ``exact`` stage) where set. Keys are 64-bit
    hashes (:func:`_keys`) held in numpy arrays (about 2 × tokens + 1 int64 per text: 15M keys,
    0.3 GB, for 1M seven-word texts) and grouped by one sort; every matched pair is then checked
    exactly, its two scopes included.
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
        if st.scopes[a] == st.scopes[b] and _one_apart(norm[a], norm[b]):
            out[(a, b)] = float(np.dot(st.emb[a], st.emb[b]))
    return out
