"""The forget form: a selection (scope key and value, ids, text contains, similar to a text) and
the requester's reason; the approve and reject notes use :class:`~.review.NoteForm`.

Validation only: :meth:`ForgetForm.selection` builds the
:class:`~memoryadmin.memories.selectors.forget.ForgetSelection` the views hand to the selector
(dry run) or the service (request)."""

from __future__ import annotations

import re
from typing import Any

from django import forms

from memoryadmin.agents.models import Agent
from memoryadmin.core.validation import MAX_NOTE_CHARS
from memoryadmin.memories.selectors.forget import FORGET_MAX_COUNT, ForgetSelection

__all__ = ["ForgetForm", "split_ids"]

KIND_CHOICES = [
    ("scope", "everything of one scope value (a user, an agent, a run …)"),
    ("ids", "these memory ids"),
    ("contains", "memories whose text contains"),
    ("similar", "memories similar to a text"),
]


def split_ids(text: str) -> tuple[str, ...]:
    """Ids separated by whitespace or commas, in order, without repeats."""
    return tuple(dict.fromkeys(i for i in re.split(r"[\s,]+", text or "") if i))


class ForgetForm(forms.Form):
    """What to forget, for one agent (its scope keys are the ``key`` choices)."""

    kind = forms.ChoiceField(choices=KIND_CHOICES, initial="scope", label="Forget")
    key = forms.ChoiceField(required=False, label="Scope key")
    value = forms.CharField(required=False, max_length=500, label="Scope value")
    ids = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 3}), label="Ids")
    text = forms.CharField(required=False, max_length=2000, label="Text")
    similarity = forms.FloatField(required=False, min_value=0.0, max_value=1.0, initial=0.8)
    max_count = forms.IntegerField(
        required=False, min_value=1, max_value=FORGET_MAX_COUNT, initial=100, label="At most"
    )
    reason = forms.CharField(
        required=False, max_length=MAX_NOTE_CHARS, widget=forms.Textarea(attrs={"rows": 2})
    )

    def __init__(self, *args: Any, agent: Agent, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.agent = agent
        self.fields["key"].choices = [(k, k) for k in agent.get_field_map().scope]

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        if self.errors:
            return data
        try:
            self.cleaned_data["selection"] = self._selection(data).check(self.agent)
        except ValueError as exc:
            raise forms.ValidationError(str(exc)) from None
        return data

    @staticmethod
    def _selection(d: dict[str, Any]) -> ForgetSelection:
        similarity = d.get("similarity")
        return ForgetSelection(
            d["kind"],
            key=d.get("key") or "",
            value=(d.get("value") or "").strip(),
            ids=split_ids(d.get("ids") or ""),
            text=(d.get("text") or "").strip(),
            similarity=0.8 if similarity is None else similarity,
            max_count=d.get("max_count") or 100,
        )

    def selection(self) -> ForgetSelection:
        """The validated selection (after :meth:`is_valid`)."""
        return self.cleaned_data["selection"]
