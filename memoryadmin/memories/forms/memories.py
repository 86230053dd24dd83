"""Forms of the memory browser: its filters and semantic search, a memory's edit and pin."""

from __future__ import annotations

from django import forms

__all__ = ["MemoryEditForm", "MemoryFilterForm", "PinForm"]


class MemoryFilterForm(forms.Form):
    """Browser filters and semantic search (GET)."""

    tier = forms.CharField(required=False, max_length=120)
    pinned = forms.ChoiceField(
        required=False, choices=[("", "any"), ("yes", "pinned"), ("no", "not pinned")]
    )
    contains = forms.CharField(required=False, max_length=500, label="Text contains")
    q = forms.CharField(required=False, max_length=1000, label="Semantic search")
    k = forms.IntegerField(required=False, min_value=1, max_value=100, initial=10, label="Top k")


class MemoryEditForm(forms.Form):
    """Edit one memory's text."""

    document = forms.CharField(widget=forms.Textarea(attrs={"rows": 6}), strip=True)


class PinForm(forms.Form):
    """Pin (``pinned=1``) or unpin (``pinned=0``) a memory."""

    pinned = forms.TypedChoiceField(
        choices=[("1", "pin"), ("0", "unpin")], coerce=lambda v: v == "1"
    )
