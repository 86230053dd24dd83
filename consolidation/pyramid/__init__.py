"""The memory pyramid: hierarchical summaries over clusters of related memories (seeds/002,
"Strategy 4: Hierarchical Summarization": specific interactions at the base, patterns in the
middle, insights at the top).

A pass with ``Policy.summarize`` on adds SUMMARIZE operations
(:class:`~consolidation.plans.OpKind`): each writes one summary memory over a cluster of
related memories of one scope (never across ``user_id``/``agent_id``/… —
:meth:`~consolidation.records.FieldMap.scope_key`), in the ``summary`` layer, with its level
and its children's ids in metadata (:mod:`.layout`), and removes nothing. Level 1 summarises a
topic of memories, level 2 a theme of level-1 summaries, level 3 the profile of the scope over
its themes.

Modules, in the order a pass uses them: :mod:`.layout` (metadata keys, ids, digests),
:mod:`.clusters` (scikit-learn clustering of the pass's embeddings), :mod:`.extractive` (the
offline writer), :mod:`.abstractive` (the LLM writer: fixed prompt, children quoted as data,
validated JSON reply, every sentence citing child ids) and :mod:`.run` (:func:`build_pyramid`,
matching clusters to the summaries already written so the same memories give the same summary,
updated rather than duplicated).

Pure: no network but the :class:`~consolidation.protocols.JSONWriter` it is handed.
"""

from __future__ import annotations

from .abstractive import (
    SYSTEM_PROMPT,
    abstractive_summary,
    estimate_tokens,
    extract_quoted_data,
    parse_summary,
)
from .clusters import METHODS, cluster_rows
from .extractive import EXTRACTIVE, Draft, extractive_summary
from .layout import (
    CHILDREN_KEY,
    CITATIONS_KEY,
    DIGEST_KEY,
    LEVEL_KEY,
    MAX_LEVEL,
    SUMMARY_LAYER,
    WRITER_KEY,
    children_digest,
    summary_id,
    summary_level,
)
from .run import EXTRACTIVE_RULE, LLM_RULE, MATCH_JACCARD, PyramidResult, build_pyramid

__all__ = [
    "CHILDREN_KEY",
    "CITATIONS_KEY",
    "DIGEST_KEY",
    "EXTRACTIVE",
    "EXTRACTIVE_RULE",
    "LEVEL_KEY",
    "LLM_RULE",
    "MATCH_JACCARD",
    "MAX_LEVEL",
    "METHODS",
    "SUMMARY_LAYER",
    "SYSTEM_PROMPT",
    "WRITER_KEY",
    "Draft",
    "PyramidResult",
    "abstractive_summary",
    "build_pyramid",
    "children_digest",
    "cluster_rows",
    "estimate_tokens",
    "extract_quoted_data",
    "extractive_summary",
    "parse_summary",
    "summary_id",
    "summary_level",
]
