"""`Policy`: the thresholds a consolidation pass runs with, validated.

Every field has a documented default and its source. Invalid values raise ``ValueError`` naming the
field, so a bad policy can never silently widen what a pass may remove (fail closed, like the loss
guard in the seed contract).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields, replace
from numbers import Real
from typing import Any

__all__ = ["LLM_FIELD_HELP", "NAMED_POLICIES", "SUMMARY_WRITERS", "Policy"]


def _is_number(v: Any) -> bool:
    return isinstance(v, Real) and not isinstance(v, bool)


_UPPER_BOUNDS: dict[str, float] = {
    # Sanity caps so a typo cannot make one pass unreviewable or unbounded in time or memory
    # (a fresh-user test saved max_group_size=10**23). Generous: 10-100x the tuned values.
    "max_group_size": 256,
    "max_merged_chars": 100_000,
    "fold_max_chars": 100_000,
    "window_max_size": 256,
    "semantic_window_size": 256,
    "semantic_window_chars": 100_000,
    "promote_min_sessions": 100_000,
    "promote_min_access": 1_000_000_000,
    "recall_k": 1_000,
    "max_lost_content_words": 1_000_000_000,
    "prune_half_life_days": 36_500,
    "prune_min_age_days": 36_500,
    "summary_levels": 3,
    "summary_max_cluster": 256,
    "summary_max_chars": 100_000,
    "distill_budget_seconds": 86_400,
    "distill_group_size": 256,
    "llm_max_tokens": 131_072,
    "llm_context_tokens": 10_000_000,
    "judge_max_pairs": 10_000,
    "judge_budget_seconds": 86_400,
}

SUMMARY_WRITERS = ("auto", "extractive", "llm")
"""Values of ``Policy.summary_writer``."""


@dataclass(frozen=True)
class Policy:
    """Consolidation thresholds.

    Similarities are cosine similarities of L2-normalised all-MiniLM-L6-v2 embeddings, in
    [-1, 1]. Times are days. Importance is in [0, 1].

    Fields and sources:

    - ``max_loss_fraction`` (0.25): loss-guard threshold; the seed contract's default
      (``seeds/000`` in docs/SOURCES.md, "Start with a conservative max_loss_fraction").
    - ``merge_exact`` (True): fold exact duplicates (same normalised text).
    - ``merge_near`` (True): fold near-duplicates found by cosine similarity.
    - ``link_threshold`` (0.90): every pair inside a near-duplicate group must be at least this
      similar (complete linkage). Paraphrases of one fact score 0.85–0.97 with MiniLM while
      related-but-different facts mostly score below 0.85 (measured on LoCoMo observations).
    - ``max_group_size`` (8): upper bound on sources per merge, so one merge stays reviewable
      (copies of one text merge up to ``planning.grouping.EXACT_MAX_GROUP`` = 32 at once).
    - ``max_merged_chars`` (1000): a merged text (near-duplicate group or session window) is
      never longer than this; a group whose extractive merge would exceed it is split or left
      alone. 1000 characters is what the default embedder reads of a text: all-MiniLM-L6-v2
      embeds the first 256 tokens (Chroma's truncation), and LoCoMo dialogue runs 4.16
      characters per token, so a 1000-character window is ~240 tokens (3 of 185 windows
      measured went past 256, by at most 9 tokens); at 1200, half of the windows were
      embedded without their last turns. The price, measured on questions the recall holds
      never saw (``--holdout``): at 800, every agent kept ≥ 100 % of its held-out answers but
      two stopped at 48.7–49.0 % fewer; at 1000, conv-41 keeps 96.3 % and conv-43 98.4 % (900:
      three agents miss the reduction and conv-43 is at 98.4 % still). Those lost turns sit in
      windows of ~1000 characters whose embedding no longer ranks them in the top 10 (cosine
      0.36–0.53 to the question, the 10th hit at 0.55); breaking windows at a topic shift
      (cosine of a turn to the window's mean below 0.2 or 0.3) did not bring them back.
    - ``fold_evidence`` (True), ``fold_max_chars`` (100): an episodic memory (``layer``
      "episodic") whose ``evidence`` ids are all cited by a semantic memory's ``evidence`` is
      folded into the most similar such memory: the semantic text plus the turn's sentences
      that carry new content words, never longer than ``fold_max_chars``. The bound is tight on
      purpose — about one fact's length (LoCoMo observations average 90–96 characters): a
      folded fact is retrieved like the fact it extends (facts fill 7–8 of the top 10), so its
      length is what the agent pays per hit, while a turn left to a session window is rarely
      retrieved. bench/quality_locomo.py ``--mode safe --passes 5``, windows of 10 turns and
      1000 characters, the conversation with the most context (conv-47): fold bound 150 →
      1.27× context, 120 → 1.27×, 110 → 1.26×, 100 → 1.25×; folds off → one conversation
      stops at 49.9 % fewer.
    - ``window_max_size`` (10; 1 disables): episodic memories left after folding are merged
      into windows of up to this many consecutive memories of the same session ("Speaker:
      text" lines, repeated content dropped), bounded by ``max_merged_chars``. A window is
      rarely in the top 10 (0.3–0.5 of its slots on LoCoMo), so longer windows cut memories
      without adding context: 6 turns and 800 characters left two LoCoMo agents at 47.9 % and
      48.2 % fewer after five safe nights (the planner had nothing left to propose); 10 and
      1000 brings every agent to ≥ 50.3 % at ≤ 1.25× (bench/quality_locomo.py, safe mode).
    - ``semantic_window_size`` (1 = off), ``semantic_window_chars`` (300): semantic memories
      (with what was folded into them) of the same session and speaker merged, up to this many
      per window and this many characters. Off because of context: bench/quality_locomo.py
      ``--mode safe --passes 5`` trades reduction for context at every bound tried — size 2,
      160 characters: each agent 52–58 % fewer at 1.33–1.54× context (``--holdout``); 130:
      48.9–55.7 % at 1.18–1.34× (with the windows of 6 turns and 800 characters then in use);
      off, with today's windows: 50.3–56.3 % at 1.11–1.25×.
    - ``contradiction_threshold`` (0.75): pairs at least this similar are judged for
      contradiction (:func:`consolidation.judgment.judge_pair`: negation, past state, changed
      value or number, swapped roles) before any merge; folds and windows never join such a
      pair. No threshold makes a pair with a contradiction cue mergeable.
    - ``reconcile`` (True): a contradiction between two state statements whose recency is
      known becomes a reconcile (newer kept, older superseded); anything less sure — and every
      such pair when this is off — becomes a ``conflict`` item for a reviewer (both kept).
    - ``promote`` (True), ``curated_tier`` ("curated"), ``promote_min_sessions`` (3),
      ``promote_min_importance`` (0.8), ``promote_min_access`` (5): a memory is promoted when it
      was reinforced in at least ``promote_min_sessions`` sessions, or has importance ≥
      ``promote_min_importance``, or was accessed ≥ ``promote_min_access`` times (seeds/002,
      "Importance scoring": reference frequency and explicit importance).
    - ``prune`` (True), ``prune_half_life_days`` (30), ``prune_threshold`` (0.05),
      ``prune_min_age_days`` (30): a memory older than the minimum age whose
      ``importance × 0.5 ** (age / half_life)`` falls below the threshold is pruned (seeds/002,
      "Time-based decay": exponential forgetting curve; 30 days is its medium-compression step).
    - ``prune_max_importance`` (0.3): age alone never removes a unique memory:
      decay by itself prunes only a memory whose *explicit* importance is below this value. 0.3
      is the bottom of the usual "low" band of 0–1 importance scales (mem0 and PraisonAI write
      0.5 as neutral; seed 002 scores below ~0.3 as low-value); with the default half-life a
      memory at importance 0.3 would otherwise fall below ``prune_threshold`` after ~78 days,
      so a store of neutral memories (0.5) was pruned wholesale at ~100 days. A decayed
      memory at or above this value, or without an importance, may be pruned only when its
      content is covered (``prune_coverage``).
    - ``prune_coverage`` (1.0): a decayed memory *without an explicit importance* (scored at the
      neutral 0.5) is pruned only when at least this fraction of its content words appear in the
      memories its session keeps after the pass's merges (0.0 = prune on missing importance
      alone, the old rule, which on LoCoMo deleted dialog turns at random: 72 % recall).
      Whatever the value, at least half of the words must be kept elsewhere
      (``consolidation.planning.prune.MIN_COVERAGE``: age alone never removes a unique
      memory), so 0.0 now acts as 0.5.
      Only episodic memories decay on a missing importance; facts (``semantic``) and summaries
      without one are never pruned by age (pruning covered observations on LoCoMo cost recall
      and *raised* context: short facts were replaced in the top-k by longer texts).
    - ``trim_to_guard`` (True): plan **within the loss budget**. When the full plan would remove
      more than ``max_loss_fraction`` of the originals, propose the most certain removing
      operations that fit (exact duplicates, reconciles, near-duplicates by confidence, folds and
      windows, then prunes) and record the rest as deferred (``plan.context["trimmed"]``: budget,
      kept and deferred removals, deferred operations by kind); the next pass proposes the next
      slice. On by default: with it off, a LoCoMo agent's nightly passes were all
      rejected by the guard (loss 68 % > 25 %) and the store never shrank; with it on the same
      conversations converge in a few passes (bench/quality_locomo.py). The loss guard itself is
      unchanged and still rejects whatever exceeds the budget (a reviewer's edits, an LLM
      operation, a policy with this option off).
    - ``min_recall_retention`` (0.98 or ``None``): reject a pass whose after/before answer
      recall@k ratio falls below this; ``None`` disables the recall guard.
    - ``recall_k`` (10): k for answer recall@k.
    - ``summarize`` (False), ``summary_levels`` (2), ``summary_min_cluster`` (3),
      ``summary_max_cluster`` (12), ``summary_threshold`` (0.55), ``summary_max_chars`` (400),
      ``summary_writer`` ("auto"): the memory pyramid of seeds/002 ("Hierarchical
      summarization", :mod:`consolidation.pyramid`). When on, a pass adds ``summarize``
      operations: one summary memory per cluster of ``summary_min_cluster`` to
      ``summary_max_cluster`` related memories of one scope (average-linkage clusters whose
      members are on average at least ``summary_threshold`` cosine-similar), level 1 over the
      memories, level 2 over level-1 summaries, level 3 over level-2 ones, up to
      ``summary_levels``; each summary at most ``summary_max_chars`` characters, written by the
      agent's LLM (``"llm"``), extractively (``"extractive"``: the cluster's most central
      sentences) or by the LLM when one is configured (``"auto"``). Off by default:
      bench/pyramid_bench.py on LoCoMo without its session summaries measured no gain — answer
      recall@10 52.9 % without and with the extractive pyramid, 1.22× the context, and fewer
      probes answered within every context budget tried (500–2,000 characters). 0.55 and 3–12
      give the widest coverage (79 % of the memories in a cluster) at the same recall as 0.7
      (35 %); 400 characters beat 200 (52.0 %).

    The content guard and auto-apply (:mod:`consolidation.review.content`,
    :mod:`consolidation.review.auto_apply`; figures from ``bench/content_guard_bench.py`` on
    the seven LoCoMo conversations, 32 nightly passes, and the three demo stores):

    - ``max_lost_content_words`` (0 or ``None``): an automatically applied pass — or the part
      auto-apply ``safe`` applies — loses at most this many distinct content words (numbers,
      names, negations, code terms: :func:`consolidation.review.content_loss`); ``None``
      disables the check. 0 because no other count separates harm from habit: each harmful
      merge of the bench (``rm -rf ~/cache`` kept and ``rm -rf /cache`` dropped, ``x >= 5`` /
      ``x > 5``, ``config.yaml`` / ``.yml``, ``--force``, a version, a URL, a negation) loses
      exactly one content word, while 10 of the 32 LoCoMo passes lose 1–4 (31 of 1,334
      operations: covered prunes, and windows dropping a negated turn). So a word-losing
      operation waits for a person, and ``safe`` applies the rest of its pass.
    - ``max_lost_sentence_fraction`` (0.05): the same part loses at most this fraction of the
      store's sentences. Every lost sentence counts, also one whose content words all survive
      (reworded or repeated text: the content-word check cannot see a meaning carried by word
      order alone). The store is the base because the removed memories are not a stable one
      (a LoCoMo pass loses 4–63 % of their sentences): typical LoCoMo passes lose 0.3–4.6 % of
      the store's sentences (p90 3.0 %: windows and folds dropping repeated small talk), so
      5 % passes every one of them and stops a pass that rewrites more unattended; the demo
      stores' first passes lose 9–14 %, almost all in decay prunes, which lose content words
      and wait anyway.
    - ``auto_apply_max_risk`` (0.25): auto-apply ``safe`` applies only operations whose risk
      (:func:`consolidation.review.operation_risk`, in [0, 1]) is at most this. Below the
      review line (:data:`consolidation.review.RISK_LINE`, 0.3: what the Review tab lists one
      by one never applies on its own); on LoCoMo 98 % of the operations score at most 0.25
      (windows and folds p90 0.08, covered prunes p90 0.12), while near-duplicate merges close
      to the link threshold (p90 0.39), reconciles (≥ 0.3) and conflicts (1.0) wait; of the
      harmful merges the planner proposes, the comparison one scores 0.38 and the path one
      0.12 (the content check holds it).

    The LLM (only with an endpoint configured; none: nothing of this is used, no network):

    - ``distill_budget_seconds`` (600): wall time the distillation may spend per pass; when it
      is spent no further request is sent and the sessions left are distilled by later passes
      (``plan.context["llm"]["distill"]["summary"]``). Measured (``make test-llm``,
      bench/llm_bench.py): Gemma 3 270M on llama.cpp, 2 shared cores at load 8–13, a group of
      8–9 LoCoMo turns is 1,082–1,195 prompt tokens and takes 47–132 s with the facts grammar;
      600 s is then 5–10 groups a night, and a hosted model does a whole conversation well
      within it.
    - ``distill_group_size`` (16): at most this many memories of one session per request
      (≥ 3; a session is cut into balanced chunks, so LoCoMo's 18–30-turn sessions go as two
      groups of 9–15). Without a grammar the same model echoed its input until the token
      limit (> 300 s a request), and a 16-turn group with the grammar ran past 600 s at load
      12.6: on a CPU box, 8 and a timeout of a few minutes keep one failure cheap.
    - ``llm_max_tokens`` (768): the reply limit of one request (tokens). A reply stopped at it
      is retried once as two smaller groups.
    - ``llm_context_tokens`` (4096): the model's context window (tokens). A group whose
      prompt (estimated at one token per 3 bytes of UTF-8, then per the server's own counts)
      plus ``llm_max_tokens`` would not fit is split before it is sent; a single memory that
      cannot fit is skipped with that reason. 4096 is what a small local server is usually
      started with (llama-cpp-python's default is 2048); raise it for hosted models.
    - ``llm_judge`` (False), ``judge_max_pairs`` (20), ``judge_budget_seconds`` (120): send
      the pairs the rules leave unsure (conflict items) to the LLM as quoted data
      (:mod:`consolidation.llm_judge`); at most this many requests and this much wall time per
      pass (cached answers cost neither). What the model decides is proposed, marked as
      judged, and never applied automatically unless the rules agree.
    """

    max_loss_fraction: float = 0.25
    merge_exact: bool = True
    merge_near: bool = True
    link_threshold: float = 0.90
    max_group_size: int = 8
    max_merged_chars: int = 1000
    fold_evidence: bool = True
    fold_max_chars: int = 100
    window_max_size: int = 10
    semantic_window_size: int = 1
    semantic_window_chars: int = 300
    contradiction_threshold: float = 0.75
    reconcile: bool = True
    promote: bool = True
    curated_tier: str = "curated"
    promote_min_sessions: int = 3
    promote_min_importance: float = 0.8
    promote_min_access: int = 5
    prune: bool = True
    prune_half_life_days: float = 30.0
    prune_threshold: float = 0.05
    prune_min_age_days: float = 30.0
    prune_coverage: float = 1.0
    prune_max_importance: float = 0.3
    trim_to_guard: bool = True
    min_recall_retention: float | None = 0.98
    recall_k: int = 10
    summarize: bool = False
    summary_levels: int = 2
    summary_min_cluster: int = 3
    summary_max_cluster: int = 12
    summary_threshold: float = 0.55
    summary_max_chars: int = 400
    summary_writer: str = "auto"
    max_lost_content_words: int | None = 0
    max_lost_sentence_fraction: float = 0.05
    auto_apply_max_risk: float = 0.25
    distill_budget_seconds: float = 600.0
    distill_group_size: int = 16
    llm_max_tokens: int = 768
    llm_context_tokens: int = 4096
    llm_judge: bool = False
    judge_max_pairs: int = 20
    judge_budget_seconds: float = 120.0

    def __post_init__(self) -> None:
        unit = {
            "max_loss_fraction",
            "link_threshold",
            "promote_min_importance",
            "prune_threshold",
            "prune_coverage",
            "prune_max_importance",
            "max_lost_sentence_fraction",
            "auto_apply_max_risk",
        }
        cosine = {"contradiction_threshold", "summary_threshold"}
        for f in fields(self):
            name, v = f.name, getattr(self, f.name)
            if f.type in ("bool",):
                if not isinstance(v, bool):
                    raise ValueError(f"{name} must be true or false, got {v!r}")
            elif f.type == "str":
                if not isinstance(v, str) or not v.strip():
                    raise ValueError(f"{name} must be a non-empty string, got {v!r}")
            elif f.type == "int":
                if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                    raise ValueError(f"{name} must be a positive integer, got {v!r}")
            elif name == "max_lost_content_words":
                if v is not None:
                    whole = _is_number(v) and math.isfinite(v) and float(v).is_integer()
                    if not whole or v < 0:
                        raise ValueError(
                            f"{name} must be a whole number of at least 0, or empty, got {v!r}"
                        )
                    object.__setattr__(self, name, int(v))
            elif name == "min_recall_retention":
                if v is not None and (not _is_number(v) or not math.isfinite(v) or not 0 <= v <= 1):
                    raise ValueError(f"{name} must be a number in [0, 1] or empty, got {v!r}")
            else:
                if not _is_number(v) or not math.isfinite(float(v)):
                    raise ValueError(f"{name} must be a finite number, got {v!r}")
                if name in unit and not 0.0 <= v <= 1.0:
                    raise ValueError(f"{name} must be in [0, 1], got {v!r}")
                if name in cosine and not -1.0 <= v <= 1.0:
                    raise ValueError(f"{name} must be a cosine similarity in [-1, 1], got {v!r}")
                if name.endswith("_days") and v <= 0 and name != "prune_min_age_days":
                    raise ValueError(f"{name} must be > 0 days, got {v!r}")
                if name == "prune_min_age_days" and v < 0:
                    raise ValueError(f"{name} must be >= 0 days, got {v!r}")
        for name, cap in _UPPER_BOUNDS.items():
            if (getattr(self, name) or 0) > cap:
                raise ValueError(f"{name} must be at most {cap:,}, got {getattr(self, name)!r}")
        if self.max_group_size < 2:
            raise ValueError(f"max_group_size must be at least 2, got {self.max_group_size!r}")
        for name in (
            "max_merged_chars",
            "fold_max_chars",
            "semantic_window_chars",
            "summary_max_chars",
        ):
            if getattr(self, name) < 20:
                raise ValueError(f"{name} must be at least 20, got {getattr(self, name)!r}")
        if self.summary_min_cluster < 2:
            raise ValueError(
                f"summary_min_cluster must be at least 2, got {self.summary_min_cluster!r}"
            )
        if self.summary_max_cluster < self.summary_min_cluster:
            raise ValueError(
                f"summary_max_cluster ({self.summary_max_cluster!r}) must be at least "
                f"summary_min_cluster ({self.summary_min_cluster!r})"
            )
        if self.summary_writer not in SUMMARY_WRITERS:
            raise ValueError(
                f"summary_writer must be one of {', '.join(SUMMARY_WRITERS)}, "
                f"got {self.summary_writer!r}"
            )
        self._check_llm()

    def _check_llm(self) -> None:
        """The LLM fields' own limits (the loop above checked types and the upper caps)."""
        for name in ("distill_budget_seconds", "judge_budget_seconds"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be > 0 seconds, got {getattr(self, name)!r}")
        if self.distill_group_size < 3:
            raise ValueError(
                f"distill_group_size must be at least 3, got {self.distill_group_size!r}"
            )
        if self.llm_max_tokens < 16:
            raise ValueError(f"llm_max_tokens must be at least 16, got {self.llm_max_tokens!r}")
        if self.llm_context_tokens < 2 * self.llm_max_tokens:
            raise ValueError(
                f"llm_context_tokens must be at least twice llm_max_tokens "
                f"({2 * self.llm_max_tokens:,}), got {self.llm_context_tokens!r}"
            )

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


LLM_FIELD_HELP: dict[str, str] = {
    "distill_budget_seconds": "Seconds the LLM distillation may spend per pass (> 0; default "
    "600); sessions left over are distilled by later passes.",
    "distill_group_size": "Most episodic memories of one session sent in one LLM request "
    "(≥ 3; default 16).",
    "llm_max_tokens": "Reply limit of one LLM request, in tokens (≥ 16; default 768); a reply "
    "cut there is retried once as two smaller groups.",
    "llm_context_tokens": "The model's context window, in tokens (≥ 2 × the reply limit; "
    "default 4096); larger groups are split before they are sent.",
    "llm_judge": "Send the pairs the rules leave unsure to the LLM; what it settles is proposed, "
    "marked as judged, and never applied automatically.",
    "judge_max_pairs": "Most unsure pairs sent to the LLM per pass (≥ 1; default 20; cached "
    "answers are free).",
    "judge_budget_seconds": "Seconds the LLM judge may spend per pass (> 0; default 120).",
}
"""One sentence per LLM field for the console's policy form (its "default …" as the form's
other help texts say it)."""
