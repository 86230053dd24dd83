"""Forms of the audit page: the passes filter and the "Events" tab filter (GET forms)."""

from __future__ import annotations

from datetime import date
from typing import Any

from django import forms

from memoryadmin.agents.models import Agent
from memoryadmin.ops.selectors.audit import AUDIT_FILTER_ALIASES, AUDIT_FILTERS, audit_verbs


class AuditFilterForm(forms.Form):
    """Audit filters (GET): status group, agent, inclusive date range."""

    status = forms.ChoiceField(
        required=False, choices=[(k, k.replace("_", " ")) for k in AUDIT_FILTERS], initial="all"
    )
    agent = forms.ChoiceField(required=False, choices=[])
    since = forms.DateField(required=False, widget=forms.DateInput(attrs={"type": "date"}))
    until = forms.DateField(required=False, widget=forms.DateInput(attrs={"type": "date"}))

    def __init__(self, data: Any = None, *args: Any, **kwargs: Any) -> None:
        status = data.get("status") if data is not None else None
        if status in AUDIT_FILTER_ALIASES:  # old links (?status=dismissed) keep working
            data = data.copy()
            data["status"] = AUDIT_FILTER_ALIASES[status]
        super().__init__(data, *args, **kwargs)
        self.fields["agent"].choices = [
            ("", "all agents"),
            *Agent.objects.values_list("slug", "name"),
        ]

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        if data.get("since") and data.get("until") and data["since"] > data["until"]:
            self.add_error("until", "The end date is before the start date.")
        for name in ("since", "until"):
            # The day after the last date must exist: ``until`` is inclusive (midnight after it).
            if data.get(name) and data[name] >= date.max:
                self.add_error(name, f"Choose a date before {date.max:%Y-%m-%d}.")
        return data


class EventFilterForm(forms.Form):
    """Audit "Events" tab filters (GET): agent slug and verb."""

    agent = forms.ChoiceField(required=False, choices=[])
    verb = forms.ChoiceField(required=False, choices=[])

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["agent"].choices = [
            ("", "all agents"),
            *Agent.objects.values_list("slug", "name"),
        ]
        self.fields["verb"].choices = [
            ("", "every action"),
            *((v, v.replace("_", " ")) for v in audit_verbs()),
        ]
