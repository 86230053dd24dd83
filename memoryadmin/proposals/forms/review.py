"""Forms of the review of a pass: the Review tab's filters and bulk exclude/include, one
operation's exclude/include and merged text, and the note of an approve, a reject or a
rollback.

Validation only; the views hand the cleaned data to :mod:`memoryadmin.proposals.selectors.review`
(reads) and :mod:`memoryadmin.proposals.services.review` (writes).
"""

from __future__ import annotations

from typing import Any

from django import forms

from memoryadmin.core.validation import MAX_NOTE_CHARS
from memoryadmin.proposals.selectors.review import ReviewQuery

__all__ = [
    "OPERATION_KIND_CHOICES",
    "BulkReviewForm",
    "ExcludeForm",
    "MergedTextForm",
    "NoteForm",
    "ReviewFilterForm",
]

REVIEW_RISK_CHOICES = [
    ("line", "above the risk line"),
    ("all", "any risk"),
    ("below", "below the line"),
]
REVIEW_SORT_CHOICES = [
    ("risk", "riskiest first"),
    ("loss", "most lost first"),
    ("index", "plan order"),
]
REVIEW_STATE_CHOICES = [
    ("", "included and excluded"),
    ("included", "included"),
    ("excluded", "excluded"),
]
OPERATION_KIND_CHOICES = [
    ("", "any kind"),
    ("merge", "merge"),
    ("promote", "promote"),
    ("prune", "prune"),
    ("reconcile", "reconcile"),
    ("distill", "distill"),
    ("summarize", "summarize"),
    ("conflict", "conflict"),
]


class ReviewFilterForm(forms.Form):
    """Filters of the Review tab (all optional; blank means the default)."""

    tab = forms.ChoiceField(
        choices=[("review", "Review"), ("lost", "Lost content")], required=False
    )
    kind = forms.ChoiceField(choices=OPERATION_KIND_CHOICES, required=False)
    rule = forms.CharField(max_length=60, required=False)
    risk = forms.ChoiceField(choices=REVIEW_RISK_CHOICES, required=False)
    q = forms.CharField(max_length=200, required=False, label="Text")
    state = forms.ChoiceField(choices=REVIEW_STATE_CHOICES, required=False)
    sort = forms.ChoiceField(choices=REVIEW_SORT_CHOICES, required=False)
    op = forms.IntegerField(min_value=1, required=False)
    page = forms.IntegerField(min_value=1, required=False)

    def query(self) -> Any:
        """The :class:`~memoryadmin.proposals.selectors.review.ReviewQuery` of the valid fields
        (defaults for invalid ones, which carry their errors for the template)."""
        data = getattr(self, "cleaned_data", {})
        return ReviewQuery(
            kind=data.get("kind") or "",
            rule=data.get("rule") or "",
            risk=data.get("risk") or "line",
            q=data.get("q") or "",
            state=data.get("state") or "",
            sort=data.get("sort") or "risk",
            op=data.get("op") or 0,
        )


class BulkReviewForm(ReviewFilterForm):
    """Exclude or include many operations at once.

    ``scope``: ``selected`` (the ``ops`` ids posted), ``filter`` (every operation matching the
    posted Review filters, on every page) or ``rule`` (every operation of ``group`` =
    ``"kind:rule"`` or ``"kind:"`` for a whole kind, with ``scores["confidence"]`` below
    ``below`` when given) or ``budget`` (exclude only: the fewest operations that bring the
    pass back within its loss budget, ``selectors.guards.budget_fix``).
    """

    action = forms.ChoiceField(choices=[("exclude", "Exclude"), ("include", "Include")])
    scope = forms.ChoiceField(
        choices=[
            ("selected", "selected"),
            ("filter", "all matching the filter"),
            ("rule", "all of a rule"),
            ("budget", "the fewest that fit the loss budget"),
        ],
    )
    group = forms.CharField(max_length=80, required=False)
    below = forms.FloatField(min_value=0.0, max_value=1.0, required=False, label="Below confidence")

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        ids: list[int] = []
        for raw in self.data.getlist("ops") if hasattr(self.data, "getlist") else []:
            try:
                ids.append(int(raw))
            except (TypeError, ValueError):
                raise forms.ValidationError(f"Not an operation id: {raw!r}.") from None
        data["ops"] = ids
        if data.get("scope") == "selected" and not ids:
            raise forms.ValidationError("Select at least one operation (tick its box) first.")
        if data.get("scope") == "budget" and data.get("action") != "exclude":
            self.add_error("action", "Fitting the loss budget excludes operations.")
        if data.get("scope") == "rule" and ":" not in (data.get("group") or ""):
            self.add_error("group", "Choose a kind or rule.")
        return data


class NoteForm(forms.Form):
    """Approve (note optional; ``revision``: the one shown, see
    ``selectors.review.pass_revision``) or reject (``require_note=True``). The textarea carries
    ``maxlength`` and, for a reject, ``required``, so the browser refuses before posting.
    ``never_again`` (a reject only): the reviewer's "and never propose these again"."""

    note = forms.CharField(
        required=False, widget=forms.Textarea(attrs={"rows": 2}), max_length=MAX_NOTE_CHARS
    )
    revision = forms.CharField(required=False, max_length=64, widget=forms.HiddenInput)
    never_again = forms.BooleanField(
        required=False,
        label="and never propose these again",
        help_text="Also keep the memories of its merges and reconciles apart, and keep what it "
        "would prune (standing decisions, revocable on the agent's Decisions page).",
    )

    def __init__(self, *args: Any, require_note: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["note"].required = require_note
        self.fields["note"].widget.attrs["id"] = "reject-note" if require_note else "approve-note"
        if require_note:
            self.fields["note"].error_messages["required"] = (
                "A note is required to reject a proposal."
            )

    def clean_note(self) -> str:
        note = self.cleaned_data["note"].strip()
        if self.fields["note"].required and not note:
            raise forms.ValidationError("A note is required to reject a proposal.")
        return note


class ExcludeForm(forms.Form):
    """Exclude (``excluded=1``) or include (``excluded=0``) one operation."""

    excluded = forms.TypedChoiceField(
        choices=[("1", "exclude"), ("0", "include")], coerce=lambda v: v == "1"
    )


class MergedTextForm(forms.Form):
    """Edit the text of a merge (the service refuses empty or too long text)."""

    document = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), strip=True)
