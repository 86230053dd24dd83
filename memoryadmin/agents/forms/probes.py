"""Forms of the probe queries: add or edit one."""

from __future__ import annotations

from typing import Any

from django import forms

from memoryadmin.core.validation import parse_evidence_ids

__all__ = ["ProbeForm"]


class ProbeForm(forms.Form):
    """Add or edit a probe query; ``evidence_ids`` is a comma/space-separated list."""

    question = forms.CharField(widget=forms.Textarea(attrs={"rows": 2}), max_length=2000)
    answer = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 2}),
        max_length=2000,
        help_text="At least half of its content words must appear in the top-k "
        "memories for the probe to count as recalled.",
    )
    evidence_ids = forms.CharField(
        required=False,
        label="Evidence ids",
        max_length=60_000,
        help_text=(
            "Evidence ids that hold the answer (e.g. LoCoMo dia_ids “D1:3”), "
            "as listed in the memories' evidence metadata; separated by commas or spaces."
        ),
    )
    category = forms.IntegerField(
        required=False, min_value=0, max_value=1000, help_text="Optional (LoCoMo: 1–4)."
    )

    @classmethod
    def for_probe(cls, probe: Any, data: Any = None) -> ProbeForm:
        """Bound to ``data`` when given, else initialised from ``probe``."""
        initial = {
            "question": probe.question,
            "answer": probe.answer,
            "category": probe.category,
            "evidence_ids": ", ".join(str(e) for e in probe.evidence_ids or []),
        }
        return cls(data, initial=initial) if data is not None else cls(initial=initial)

    def clean_evidence_ids(self) -> list[str]:
        try:
            return parse_evidence_ids(self.cleaned_data["evidence_ids"])
        except ValueError as exc:
            raise forms.ValidationError(str(exc)) from exc

    def service_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``probes.probe_create`` / ``probe_update``
        (after ``is_valid()``)."""
        d = self.cleaned_data
        return {
            "question": d["question"],
            "answer": d["answer"],
            "evidence_ids": d["evidence_ids"],
            "category": d["category"],
        }
