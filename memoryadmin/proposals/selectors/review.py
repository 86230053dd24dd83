"""The reads of the Review tab: filters, sorting and paging, cards, conflicts, the approve line.

Risk and lost content come from :mod:`.scoring`.

Scores come from :mod:`consolidation.review` (documented there): each stored operation carries
``risk`` (0..1), ``risk_reasons``, ``lost`` (an ``OperationLoss`` dict) and ``lost_sentences``,
computed once when the proposal is stored (:func:`plan_scores`, against the whole snapshot) and
again for one operation after its merged text is edited (from the stored rows only). Listing,
filtering, sorting and paging happen in the database, so a pass of thousands of operations is
never loaded whole; the pass-wide loss totals read only the operations that lose something.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.core.paginator import Page, Paginator
from django.db.models import Count, Q, QuerySet, Sum

from consolidation import FieldMap
from consolidation.review import (
    RISK_LINE,
    LossTotals,
    OperationLoss,
    lost_segments,
    source_segments,
)
from memoryadmin.proposals.models import Operation, OperationSource, Pass
from memoryadmin.proposals.selectors.evaluation import applies_words
from memoryadmin.proposals.selectors.scoring import (
    stored_operation_text,
)

__all__ = [
    "REVIEW_PER_PAGE",
    "RISK_LINE",
    "ReviewQuery",
    "approve_line",
    "bulk_targets",
    "conflict_counts",
    "conflict_view",
    "group_words",
    "lost_page",
    "pass_revision",
    "review_card",
    "review_page",
    "review_rest",
    "review_rules",
]


REVIEW_PER_PAGE = 25
"""Operations per page of the Review tab (ten fit on one screen; the rest page in the DB)."""

LOST_PER_PAGE = 20
"""Operations per page of the Lost content view."""


# ----- the Review tab ------------------------------------------------------------------------


SORTS = {
    "risk": ("-risk", "index"),
    "loss": ("-lost_sentences", "-risk", "index"),
    "index": ("index",),
}
"""Orderings of the Review list (the risk order is served by the ``op_run_risk`` index)."""


ONE_BY_ONE = Q(risk__gte=RISK_LINE) | Q(scores__has_key="waiting") | Q(kind="conflict")
"""Listed one by one on the Review tab: at or above :data:`RISK_LINE`, left for a person by
auto-apply (``scores["waiting"]``; its line, ``Policy.auto_apply_max_risk`` 0.25, is lower), or
a conflict (a person's question, also once decided: "keep both" scores it 0)."""


@dataclass(frozen=True)
class ReviewQuery:
    """Filters of the Review list: ``kind``/``rule`` exact ("" = any); ``risk`` is ``"line"``
    (:data:`ONE_BY_ONE`), ``"below"`` (the rest) or ``"all"``; ``q`` searches the reason, the
    result and the sources' texts (case-insensitive); ``state`` is ``""``, ``"included"`` or
    ``"excluded"``; ``sort`` a key of :data:`SORTS`; ``op`` one operation id (0 = any);
    ``pinned``: ids the list held when opened, kept on it (``selectors.review_list``)."""

    kind: str = ""
    rule: str = ""
    risk: str = "line"
    q: str = ""
    state: str = ""
    sort: str = "risk"
    op: int = 0
    pinned: frozenset[int] = frozenset()

    def apply(self, qs: QuerySet[Operation]) -> QuerySet[Operation]:
        """``qs`` filtered and ordered (never evaluated here)."""
        if self.op:
            return qs.filter(pk=self.op)
        if self.kind:
            qs = qs.filter(kind=self.kind)
        if self.rule:
            qs = qs.filter(rule=self.rule)
        line = ONE_BY_ONE | Q(pk__in=self.pinned) if self.pinned else ONE_BY_ONE
        if self.risk in ("line", "below"):
            qs = qs.filter(line) if self.risk == "line" else qs.exclude(line)
        if self.state == "included":
            qs = qs.exclude(status=Operation.Status.EXCLUDED)
        elif self.state == "excluded":
            qs = qs.filter(status=Operation.Status.EXCLUDED)
        if self.q.strip():
            q = self.q.strip()
            matching = OperationSource.objects.filter(
                operation__in=qs, document__icontains=q
            ).values("operation_id")
            qs = qs.filter(
                Q(reason__icontains=q) | Q(result_document__icontains=q) | Q(pk__in=matching)
            )
        return qs.order_by(*SORTS.get(self.sort, SORTS["risk"]))

    def params(self) -> dict[str, str]:
        """The non-default filters as query parameters (for links and the bulk form)."""
        out = {k: str(getattr(self, k) or "") for k in ("kind", "rule", "risk", "q", "state")}
        out |= {"sort": self.sort, "op": str(self.op or "")}
        defaults = ReviewQuery()
        return {k: v for k, v in out.items() if v and v != str(getattr(defaults, k) or "")}


def review_page(*, run: Pass, query: ReviewQuery, page: int | str = 1) -> Page[Any]:
    """One page (:data:`REVIEW_PER_PAGE`) of ``run``'s operations matching ``query``, each as a
    :func:`review_card` dict; the count and the slice are two queries."""
    qs = query.apply(run.operations.all()).prefetch_related("sources")
    pager: Page[Any] = Paginator(qs, REVIEW_PER_PAGE).get_page(page)
    pager.object_list = [review_card(op) for op in pager.object_list]
    return pager


def review_card(op: Operation) -> dict[str, Any]:
    """Display data of one operation in the Review tab: its ``sources`` as ``(source, segments)``
    (word-level diff against the result), its ``lost`` sentences as ``(sentence, segments)``,
    the ``risk`` and its ``reasons``."""
    text = stored_operation_text(op)
    loss = OperationLoss.from_dict(op.lost)
    elsewhere = set(loss.elsewhere)
    sources = sorted(op.sources.all(), key=lambda s: s.position)
    return {
        "op": op,
        "sources": [
            (row, source_segments(text, src, elsewhere=elsewhere))
            for row, src in zip(sources, text.sources, strict=True)
        ],
        "lost": [(s, lost_segments(s)) for s in loss.sentences],
        "nothing_lost": loss.nothing_lost and op.kind not in ("promote", "conflict"),
        "reasons": list(op.risk_reasons or []),
        "above_line": (
            op.risk >= RISK_LINE or "waiting" in (op.scores or {}) or op.kind == "conflict"
        ),
        "conflict": conflict_view(op),
    }


def review_rules(run: Pass) -> list[tuple[str, str]]:
    """``[(kind, rule)]`` present in ``run``, for the filter and bulk menus."""
    return list(run.operations.order_by("kind", "rule").values_list("kind", "rule").distinct())


RULE_WORDS: dict[tuple[str, str], str] = {
    ("merge", "exact_duplicate"): "exact duplicates",
    ("merge", "near_duplicate"): "near-duplicate merges",
    ("merge", "session_window"): "session windows",
    ("merge", "semantic_window"): "semantic windows",
    ("merge", "evidence_fold"): "evidence folds",
    ("prune", "decay"): "decayed prunes",
    ("prune", "decay_covered"): "covered prunes",
    ("prune", "exact_copy"): "copies beside a conflict",
}
"""How an operator names a (kind, rule) group; others read "<kind>s (<rule>)"."""


def group_words(kind: str, rule: str, *, nothing_lost: bool = False, count: int = 2) -> str:
    """``("merge", "session_window")`` → ``"session windows"`` (``"complete session windows"``
    when they lose nothing; ``"session window"`` for a ``count`` of 1)."""
    words = RULE_WORDS.get((kind, rule)) or f"{kind}s" + (
        f" ({rule.replace('_', ' ')})" if rule else ""
    )
    if nothing_lost and rule in ("session_window", "semantic_window"):
        words = "complete " + words
    if count == 1:
        noun, paren, rest = words.partition(" (")
        words = noun.removesuffix("s") + paren + rest
    return words


def _and(parts: list[str]) -> str:
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def review_rest(run: Pass) -> dict[str, Any]:
    """The operations below the risk line, summarised by kind and rule (one aggregate query):
    ``{"count", "nothing_lost": (n, sentence), "groups": [{kind, rule, n, lost, words}]}``,
    e.g. ``"1,204 exact duplicates and complete session windows: nothing lost"``."""
    rows = (
        run.operations.exclude(ONE_BY_ONE)
        .values("kind", "rule")
        .annotate(n=Count("id"), lost=Sum("lost_sentences"))
        .annotate(n_clean=Count("id", filter=Q(lost_sentences=0)))
        .order_by("kind", "rule")
    )
    clean_total, clean_names, groups = 0, [], []
    for r in rows:
        if r["n_clean"]:
            clean_total += r["n_clean"]
            clean_names.append(
                group_words(r["kind"], r["rule"], nothing_lost=True, count=r["n_clean"])
            )
        if r["n"] > r["n_clean"]:
            groups.append(
                {
                    "kind": r["kind"],
                    "rule": r["rule"],
                    "n": r["n"] - r["n_clean"],
                    "lost": r["lost"] or 0,
                    "words": group_words(r["kind"], r["rule"], count=r["n"] - r["n_clean"]),
                }
            )
    sentence = f"{clean_total:,} {_and(clean_names)}: nothing lost" if clean_total else ""
    return {
        "count": sum(r["n"] for r in rows),
        "nothing_lost": (clean_total, sentence),
        "groups": groups,
    }


def lost_page(*, run: Pass, page: int | str = 1) -> Page[Any]:
    """The Lost content view: included operations that lose something, riskiest first, a page
    of :data:`LOST_PER_PAGE` operations, each ``{"op", "lost": [(sentence, segments)]}``."""
    qs = (
        run.operations.filter(lost_sentences__gt=0)
        .exclude(status=Operation.Status.EXCLUDED)
        .only("id", "index", "kind", "rule", "risk", "lost", "lost_sentences", "status", "run_id")
        .order_by("-risk", "index")
    )
    pager: Page[Any] = Paginator(qs, LOST_PER_PAGE).get_page(page)
    pager.object_list = [
        {
            "op": op,
            "lost": [(s, lost_segments(s)) for s in OperationLoss.from_dict(op.lost).sentences],
        }
        for op in pager.object_list
    ]
    return pager


def conflict_view(op: Operation, fieldmap: FieldMap | None = None) -> dict[str, Any] | None:
    """Display data of a conflict item (decided or not), ``None`` for any other operation:
    ``{"cue", "reason", "decision": {keep, by, at} | None, "sides": [{"label": "A" | "B",
    "key": "a" | "b", "source", "created", "updated", "recency", "kept": True | False | None}]}``
    in the order the engine planned (A = the newer when known). Dates are the metadata values
    under ``fieldmap``'s ``created_at`` / ``updated_at`` keys as stored ("" when absent);
    ``recency`` is what the engine compared. ``kept`` is ``None`` until a reviewer decided."""
    scores = op.scores or {}
    picked = op.kind == Operation.Kind.RECONCILE and op.rule == "reviewer_pick"
    if op.kind != Operation.Kind.CONFLICT and not picked:
        return None
    origin: dict[str, Any] = c if isinstance(c := scores.get("conflict"), dict) else {}
    by_id = {s.memory_id: s for s in op.sources.all()}
    ids = [i for i in (origin.get("ids") or list(op.source_ids[:2])) if i in by_id]
    decision = d if isinstance(d := scores.get("decision"), dict) else None
    dates: list[Any] = d if isinstance(d := scores.get("dates"), list) else []
    fm = fieldmap or FieldMap()
    sides = []
    for n, mid in enumerate(ids):
        src = by_id[mid]
        meta = src.metadata or {}
        key = "ab"[n] if n < 2 else str(n)
        kept = None if decision is None else decision.get("keep") in ("both", key)
        sides.append(
            {
                "label": key.upper(),
                "key": key,
                "source": src,
                "created": str(meta.get(fm.created_at, "") or ""),
                "updated": str(meta.get(fm.updated_at, "") or ""),
                "recency": dates[n] if n < len(dates) and dates[n] else "",
                "kept": kept,
            }
        )
    return {
        "cue": origin.get("rule") or op.rule or "contradiction",
        "decision": decision,
        "sides": sides,
    }


def conflict_counts(run: Pass) -> dict[str, int]:
    """Conflict items of ``run``: ``{"total", "undecided", "picked", "both"}`` (one aggregate
    query). ``picked`` became ``reviewer_pick`` reconciles; ``both`` were decided "keep both";
    ``undecided`` wait for a reviewer (approving keeps both of each)."""
    kinds = [Operation.Kind.CONFLICT, Operation.Kind.RECONCILE]  # first, so an index finds them
    rows = (
        run.operations.filter(kind__in=kinds)
        .filter(Q(kind=Operation.Kind.CONFLICT) | Q(rule="reviewer_pick"))
        .aggregate(
            total=Count("id"),
            picked=Count("id", filter=Q(kind=Operation.Kind.RECONCILE)),
            both=Count("id", filter=Q(kind=Operation.Kind.CONFLICT, scores__has_key="decision")),
        )
    )
    counts = {k: int(v or 0) for k, v in rows.items()}
    counts["undecided"] = counts["total"] - counts["picked"] - counts["both"]
    return counts


def approve_line(ev: Any, totals: LossTotals, conflicts: dict[str, int] | None = None) -> str:
    """What approving applies, in one line: ``"406 of 412 operations (6 excluded or in
    conflict), loses 38 sentences in 17 memories; loss 23.9% of 25.0%"`` (``ev`` an
    :class:`~.evaluation.Evaluation`; the operations as :func:`~.evaluation.applies_words`
    says them, as a refused approve does), followed by
    what happens to conflicts nobody decided (``conflicts``: :func:`conflict_counts`): they stay,
    both memories kept, nothing removed."""
    undecided = (conflicts or {}).get("undecided", 0)
    tail = (
        f"; {undecided:,} undecided conflict{'s' if undecided != 1 else ''} "
        f"stay{'s' if undecided == 1 else ''} as “kept both” (nothing removed)"
        if undecided
        else ""
    )
    return _approve_line(ev, totals) + tail


def _approve_line(ev: Any, totals: LossTotals) -> str:
    if totals.sentences:
        loses = (
            f"loses {totals.sentences:,} sentence{'s' if totals.sentences != 1 else ''} in "
            f"{totals.memories:,} memor{'y' if totals.memories == 1 else 'ies'}"
        )
    else:
        loses = "loses no sentence"
    return (
        f"{applies_words(ev)}, {loses}; loss {ev.loss_fraction:.1%} of {ev.max_loss_fraction:.1%}"
    )


def bulk_targets(
    *,
    run: Pass,
    scope: str,
    ops: Sequence[int] = (),
    query: ReviewQuery | None = None,
    group: str = "",
    below: float | None = None,
) -> tuple[list[int], str]:
    """Operation ids of ``run`` a bulk action applies to, and the scope in words for the audit.

    ``scope`` is ``"selected"`` (``ops``), ``"filter"`` (every operation ``query`` matches, on
    every page) or ``"rule"`` (``group`` = ``"kind:rule"`` or ``"kind:"``; with ``below``, only
    operations whose ``scores["confidence"]`` is below it). One ``values_list`` query.
    """
    qs = run.operations.all()
    if scope == "selected":
        return list(qs.filter(pk__in=list(ops)).values_list("pk", flat=True)), ""
    if scope == "filter":
        query = query or ReviewQuery()
        ids = list(query.apply(qs).values_list("pk", flat=True))
        words = ", ".join(f"{k}={v}" for k, v in query.params().items()) or "risk above the line"
        return ids, f"all matching the filter ({words})"
    kind, _, rule = group.partition(":")
    qs = qs.filter(kind=kind)
    words = f"all {group_words(kind, rule) if rule else kind + 's'}"
    if rule:
        qs = qs.filter(rule=rule)
    if below is not None:
        qs = qs.filter(scores__confidence__lt=below)
        words += f" below confidence {below:g}"
    return list(qs.values_list("pk", flat=True)), words


def pass_revision(*, run: Pass) -> str:
    """The revision of what approving ``run`` would apply: a counter kept with its figures
    (``Pass.figures["revision"]``), bumped by
    :func:`~memoryadmin.proposals.services.evaluation.store_figures`, which every service that
    changes what a pass includes, removes or loses calls (exclude, include, edit, a conflict
    decision, a carry-over). A reviewer's approve form carries the one on screen
    (:func:`~memoryadmin.proposals.services.review.pass_approve` ``revision``). One query,
    whatever the pass's size."""
    figures = Pass.objects.filter(pk=run.pk).values_list("figures", flat=True).first()
    return str((figures or {}).get("revision", 0))
