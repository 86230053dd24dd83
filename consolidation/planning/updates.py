"""Third candidate channel: *updates*, a text that says it replaces another, at a lower cosine.

A paraphrased update scores below the contradiction stage's 0.75 more often than not:
all-MiniLM-L6-v2 gives "The project uses PostgreSQL." / "The project migrated to MySQL
instead of PostgreSQL." 0.61, "The team uses Slack for chat." / "The team switched to Teams
for chat." 0.66, "User lives in Paris." / "User moved from Paris to Berlin." 0.73
(``bench/update_floor.py``: 19 update pairs in en de fr es ja zh, minimum 0.606, median
0.794). Such a pair was never judged, so both memories stayed live and the agent was told both.

This channel offers :func:`~consolidation.judgment.judge_pair` every pair of one scope in which

- neither is episodic (a dialog turn is an event, never updated: the judge's update rule
  skips it too);
- one text (the *query*) carries an update marker (:data:`consolidation.qualifiers
  .UPDATE_MARKERS`), a negation or a past-state cue (:data:`consolidation.cues.CUES`) or a
  change event (:data:`consolidation.changes.CHANGE_EVENTS`);
- the two texts share at least two content words (subject and attribute; the judge checks the
  rest) — for a change event one, or none when the other text names the attribute the event
  changes ("Wohnt in Bern" / "Ist nach Zürich gezogen", :mod:`consolidation.events`); for a
  category retraction one ("No longer likes any fruit" / "Likes apples",
  :mod:`consolidation.categories`);
- their cosine is at least :data:`UPDATE_FLOOR` (0.55: the measured minimum 0.606 less a 0.05
  margin), or for a change event :data:`EVENT_FLOOR` (0.25) and for a category retraction
  :data:`CATEGORY_FLOOR` (0.18) among its :data:`EVENT_NEAREST` nearest rows.

Cost: one exact query × store product (:func:`~.vectors.query_pairs`) over at most
:data:`MAX_QUERIES` query rows (the first by row order; a store with more marked rows is
searched for those in later passes as they become new), then at most :data:`MAX_PARTNERS`
partners per query (the most similar), so the judged pairs are O(queries), never O(n²) — a
store of templated memories ("User likes X now" × 4,000) costs 4,000 × 8 judgements at most.
In a partial incremental pass only new rows are queries, and a new row is also offered to the
marked old rows it is similar to (the query side is then the new row).
"""

from __future__ import annotations

import numpy as np

from ..atoms import fold
from ..categories import category_link, retracts_a_category
from ..changes import change_events
from ..events import names_attribute
from ..text import parse
from .features import marked
from .state import PlanState
from .vectors import query_pairs, subset_pairs

__all__ = [
    "CATEGORY_FLOOR",
    "EVENT_FLOOR",
    "EVENT_NEAREST",
    "MAX_PARTNERS",
    "MAX_QUERIES",
    "UPDATE_FLOOR",
    "update_pairs",
]

UPDATE_FLOOR = 0.55
"""Cosine floor of the channel (all-MiniLM-L6-v2; measured in ``bench/update_floor.py``)."""
EVENT_FLOOR = 0.25
"""Cosine floor for a change event's partners (all-MiniLM-L6-v2: the field reports' event pairs
measured 0.294 "User prefers React" / "User switched to Svelte", 0.401 "Wohnt in Bern" / "Ist
nach Zürich gezogen", 0.533, 0.600, 0.739; the minimum less a 0.05 margin, as for
:data:`UPDATE_FLOOR`). Only partners the event names (:func:`_linked`) are judged."""
CATEGORY_FLOOR = 0.18
"""Cosine floor for the partners of a text that retracts a category (all-MiniLM-L6-v2: the
category pairs of ``tests/consolidation/test_judgment_categories.py`` measured 0.236 "Come pollo
los domingos" / "Ya no come carne" to 0.673; the minimum less a 0.05 margin), among its
:data:`EVENT_NEAREST` nearest rows. Only partners naming a member of the category with a shared
predicate are judged (:func:`consolidation.categories.category_link`)."""
EVENT_NEAREST = 32
"""Nearest partners per change-event row searched at :data:`EVENT_FLOOR` (then linked ones
judged, at most :data:`MAX_PARTNERS`)."""
MAX_QUERIES = 4096
"""Query rows per pass (≈ 2 s of exact product on 100K rows here)."""
MAX_PARTNERS = 8
"""Partners judged per query row, most similar first."""


def _linked(q: str, other: str, shared: int) -> bool:
    """Two shared content words; or, for a change event ("Ist nach Zürich gezogen"), one
    shared word or the attribute it changes named by the other text ("Wohnt in Bern"); or a
    category one text retracts and the other names members of ("No longer eats any fruit" /
    "Likes apples": :func:`consolidation.categories.category_link`)."""
    if shared >= 2:
        return True
    if shared and category_link(parse(q), parse(other)):
        return True
    for e, s in ((q, other), (other, q)):
        rows = change_events(parse(e).folded)
        if rows and (shared or names_attribute(parse(s).folded, rows)):
            return True
    return False


def _floor_pairs(st: PlanState, queries: list[int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Pairs ``(i, j, cosine)`` at cosine ≥ :data:`UPDATE_FLOOR` with an end in ``queries``
    (:func:`~.vectors.query_pairs`) — or, in a partial pass whose feature cache knows every
    stored row (:class:`~.features.FeatureCache`), those of them that can be update pairs: a
    marked query's pairs with the whole store, an unmarked query's with the marked rows only
    (a pair with neither end marked is never offered, :func:`update_pairs`), so the product
    covers the marked rows instead of the store; the pairs offered are the same. The flags of
    the stored rows come from the pass's :class:`~.rowcache.KeptRows` when it has them (one
    gather instead of a lookup per text)."""
    q = np.asarray(queries, np.int64)
    if st.partial and st.features is not None:
        if st.kept is not None:  # the flags kept with the stored rows (:mod:`.rowcache`)
            store = st.kept.marked_rows(st.docs, st.features.marked)
        else:
            store = st.features.marked_rows(st.docs, compute_at_most=len(st.new_idx))
        if store is not None:
            flags = [st.features.marked(st.docs[i]) for i in queries]
            mq, uq = q[np.array(flags, bool)], q[~np.array(flags, bool)]
            ai, aj, as_ = query_pairs(st.emb, UPDATE_FLOOR, mq)
            bi, bj, bs = subset_pairs(st.emb, UPDATE_FLOOR, uq, np.asarray(store, np.int64))
            code, first = np.unique(
                np.concatenate([ai * st.n + aj, bi * st.n + bj]), return_index=True
            )
            sims = np.concatenate([as_, bs])[first]
            return code // st.n, code % st.n, sims
    return query_pairs(st.emb, UPDATE_FLOOR, q)


def update_pairs(st: PlanState, skip: set[tuple[int, int]]) -> dict[tuple[int, int], float]:
    """Update-channel pairs of ``st`` not in ``skip`` (pairs another channel already offers):
    ``{(i, j): cosine}``, ``i < j``, same scope, sharing two content words, at least one end
    new. Empty when reconcile is off or the store has fewer than two rows."""
    n = st.n
    if n < 2 or not len(st.new_idx) or not st.policy.reconcile:
        return {}
    rows = st.new_idx.tolist() if st.partial else range(n)
    episodic = st.layers
    is_marked = st.features.marked if st.features is not None else marked
    queries = [i for i in rows if st.docs[i].strip() and "episodic" not in episodic[i]]
    if not st.partial:
        queries = [i for i in queries if is_marked(st.docs[i])]
    queries = queries[:MAX_QUERIES]
    if not queries:
        return {}
    pi, pj, ps = _floor_pairs(st, queries)
    events = [i for i in queries if change_events(fold(st.docs[i]))]
    if events:  # a change event and its state score low: "User prefers React" / "… switched
        # to Svelte" 0.29; the judge's link (attribute or object word) is the filter
        ei, ej, es = query_pairs(
            st.emb, EVENT_FLOOR, np.asarray(events, np.int64), per_row=EVENT_NEAREST
        )
        pi, pj, ps = np.concatenate([pi, ei]), np.concatenate([pj, ej]), np.concatenate([ps, es])
    cats = [i for i in queries if retracts_a_category(parse(st.docs[i]))]
    if cats:  # "Ya no come carne" / "Come pollo los domingos" 0.24; category_link filters
        ci, cj, cs = query_pairs(
            st.emb, CATEGORY_FLOOR, np.asarray(cats, np.int64), per_row=EVENT_NEAREST
        )
        pi, pj, ps = np.concatenate([pi, ci]), np.concatenate([pj, cj]), np.concatenate([ps, cs])
    qset = set(queries)
    by_query: dict[int, list[tuple[float, int]]] = {}
    for a, b, s in zip(pi.tolist(), pj.tolist(), ps.tolist(), strict=True):
        if (a, b) in skip or st.scopes[a] != st.scopes[b]:
            continue
        q, other = (a, b) if a in qset else (b, a)
        by_query.setdefault(q, []).append((s, other))
    out: dict[tuple[int, int], float] = {}
    for q, partners in by_query.items():
        partners.sort(key=lambda t: (-t[0], t[1]))
        tq = set(parse(st.docs[q]).tokens)
        q_marked = is_marked(st.docs[q])
        taken = 0
        for s, other in partners:
            if taken >= MAX_PARTNERS:
                break
            if "episodic" in episodic[other] or not (q_marked or is_marked(st.docs[other])):
                continue
            if not _linked(st.docs[q], st.docs[other], len(tq & set(parse(st.docs[other]).tokens))):
                continue
            out[(q, other) if q < other else (other, q)] = float(s)
            taken += 1
    return out
