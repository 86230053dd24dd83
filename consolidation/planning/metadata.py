"""Metadata union for merged memories (docs/ARCHITECTURE.md "Operations").

Metadata is united, never dropped: every key of every source is kept. Rules by key:

- ``created_at`` = earliest, ``last_accessed_at`` = latest (the source's own value is kept, so
  its format is preserved);
- ``importance`` = max, ``access_count`` = sum;
- ``tier`` = the curated tier if any source is curated, else the most common tier (ties: the
  alphabetically first);
- ``evidence``, ``session``, ``supersedes`` and any list-valued key: union, sorted, deduplicated
  (sessions are what "reinforced across sessions" promotion counts);
- ``merged_from`` = the sorted source ids;
- scope keys (:attr:`FieldMap.scope`: ``user_id``, ``agent_id`` …) stay scalars: sources of one
  merge always share their scope (the planner never compares across scopes), and a merge whose
  sources disagree on one raises ``ValueError`` rather than writing a list of users;
- booleans OR-ed (``pinned`` included), other numbers = max (e.g. ``confidence``);
- strings: kept when all sources agree, else the sorted list of distinct values (nothing lost);
- anything else (dicts): the first source's value in the given order.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from ..records import FieldMap

__all__ = ["merge_metadata"]


def _is_num(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def merge_metadata(
    metas: Sequence[Mapping[str, Any]],
    source_ids: Sequence[str],
    *,
    fieldmap: FieldMap | None = None,
    curated_tier: str = "curated",
) -> dict[str, Any]:
    """United metadata of a merge's sources (rules in the module docstring).

    ``metas`` and ``source_ids`` are in the same order; the first is the primary source (the
    one whose text the merge starts from). Returns a new dict with sorted keys. Raises
    ``ValueError`` when the sources' scope values differ.
    """
    fm = fieldmap or FieldMap()
    if len(metas) != len(source_ids):
        raise ValueError("metas and source_ids must have the same length")
    scopes = {fm.scope_key(m) for m in metas}
    if len(scopes) > 1:
        raise ValueError(f"a merge never crosses scopes: {sorted(scopes)}")
    keys = sorted({k for m in metas for k in m})
    out: dict[str, Any] = {}
    list_keys = {fm.evidence, fm.session, fm.supersedes}
    for key in keys:
        present = [m[key] for m in metas if key in m and m[key] is not None]
        if key == fm.merged_from:
            continue
        if not present:
            out[key] = None
            continue
        if key == fm.created_at:
            dated = [(fm.get_created_at(m), i) for i, m in enumerate(metas) if key in m]
            dated = [(t, i) for t, i in dated if t is not None]
            out[key] = metas[min(dated)[1]][key] if dated else present[0]
        elif key == fm.last_accessed_at:
            dated = [(fm.get_last_accessed_at(m), -i) for i, m in enumerate(metas) if key in m]
            dated = [(t, i) for t, i in dated if t is not None]
            out[key] = metas[-max(dated)[1]][key] if dated else present[0]
        elif key == fm.importance:
            out[key] = max(fm.get_importance(m, default=0.0) for m in metas if key in m)
        elif key == fm.access_count:
            out[key] = sum(fm.get_access_count(m) for m in metas)
        elif key == fm.tier:
            tiers = [fm.get_tier(m) for m in metas if key in m]
            if curated_tier in tiers:
                out[key] = curated_tier
            else:
                counts = Counter(tiers)
                out[key] = sorted(counts, key=lambda t: (-counts[t], t))[0]
        elif key in list_keys or any(isinstance(v, list | tuple) for v in present):
            out[key] = sorted({x for m in metas if key in m for x in fm.get_list(m, key)})
        elif all(isinstance(v, bool) for v in present):
            out[key] = any(present)
        elif all(_is_num(v) for v in present):
            out[key] = max(present)
        elif all(isinstance(v, str) for v in present):
            distinct = sorted(set(present))
            out[key] = distinct[0] if len(distinct) == 1 else distinct
        else:
            out[key] = present[0]
    out[fm.merged_from] = sorted(source_ids)
    return {k: out[k] for k in sorted(out) if out[k] is not None}
