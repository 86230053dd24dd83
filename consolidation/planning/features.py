"""Per-memory features of the planner, read from each text once and kept between passes.

A planning pass reads some features of *every* memory, not only of the pairs it judges: the
update channel (:mod:`.updates`) asks of each stored text whether it carries an update marker,
a change event or a negation or past-state cue (:func:`marked`). In a full pass that is
per-memory work over the whole store (≈ 25 µs a text here: 25 s at 1M memories); in an
incremental pass it decides which stored rows a new, unmarked memory must be compared with
(only marked ones can be its update partners), so a pass that knew it for every stored row
searches the new rows against those rows only instead of against the whole store.

:class:`FeatureCache` keeps the features by text, as
:class:`~consolidation.adapters.vector_cache.VectorCache` keeps embeddings: a feature depends
only on the text, so a text's features are computed once and reused by every later pass
that is given the same cache (one per store, in the process that plans it). Nothing else
changes with or without a cache: the same pairs are offered and judged (a test plans with a
cold, a warm and no cache and compares the operations).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

from ..aliases import canonical
from ..atoms import ATOM_HINT_RE, cue_hits, fold
from ..changes import change_events, event_index
from ..cues import cue_index
from ..phrases import PhraseIndex
from ..qualifiers import marker_index, update_markers

__all__ = ["FeatureCache", "marked"]


@lru_cache(maxsize=1)
def _any_phrase() -> PhraseIndex:
    """Every phrase that can start an update marker, a change event or a cue."""
    return PhraseIndex.union(marker_index(), event_index(), cue_index())


def marked(text: str) -> bool:
    """Whether ``text`` can be an update channel's query: it carries an update marker
    (:func:`~consolidation.qualifiers.update_markers`), a change event
    (:func:`~consolidation.changes.change_events`) or a negation or past-state cue (what
    :func:`~consolidation.text.parse` counts in ``negations`` and ``past_state``: the cues of
    its scan, read here without taking the text apart into tokens, a third of the cost)."""
    folded = fold(text)
    if (
        not _any_phrase().present(folded)
        and not ATOM_HINT_RE.search(folded)
        and canonical(text) == text
    ):
        # no phrase of the three tables can match, and the cues would be read on this very
        # text (no atom to cut out, no alias replaced): most texts, at a third of the cost
        return False
    if update_markers(folded) or change_events(folded):
        return True
    canon = canonical(text)  # what parse scans for cues: the text unless an alias replaced
    return bool(cue_hits(folded if canon == text else fold(canon)))


class FeatureCache:
    """:func:`marked` of memory texts, kept between passes (module docstring).

    Keyed by the text's ``hash()`` (salted per process, 64 bits; Python keeps it on the string,
    so a lookup costs what a lookup by text costs), never by the text: the cache holds no
    memory's words, so a forgotten memory leaves nothing readable in a long-running process
    (:meth:`forget` drops its entry too). Two texts of one hash (≈ 4·10⁻⁷ at 4M texts) would
    share a flag; that can only change which stored rows an incremental pass compares a new,
    unmarked memory with.

    ``max_texts``: when more texts than this are held, the cache starts again empty (a bound on
    its memory: ≈ 100 bytes a text). Raises ``ValueError`` for ``max_texts < 1``. Safe to share
    between threads: an entry is one dict item, written whole (a race computes a flag twice).
    """

    def __init__(self, max_texts: int = 4_000_000) -> None:
        if max_texts < 1:
            raise ValueError(f"max_texts must be at least 1, got {max_texts}")
        self.max_texts = max_texts
        self._marked: dict[int, bool] = {}

    def __len__(self) -> int:
        return len(self._marked)

    def marked(self, text: str) -> bool:
        """:func:`marked` of ``text``, computed on first use and kept."""
        key = hash(text)
        v = self._marked.get(key)
        if v is None:
            if len(self._marked) >= self.max_texts:
                self._marked = {}
            v = self._marked[key] = marked(text)
        return v

    def forget(self, texts: Sequence[str]) -> int:
        """Drop the entries of ``texts`` (a forgotten memory's): how many were held."""
        held = self._marked
        return sum(held.pop(hash(t), None) is not None for t in texts)

    def marked_rows(
        self, texts: Sequence[str], *, compute_at_most: int | None = None
    ) -> list[int] | None:
        """Indices ``i`` (ascending) of the ``texts`` that are :func:`marked`; a text not
        cached yet is computed and kept. ``None`` (nothing computed) when more than
        ``compute_at_most`` texts are not cached: the caller then takes another way."""
        held = self._marked
        out: list[int] = []
        todo: list[int] = []
        for i, t in enumerate(texts):
            v = held.get(hash(t))
            if v is None:
                todo.append(i)
                if compute_at_most is not None and len(todo) > compute_at_most:
                    return None
            elif v:
                out.append(i)
        get = self.marked
        out.extend(i for i in todo if get(texts[i]))
        out.sort()
        return out
