"""`Policy`: the thresholds a consolidation pass runs with, validated.

Every field has a documented default and its source. Invalid values raise ``ValueError`` naming the
field, so a bad policy can never silently widen what a pass may remove (fail closed, like the loss
guard in the seed contract).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from numbers import Real
from typing import Any

__all__ = ["NAMED_POLICIES", "SUMMARY_WRITERS", "Policy"]


def _is_number(v: Any) -> bool:
    return isinstance(v, Real) and not isinstance(v, bool)


SUMMARY_WRITERS = ("auto", "extractive", "llm")
"""Values of ``Policy.summary_writer``."""


def _field(
    default: Any,
    help_text: str,
    *,
    label: str | None = None,
    unit: str | None = None,
    low: float | None = None,
    high: float | None = None,
    above: float | None = None,
    choices: tuple[str, ...] | None = None,
) -> Any:
    """A :class:`Policy` field and what the console's form and the checks read from it — the
    one place each is written: ``help`` (one sentence for the form; its "default …" is
    rewritten from the real default when shown), ``label`` (when the field's name in words is
    not enough), ``unit`` (fraction, cosine, days, seconds, characters, tokens, memories …),
    the accepted range (``low`` ≤ value ≤ ``high``; ``above``: value > it) and ``choices``.
    :meth:`Policy.__post_init__` enforces the range; the form sets its HTML ``min`` from
    ``low``."""
    meta: dict[str, Any] = {"help": help_text, "label": label, "unit": unit, "low": low}
    meta |= {"high": high}
    meta |= {"above": above, "choices": choices}
    return field(default=default, metadata={k: v for k, v in meta.items() if v is not None})


@dataclass(frozen=True)
class Policy:
    """Consolidation thresholds, validated (a bad value raises ``ValueError`` naming the field).

    Similarities are cosine similarities of L2-normalised all-MiniLM-L6-v2 embeddings, in
    [-1, 1]. Times are days. Importance is in [0, 1]. Each field's help sentence, unit and
    range are in its metadata (:func:`_field`); the source of each default — the seed, paper
    or measurement behind it — is in ``docs/POLICY.md``, one paragraph per field.
    """

    max_loss_fraction: float = _field(
        0.25,
        (
            "Loss guard: refuse a pass that removes more than this fraction of the memories (0–1;"
            " default 0.25, the PraisonAI contract's conservative default)."
        ),
        unit="fraction",
        low=0.0,
        high=1.0,
    )
    merge_exact: bool = _field(
        True,
        "Fold exact duplicates (same normalised text).",
    )
    merge_near: bool = _field(
        True,
        "Fold near-duplicates found by cosine similarity.",
    )
    link_threshold: float = _field(
        0.90,
        (
            "Every pair in a near-duplicate group must be at least this similar (cosine, 0–1; "
            "default 0.90)."
        ),
        unit="cosine",
        low=0.0,
        high=1.0,
    )
    max_group_size: int = _field(
        8,
        "Most sources one merge may fold (≥ 2; default 8).",
        unit="memories",
        low=2,
        high=256,
    )
    max_merged_chars: int = _field(
        1000,
        (
            "Longest merged text (near-duplicate group or session window), in characters (≥ 20; "
            "default 1000, about what the default embedder reads of a text)."
        ),
        unit="characters",
        low=20,
        high=100_000,
    )
    fold_evidence: bool = _field(
        True,
        (
            "Fold an episodic turn into the fact (semantic memory) that cites all of its "
            "evidence: the fact plus the turn's new words."
        ),
    )
    fold_max_chars: int = _field(
        100,
        (
            "Longest text a fold may produce, in characters (≥ 20; default 100): a folded fact is"
            " retrieved like the fact, so its length is what the agent pays per hit."
        ),
        unit="characters",
        low=20,
        high=100_000,
    )
    window_max_size: int = _field(
        10,
        (
            "Episodic turns left after folding are merged into windows of up to this many "
            "consecutive turns of one session (1 = off; default 10)."
        ),
        unit="memories",
        low=1,
        high=256,
    )
    semantic_window_size: int = _field(
        1,
        (
            "Facts of one session and speaker merged into windows of up to this many (1 = off; "
            "default 1)."
        ),
        unit="memories",
        low=1,
        high=256,
    )
    semantic_window_chars: int = _field(
        300,
        "Longest text of a fact window, in characters (≥ 20; default 300).",
        unit="characters",
        low=20,
        high=100_000,
    )
    contradiction_threshold: float = _field(
        0.75,
        (
            "Pairs at least this similar are checked for contradiction before any merge (cosine, "
            "−1–1; default 0.75)."
        ),
        unit="cosine",
        low=-1.0,
        high=1.0,
    )
    reconcile: bool = _field(
        True,
        (
            "Turn sure contradictions (two states, known dates) into reconcile operations (newer "
            "kept); the unsure ones are conflict items a reviewer decides."
        ),
    )
    promote: bool = _field(
        True,
        "Promote reinforced or important memories to the curated tier.",
    )
    curated_tier: str = _field(
        "curated",
        "Tier name given to promoted memories (default “curated”).",
    )
    promote_min_sessions: int = _field(
        3,
        "Promote a memory seen in at least this many sessions (default 3).",
        unit="sessions",
        low=1,
        high=100_000,
    )
    promote_min_importance: float = _field(
        0.8,
        "Promote a memory with at least this importance (0–1; default 0.8).",
        unit="fraction",
        low=0.0,
        high=1.0,
    )
    promote_min_access: int = _field(
        5,
        "Promote a memory accessed at least this many times (default 5).",
        unit="accesses",
        low=1,
        high=1_000_000_000,
    )
    prune: bool = _field(
        True,
        "Prune old, low-value memories by exponential decay.",
    )
    prune_half_life_days: float = _field(
        30.0,
        "Half-life of importance decay, in days (> 0; default 30).",
        unit="days",
        above=0.0,
        high=36_500,
    )
    prune_threshold: float = _field(
        0.05,
        "Prune when importance × 0.5^(age/half-life) falls below this (0–1; default 0.05).",
        unit="fraction",
        low=0.0,
        high=1.0,
    )
    prune_min_age_days: float = _field(
        30.0,
        "Never prune memories younger than this many days (≥ 0; default 30).",
        unit="days",
        low=0,
        high=36_500,
    )
    prune_coverage: float = _field(
        1.0,
        (
            "A decayed turn without an importance is pruned only when at least this fraction of "
            "its content words stays in what its session keeps (0–1; default 1)."
        ),
        unit="fraction",
        low=0.0,
        high=1.0,
    )
    prune_max_importance: float = _field(
        0.3,
        (
            "Age alone prunes only memories whose explicit importance is below this (0–1; default"
            " 0.3); others decay away only when the store keeps their content."
        ),
        unit="fraction",
        low=0.0,
        high=1.0,
    )
    trim_to_guard: bool = _field(
        True,
        (
            "Plan within the loss budget: when the full plan would remove more than the loss "
            "guard allows, propose the most certain operations that fit (exact duplicates first, "
            "prunes last) and defer the rest to the next passes. Off: such a pass is rejected by "
            "the guard."
        ),
        label="Plan within the loss budget",
    )
    min_recall_retention: float | None = _field(
        0.98,
        (
            "Reject a pass whose answer recall@k falls below this fraction of the recall before "
            "(0–1; empty disables the recall guard; default 0.98)."
        ),
        unit="fraction",
        low=0.0,
        high=1.0,
    )
    recall_k: int = _field(
        10,
        "k for answer recall@k (default 10).",
        unit="memories",
        low=1,
        high=1_000,
    )
    summarize: bool = _field(
        False,
        (
            "Memory pyramid: add summary memories over clusters of related memories of one scope,"
            " level by level (off by default: it did not raise answer recall on LoCoMo)."
        ),
    )
    summary_levels: int = _field(
        2,
        (
            "Pyramid levels: 1 topics over memories, 2 themes over topics, 3 a profile per scope "
            "(1–3; default 2)."
        ),
        unit="levels",
        low=1,
        high=3,
    )
    summary_min_cluster: int = _field(
        3,
        "Fewest memories a summary covers (≥ 2; default 3).",
        unit="memories",
        low=2,
    )
    summary_max_cluster: int = _field(
        12,
        "Most memories a summary covers (≥ 2 and ≥ the fewest; default 12).",
        unit="memories",
        low=2,
        high=256,
    )
    summary_threshold: float = _field(
        0.55,
        "Members of a cluster are on average at least this similar (cosine, 0–1; default 0.55).",
        unit="cosine",
        low=-1.0,
        high=1.0,
    )
    summary_max_chars: int = _field(
        400,
        "Longest summary text, in characters (≥ 20; default 400).",
        unit="characters",
        low=20,
        high=100_000,
    )
    summary_writer: str = _field(
        "auto",
        (
            "Who writes summaries: the agent's LLM when one is configured (auto), always "
            "extractive (the cluster's most central sentences), or always the LLM."
        ),
        choices=SUMMARY_WRITERS,
    )
    max_lost_content_words: int | None = _field(
        0,
        (
            "Content guard: most distinct content words (numbers, names, code terms, negations) a"
            " pass may lose and still apply without a person (empty = off; default 0)."
        ),
        unit="words",
        low=0,
        high=1_000_000_000,
    )
    max_lost_sentence_fraction: float = _field(
        0.05,
        (
            "Content guard: most sentences, as a fraction of the store's, an automatically "
            "applied pass may lose (0–1; default 0.05)."
        ),
        unit="fraction",
        low=0.0,
        high=1.0,
    )
    auto_apply_max_risk: float = _field(
        0.25,
        (
            "Auto-apply “safe” applies on its own only operations whose risk score is at most "
            "this (0–1; default 0.25)."
        ),
        unit="fraction",
        low=0.0,
        high=1.0,
    )
    distill_budget_seconds: float = _field(
        600.0,
        (
            "Seconds the LLM distillation may spend per pass (> 0; default 600); sessions left "
            "over are distilled by later passes."
        ),
        unit="seconds",
        above=0.0,
        high=86_400,
    )
    distill_group_size: int = _field(
        16,
        "Most episodic memories of one session sent in one LLM request (≥ 3; default 16).",
        unit="memories",
        low=3,
        high=256,
    )
    llm_max_tokens: int = _field(
        768,
        (
            "Reply limit of one LLM request, in tokens (≥ 16; default 768); a reply cut there is "
            "retried once as two smaller groups."
        ),
        unit="tokens",
        low=16,
        high=131_072,
    )
    llm_context_tokens: int = _field(
        4096,
        (
            "The model's context window, in tokens (≥ 2 × the reply limit; default 4096); larger "
            "groups are split before they are sent."
        ),
        unit="tokens",
        low=32,
        high=10_000_000,
    )
    llm_judge: bool = _field(
        False,
        (
            "Send the pairs the rules leave unsure to the LLM; what it settles is proposed, "
            "marked as judged, and never applied automatically."
        ),
    )
    judge_max_pairs: int = _field(
        20,
        "Most unsure pairs sent to the LLM per pass (≥ 1; default 20; cached answers are free).",
        unit="pairs",
        low=1,
        high=10_000,
    )
    judge_budget_seconds: float = _field(
        120.0,
        "Seconds the LLM judge may spend per pass (> 0; default 120).",
        unit="seconds",
        above=0.0,
        high=86_400,
    )

    def __post_init__(self) -> None:
        for f in fields(self):
            self._check_field(f.name, str(f.type), f.metadata)
        if self.summary_max_cluster < self.summary_min_cluster:
            raise ValueError(
                f"summary_max_cluster ({self.summary_max_cluster!r}) must be at least "
                f"summary_min_cluster ({self.summary_min_cluster!r})"
            )
        if self.llm_context_tokens < 2 * self.llm_max_tokens:
            raise ValueError(
                f"llm_context_tokens must be at least twice llm_max_tokens "
                f"({2 * self.llm_max_tokens:,}), got {self.llm_context_tokens!r}"
            )

    def _check_field(self, name: str, type_name: str, meta: Mapping[str, Any]) -> None:
        """Check one field against its type and its metadata's range (``low``, ``high``,
        ``above``, ``choices``); raises ``ValueError`` naming the field."""
        v = getattr(self, name)
        low, high, above = meta.get("low"), meta.get("high"), meta.get("above")
        if v is None and "None" in type_name:
            return
        if type_name == "bool":
            if not isinstance(v, bool):
                raise ValueError(f"{name} must be true or false, got {v!r}")
            return
        if type_name == "str":
            if not isinstance(v, str) or not v.strip():
                raise ValueError(f"{name} must be a non-empty string, got {v!r}")
            if meta.get("choices") and v not in meta["choices"]:
                raise ValueError(f"{name} must be one of {', '.join(meta['choices'])}, got {v!r}")
            return
        if type_name.startswith("int"):
            if "None" in type_name:  # a whole float (from JSON or a form) is taken as an int
                whole = _is_number(v) and math.isfinite(v) and float(v).is_integer()
                if not whole or v < low:
                    raise ValueError(
                        f"{name} must be a whole number of at least {low}, or empty, got {v!r}"
                    )
                object.__setattr__(self, name, int(v))
            elif not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ValueError(f"{name} must be a positive integer, got {v!r}")
            elif low is not None and v < low:
                raise ValueError(f"{name} must be at least {low}, got {v!r}")
        else:
            if not _is_number(v) or not math.isfinite(float(v)):
                if "None" in type_name:
                    raise ValueError(
                        f"{name} must be a number in [{low:g}, {high:g}] or empty, got {v!r}"
                    )
                raise ValueError(f"{name} must be a finite number, got {v!r}")
            bounded = meta.get("unit") in ("fraction", "cosine")  # said as one range
            if bounded and low is not None and high is not None and not low <= v <= high:
                what = (
                    "a cosine similarity in" if meta.get("unit") == "cosine" and low < 0 else "in"
                )
                empty = " or empty" if "None" in type_name else ""
                raise ValueError(f"{name} must be {what} [{low:g}, {high:g}]{empty}, got {v!r}")
            if above is not None and v <= above:
                raise ValueError(f"{name} must be > {above:g} {meta.get('unit', '')}, got {v!r}")
            if not bounded and low is not None and v < low:
                raise ValueError(f"{name} must be >= {low:g} {meta.get('unit', '')}, got {v!r}")
        if high is not None and v > high:
            raise ValueError(f"{name} must be at most {high:,}, got {v!r}")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict of every field."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None, *, base: Policy | None = None) -> Policy:
        """Build from ``data`` over ``base`` (defaults). Unknown keys raise ``ValueError``."""
        data = dict(data or {})
        names = {f.name for f in fields(cls)}
        unknown = set(data) - names
        if unknown:
            raise ValueError(f"unknown policy fields: {', '.join(sorted(unknown))}")
        return replace(base or cls(), **data)

    def with_(self, **changes: Any) -> Policy:
        """Copy with ``changes`` applied (validated)."""
        return replace(self, **changes)


NAMED_POLICIES: dict[str, Policy] = {
    "default": Policy(),
    "aggressive": Policy(
        max_loss_fraction=0.9,
        link_threshold=0.82,
        max_group_size=16,
        prune_threshold=0.15,
        prune_min_age_days=14.0,
        prune_coverage=0.2,
        window_max_size=8,
        fold_max_chars=130,
        min_recall_retention=0.95,
    ),
}
"""Named policies for the CLI and the console. Values are tuned on LoCoMo
(bench/quality_locomo.py)."""
