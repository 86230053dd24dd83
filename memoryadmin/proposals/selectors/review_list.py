"""The Review list as the reviewer opened it.

Excluding one operation re-measures what the others lose (a word the excluded memory keeps is
no longer lost elsewhere), so their risk can fall below the line between two renders of the
list: 13 prunes once left a 69-operation list while the reviewer worked through it. The list
keeps the operations it held when the page was loaded (``pinned``) until the reviewer reloads,
and says how many moved (:func:`review_list_moves`). Reads only; the view keeps the ids in the
session.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from memoryadmin.proposals.models import Pass
from memoryadmin.proposals.selectors.review import ONE_BY_ONE

__all__ = ["PINNED_MAX", "ListMoves", "review_line_ids", "review_list_moves"]

PINNED_MAX = 5_000
"""Most operation ids a list keeps as opened (a session cookie's worth); a longer list is not
pinned (its reviewer works by filters and bulk actions, not one by one)."""


def review_line_ids(run: Pass) -> list[int]:
    """The ids of the operations of ``run`` listed one by one now (``ONE_BY_ONE``), sorted;
    ``[]`` when the pass is not reviewable or more than :data:`PINNED_MAX` are listed."""
    if not run.is_reviewable:
        return []
    ids = list(
        run.operations.filter(ONE_BY_ONE)
        .order_by("pk")
        .values_list("pk", flat=True)[: PINNED_MAX + 1]
    )
    return ids if len(ids) <= PINNED_MAX else []


@dataclass(frozen=True)
class ListMoves:
    """How the list changed since it was opened: ``below`` operations it held are now below the
    risk line (they stay listed, marked, until a reload), ``above`` rose above it since."""

    below: int = 0
    above: int = 0


def review_list_moves(run: Pass, pinned: Collection[int]) -> ListMoves:
    """Counts of :class:`ListMoves` of ``run`` against the ``pinned`` ids (two queries);
    nothing moved when ``pinned`` is empty (the list was never pinned)."""
    if not pinned:
        return ListMoves()
    now = run.operations.filter(ONE_BY_ONE)
    still = now.filter(pk__in=list(pinned)).count()
    return ListMoves(below=len(pinned) - still, above=now.count() - still)
