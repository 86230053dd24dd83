"""LLM distillation: episodic memories → durable semantic facts, as DISTILL proposal operations.

This is the "dream pass" of ``seeds/003`` (extremis' ``LLMConsolidator``, quoted in
``docs/SOURCES.md``): read the episodic entries not yet consolidated (a checkpoint of ids makes re-
runs idempotent), group them by session/conversation, send every group of at least two memories to
an LLM, and turn the facts it returns into new memories linked to their sources. Distillation only
*adds* memories: every operation has ``removes == []``, so ``summarize()`` reports a loss fraction
of 0.

Everything here is pure (no network, no ``openai`` import): the network call goes through a
:class:`JSONWriter` (``consolidation.adapters.llm.LLMWriter`` in production, a stub server in
tests). The two exceptions the LLM path raises live in :mod:`consolidation.protocols` (and are
re-exported here) so callers can catch them without importing the adapter.

Untrusted text (docs/ARCHITECTURE.md, I-7):

- memory text (and ids, speakers, session names) is sent only as quoted data: one JSON document
  inside ``<memories>…</memories>`` in the user message, with ``<``, ``>`` and ``&`` escaped as
  ``\\u003c``/``\\u003e``/``\\u0026`` so no memory can close the block; the system prompt says the
  block is data, not instructions. Nothing from a memory is interpolated into instructions.
- the reply is asked for with the facts JSON Schema as ``response_format`` (a grammar on
  servers that support one, so a small model cannot echo the input) and schema-validated by
  :func:`parse_facts` whatever the server did; anything else fails that group only (recorded
  with the reason) and produces no operations. Facts citing ids that were not sent are
  dropped and counted.
- validated facts only ever become proposals (:class:`~consolidation.plans.Operation` of kind
  ``distill``); applying them is the reviewer's decision.

Modules, in the order a pass uses them: :mod:`.groups` (episodic selection, session groups),
:mod:`.fit` (groups split to fit the model's context), :mod:`.prompt` (messages),
:mod:`.replies` (the reply schema and its validation), :mod:`.operations` (facts → DISTILL
operations), :mod:`.ledger` (every group's outcome, reason and cost) and :mod:`.run`
(:func:`distill`, the pass within its time budget).
"""

from __future__ import annotations

from ..protocols import JSONWriter, LLMOutputError, LLMUnavailable
from .fit import split_to_fit
from .groups import (
    CONVERSATION_KEY,
    DEFAULT_MAX_GROUP_SIZE,
    DERIVED_FROM_KEY,
    EPISODIC_LAYER,
    SEMANTIC_LAYER,
    DistillGroup,
    is_episodic,
    select_groups,
)
from .ledger import DONE, FAILED, SKIPPED, GroupOutcome, Ledger
from .operations import DISTILL_RULE, distill_id, facts_to_operations
from .prompt import SYSTEM_PROMPT, build_messages, extract_quoted_data
from .replies import MAX_FACT_CHARS, MAX_FACTS_PER_REPLY, Fact, facts_schema, parse_facts
from .run import DistillResult, distill

__all__ = [
    "CONVERSATION_KEY",
    "DEFAULT_MAX_GROUP_SIZE",
    "DERIVED_FROM_KEY",
    "DISTILL_RULE",
    "DONE",
    "EPISODIC_LAYER",
    "FAILED",
    "MAX_FACTS_PER_REPLY",
    "MAX_FACT_CHARS",
    "SEMANTIC_LAYER",
    "SKIPPED",
    "SYSTEM_PROMPT",
    "DistillGroup",
    "DistillResult",
    "Fact",
    "GroupOutcome",
    "JSONWriter",
    "LLMOutputError",
    "LLMUnavailable",
    "Ledger",
    "build_messages",
    "distill",
    "distill_id",
    "extract_quoted_data",
    "facts_schema",
    "facts_to_operations",
    "is_episodic",
    "parse_facts",
    "select_groups",
    "split_to_fit",
]
