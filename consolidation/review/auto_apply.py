"""Auto-apply ``safe``: which operations of a pass may apply on their own, and why the rest wait.

:func:`split_auto_apply` takes a planned pass — its operations with their risk
(:mod:`.risk`) and lost content (:func:`.content.content_loss` of the whole pass) — the
agent's policy, standing decisions and the signatures of operations rejected before, and
gives every operation a :class:`Gate`: *safe* when it

(a) scores at or below ``policy.auto_apply_max_risk``,
(b) loses no content (the safe part as a whole passes the content guard,
    :func:`.content.content_verdict`: at most ``max_lost_content_words`` distinct content
    words — 0 by default, so no operation that loses one — and at most
    ``max_lost_sentence_fraction`` of the store's sentences; operations are admitted in plan
    order while the part stays within both),
(c) touches no standing decision (no source named by one, no reconcile a conflict pick
    decided: a person made that call and a person sees what follows from it),
(d) was never rejected (its :func:`~consolidation.decisions.operation_signature` is not
    among the rejected ones), and
(e) is not a conflict item,
(f) was neither written nor decided by a model (:func:`model_author`: an LLM judge's merge or
    reconcile, a distilled fact, a summary an LLM wrote — under every mode, ``all`` included:
    a model's word is never applied without a person, I-7), and
(g) costs no probe query its answer (``recall_held``, from
    :func:`consolidation.recall.recall_holds` over the part (a)–(f) let through: the recall
    guard names the operations behind each lost answer instead of refusing the whole part);

otherwise it is *waiting for review*, with every reason that holds it (a machine code of
:data:`CODES` and a sentence each). Pure: the console calls it with the stored figures,
applies ``split.safe`` and leaves ``split.waiting`` as the proposal a person reviews. The safe
part's loss (``split.safe_loss``) is the union of its operations' losses measured in the whole
pass, an upper bound of what it loses alone; :func:`.content.content_loss` over exactly those
operations measures it on its own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..decisions import StandingDecisions, operation_signature
from ..distill.operations import DISTILL_RULE
from ..llm_judge.operations import JUDGE_RULE
from ..policy import Policy
from ..pyramid.extractive import EXTRACTIVE
from ..pyramid.layout import WRITER_KEY
from .content import LossTotals, loss_totals
from .lost import OperationLoss
from .risk import Risk

__all__ = [
    "CODES",
    "JOINING_KINDS",
    "AutoApplySplit",
    "Gate",
    "joins_rejected",
    "model_author",
    "model_note",
    "operation_pairs",
    "split_auto_apply",
]

CODES = {
    "conflict": "a conflict: a person picks what stays",
    "model": "written or decided by a model: a person approves it",
    "judged": "decided by the LLM judge, not by the rules",
    "rejected": "rejected before",
    "decision": "touches a standing decision",
    "risk": "risk above the auto-apply line",
    "content": "loses content words",
    "sentences": "the automatically applied part would lose too many sentences",
    "recall": "costs a probe query its answer",
    "edited": "edited by a reviewer: a person approves the edited text",
    "drift": "the recall kept since a person last approved a pass would fall too low",
}
"""Why an operation waits for review: machine code → what it means."""


@dataclass(frozen=True)
class Gate:
    """The verdict on one operation: ``index`` into the pass's operations, ``safe``, its
    ``signature`` (:func:`~consolidation.decisions.operation_signature`), the ``codes`` that
    hold it (keys of :data:`CODES`; empty when safe) and ``reasons`` — one sentence per code,
    or for a safe operation one sentence saying why it may apply."""

    index: int
    safe: bool
    signature: str
    codes: tuple[str, ...]
    reasons: tuple[str, ...]


@dataclass(frozen=True)
class AutoApplySplit:
    """A pass split in two: ``gates`` (one per operation, in plan order) and what the safe
    part loses (``safe_loss``: unique sentences and content words of its operations)."""

    gates: tuple[Gate, ...]
    safe_loss: LossTotals

    @property
    def safe(self) -> list[int]:
        """Indices of the operations that may apply on their own, in plan order."""
        return [g.index for g in self.gates if g.safe]

    @property
    def waiting(self) -> list[Gate]:
        """The gates of the operations left for a person, in plan order."""
        return [g for g in self.gates if not g.safe]

    def counts(self) -> dict[str, int]:
        """``{code: operations held by it}`` over the waiting operations, most first (an
        operation held for two reasons counts under both)."""
        out: dict[str, int] = {}
        for g in self.waiting:
            for c in g.codes:
                out[c] = out.get(c, 0) + 1
        return dict(sorted(out.items(), key=lambda kv: (-kv[1], kv[0])))


def _score(r: float | Risk) -> tuple[float, str]:
    if isinstance(r, Risk):
        return float(r.score), (r.reasons[0] if r.reasons else "")
    return float(r), ""


def split_auto_apply(
    operations: Sequence[Any],
    risks: Sequence[float | Risk],
    losses: Sequence[OperationLoss],
    policy: Policy,
    *,
    store_sentences: int,
    decisions: StandingDecisions | None = None,
    rejected: Mapping[str, str] | None = None,
    rejected_joins: Sequence[tuple[frozenset[tuple[str, str]], str]] = (),
    recall_held: Mapping[int, str] | None = None,
) -> AutoApplySplit:
    """Split a pass into the part auto-apply ``safe`` applies and the part left for review.

    - ``operations``: the pass's operations as planned (engine
      :class:`~consolidation.plans.Operation` or any object with ``kind``, ``source_ids``,
      ``source_hashes``, ``removes``, ``result_document``, ``result_metadata``, ``scores``);
    - ``risks``: each one's risk (:class:`~.risk.Risk` or its score in [0, 1]);
    - ``losses``: each one's :class:`~.lost.OperationLoss` against the store after the whole
      pass (what the console stores);
    - ``policy``: ``auto_apply_max_risk``, ``max_lost_content_words``,
      ``max_lost_sentence_fraction``;
    - ``store_sentences``: sentences of the store before the pass
      (:attr:`.content.ContentLoss.store_sentences`);
    - ``decisions``: the agent's :class:`~consolidation.decisions.StandingDecisions`;
    - ``rejected``: ``{signature: note}`` of operations rejected before (the note is shown,
      e.g. ``"in pass #4 by alice: too aggressive"``);
    - ``rejected_joins``: ``(frozenset of (memory id, content hash), note)`` per merge or
      reconcile rejected before: a later merge or reconcile whose sources include all of
      those memories, unchanged, would join what a reviewer refused to join — with one more
      copy among its sources, or another text, its signature differs, yet it waits as
      ``rejected`` too;
    - ``recall_held``: ``{operation index: sentence}`` of the operations that cost a probe its
      answer (the sentence names the probe).

    Returns an :class:`AutoApplySplit`. Raises ``ValueError`` when the three sequences differ
    in length.
    """
    if not len(operations) == len(risks) == len(losses):
        raise ValueError(
            f"operations, risks and losses differ in length: "
            f"{len(operations)}, {len(risks)}, {len(losses)}"
        )
    decisions = decisions or StandingDecisions()
    rejected = rejected or {}
    line = policy.auto_apply_max_risk
    budget = _Budget(policy, store_sentences)
    gates: list[Gate] = []
    for i, (op, risk, loss) in enumerate(zip(operations, risks, losses, strict=True)):
        sig = operation_signature(op)
        codes: list[str] = []
        why: list[str] = []
        if str(getattr(op.kind, "value", op.kind)) == "conflict":
            codes.append("conflict")
            why.append(CODES["conflict"])
        if (note := model_note(op)) is not None:
            codes.append("model")
            why.append(note)
        elif (getattr(op, "scores", None) or {}).get("auto_apply", True) is False:
            codes.append("judged")
            why.append(CODES["judged"])
        if sig in rejected:
            codes.append("rejected")
            why.append(f"rejected before: {rejected[sig]}" if rejected[sig] else CODES["rejected"])
        elif rejected_joins and (note := joins_rejected(op, rejected_joins)) is not None:
            codes.append("rejected")
            why.append(f"rejected before (it joins the same memories): {note}".rstrip(": "))
        touched = decisions.touching(op.source_ids)
        decided = (op.scores or {}).get("decision")
        if touched or decided is not None:
            codes.append("decision")
            labels = [c.label for c in touched[:3]] or [f"decision #{decided}"]
            why.append("touches " + ", ".join(labels) + (" …" if len(touched) > 3 else ""))
        score, top = _score(risk)
        if score > line:
            codes.append("risk")
            why.append(f"risk {score:.2f} > {line:.2f}" + (f": {top}" if top else ""))
        if recall_held and i in recall_held:
            codes.append("recall")
            why.append(recall_held[i] or CODES["recall"])
        if not codes:
            held = budget.admit(loss)
            if held is not None:
                codes.append(held[0])
                why.append(held[1])
        if not codes:
            why.append(
                f"risk {score:.2f} ≤ {line:.2f}, within the content guard, no decision, "
                "never rejected"
            )
        gates.append(Gate(i, not codes, sig, tuple(codes), tuple(why)))
    return AutoApplySplit(tuple(gates), loss_totals(budget.kept))


def _authorship(op: Any) -> tuple[str, str] | None:
    """``(model, "decided" | "written")`` of :func:`model_author`, or ``None``."""
    kind = str(getattr(op.kind, "value", op.kind))
    if kind == "conflict":
        return None  # never applied: both memories stay until a person picks
    scores = getattr(op, "scores", None) or {}
    meta = getattr(op, "result_metadata", None) or {}
    rule = str(getattr(op, "rule", "") or "")
    judge = j if isinstance(j := scores.get("llm_judge"), dict) else {}
    if rule == JUDGE_RULE or scores.get("judged_by") or judge:
        return str(scores.get("judged_by") or judge.get("model") or "LLM"), "decided"
    if kind == "distill" or rule == DISTILL_RULE:
        return str(meta.get("distill_model") or "LLM"), "written"
    writer = meta.get(WRITER_KEY)
    if kind == "summarize" and writer and writer != EXTRACTIVE:
        return str(writer), "written"
    return None


def model_author(op: Any) -> str | None:
    """The model whose word an operation carries, or ``None`` when rules and people made it.

    ``op``: an engine :class:`~consolidation.plans.Operation` or a stored one (any object with
    ``kind``, ``rule``, ``scores``, ``result_metadata``). A model's word is its verdict — an
    LLM judge's merge or reconcile (rule ``llm_judge``, ``scores["judged_by"]``) — or its
    text: a distilled fact (rule ``llm_distill``, ``result_metadata["distill_model"]``) or a
    summary an LLM wrote (``result_metadata["summary_writer"]`` other than ``"extractive"``).
    Such an operation waits for a person under every auto-apply mode (:func:`split_auto_apply`,
    the console's ``all`` and the engine's own apply). A conflict item gives ``None``: it is
    never applied anyway. ``"LLM"`` when the model's name was not recorded."""
    found = _authorship(op)
    return None if found is None else found[0]


def model_note(op: Any) -> str | None:
    """``"decided by model M"`` (a verdict) or ``"written by model M"`` (a text) for an
    operation :func:`model_author` names, else ``None``: why it waits, in the reviewer's words."""
    found = _authorship(op)
    return None if found is None else f"{found[1]} by model {found[0]}"


JOINING_KINDS = frozenset({"merge", "reconcile"})
"""Operations that join memories: what a rejected join holds back."""


def operation_pairs(op: Any) -> frozenset[tuple[str, str]]:
    """``{(memory id, content hash)}`` of ``op``'s sources."""
    return frozenset(zip(map(str, op.source_ids), map(str, op.source_hashes), strict=True))


def joins_rejected(
    op: Any, rejected_joins: Sequence[tuple[frozenset[tuple[str, str]], str]]
) -> str | None:
    """The note of the first rejected join (see :func:`split_auto_apply`) whose memories are
    all among ``op``'s sources, unchanged, when ``op`` is a merge or reconcile; else ``None``."""
    if str(getattr(op.kind, "value", op.kind)) not in JOINING_KINDS:
        return None
    pairs = operation_pairs(op)
    for joined, note in rejected_joins:
        if len(joined) >= 2 and joined <= pairs:
            return note
    return None


class _Budget:
    """The content guard over the safe part as it grows (in plan order)."""

    def __init__(self, policy: Policy, store_sentences: int) -> None:
        self.max_words = policy.max_lost_content_words
        self.fraction = policy.max_lost_sentence_fraction
        self.max_sentences = int(policy.max_lost_sentence_fraction * max(0, store_sentences) + 1e-9)
        self.words: set[str] = set()
        self.sentences = 0
        self.kept: list[OperationLoss] = []

    def admit(self, loss: OperationLoss) -> tuple[str, str] | None:
        """``None`` and the loss counted when it fits, else ``(code, sentence)``."""
        words = {w.casefold() for w in loss.content_words}
        more = words - self.words
        if self.max_words is not None and more and len(self.words) + len(more) > self.max_words:
            shown = ", ".join(loss.content_words[:5]) + (" …" if len(words) > 5 else "")
            n = len(loss.content_words)
            return "content", f"loses {n} content word{'s' if n > 1 else ''}: {shown}"
        n = len(loss.sentences)
        if n and self.sentences + n > self.max_sentences:
            return "sentences", (
                f"{CODES['sentences']}: {self.sentences + n} sentences, at most "
                f"{self.max_sentences} ({self.fraction:.0%} of the store's)"
            )
        self.words |= more
        self.sentences += n
        self.kept.append(loss)
        return None
