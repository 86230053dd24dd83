"""Planning strategies: candidate search, contradictions, merge/promote/prune → a `Plan`.

Pure and deterministic (I-8): no store access, no network, the clock passed in as ``now``.

:func:`plan` (:mod:`.engine`) runs the stages in order over one :class:`~.state.PlanState`:
:mod:`.state` (prepare), :mod:`.prune`, :mod:`.grouping` (candidates, exact, contradictions,
complete linkage), :mod:`.windows` (folds, session and semantic windows) and
:mod:`.operations` (merge, promote, budget). :mod:`.candidates` is the pair search and
:mod:`.metadata` unites the metadata of merged memories.
"""

from __future__ import annotations

from .candidates import candidate_pairs, normalize_rows
from .engine import plan, promotion_rules
from .features import FeatureCache
from .metadata import merge_metadata
from .rowcache import RowCache

__all__ = [
    "FeatureCache",
    "RowCache",
    "candidate_pairs",
    "merge_metadata",
    "normalize_rows",
    "plan",
    "promotion_rules",
]
