"""Decision forms: revoke a standing decision (an optional note), filter the Decisions page."""

from __future__ import annotations

from django import forms

from memoryadmin.core.validation import MAX_NOTE_CHARS

__all__ = ["DecisionFilterForm", "DecisionRevokeForm"]


class DecisionRevokeForm(forms.Form):
    """Revoke a decision: why (optional, at most ``MAX_NOTE_CHARS`` characters)."""

    note = forms.CharField(required=False, max_length=MAX_NOTE_CHARS)

    def clean_note(self) -> str:
        return self.cleaned_data["note"].strip()


class DecisionFilterForm(forms.Form):
    """``?state=active|revoked|all`` of the Decisions page (anything else: active)."""

    state = forms.ChoiceField(
        required=False,
        choices=[("active", "active"), ("revoked", "revoked"), ("all", "all")],
    )

    def chosen(self) -> str:
        """The state asked for, ``"active"`` when none or invalid."""
        return (self.cleaned_data.get("state") if self.is_valid() else "") or "active"
