"""An optional LLM judge for the pairs the rules leave unsure.

The rules (:func:`consolidation.judgment.judge_pair`) settle what they can and turn the rest
into conflict items: keep both and ask. When the agent has an LLM endpoint and its policy says
``llm_judge``, those pairs may be sent to the model before a person sees them — a fixed system
prompt, both memories quoted as data (:mod:`.prompt`, I-7), a JSON reply ``{"verdict":
"same|supersedes|conflict|distinct", "keep": "a|b|both", "why": "…"}`` validated against its
schema (:mod:`.verdicts`); anything else is unsure and the conflict item stays. What the model
settles becomes a merge or a reconcile that says "judged by model M", carries its tokens and
is never applied automatically unless the rules agree (:mod:`.operations`). Answers are cached
by the pair's content (:mod:`.run`), and the judge has its own budget of requests and seconds
per pass. :func:`judge_unsure` (:mod:`.stage`) is the step a pass runs.
"""

from __future__ import annotations

from .operations import JUDGE_RULE, apply_judgments
from .prompt import (
    PROMPT_VERSION,
    SYSTEM_PROMPT,
    VERDICT_SCHEMA,
    build_messages,
    extract_quoted_pair,
)
from .run import (
    JUDGE_MAX_TOKENS,
    Judgment,
    MemoryVerdictCache,
    UnsurePair,
    VerdictCache,
    cache_key,
    judge_pairs,
    unsure_pairs,
)
from .stage import judge_unsure
from .verdicts import ModelVerdict, parse_verdict

__all__ = [
    "JUDGE_MAX_TOKENS",
    "JUDGE_RULE",
    "PROMPT_VERSION",
    "SYSTEM_PROMPT",
    "VERDICT_SCHEMA",
    "Judgment",
    "MemoryVerdictCache",
    "ModelVerdict",
    "UnsurePair",
    "VerdictCache",
    "apply_judgments",
    "build_messages",
    "cache_key",
    "extract_quoted_pair",
    "judge_pairs",
    "judge_unsure",
    "parse_verdict",
    "unsure_pairs",
]
