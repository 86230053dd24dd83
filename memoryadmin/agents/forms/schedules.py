"""Forms of the schedules: an agent's cron fields (validated by the same preview the page
shows) and the live preview's query."""

from __future__ import annotations

from django import forms
from django.urls import reverse_lazy

from memoryadmin.agents.selectors.schedules import next_runs
from memoryadmin.core.selectors import operator_zone

__all__ = ["CronMixin", "CronPreviewForm"]


class CronMixin(forms.Form):
    """``schedule_cron`` validated by the same preview the page shows."""

    schedule_cron = forms.CharField(
        label="Schedule (cron)",
        max_length=120,
        initial="0 3 * * *",
        help_text="5-field cron: minute hour day-of-month month day-of-week (server time zone "
        "for running; preview below in yours).",
    )
    schedule_enabled = forms.BooleanField(
        label="Schedule enabled",
        required=False,
        initial=True,
        # Ticking or unticking it refreshes the preview (no runs while disabled).
        widget=forms.CheckboxInput(
            attrs={
                "hx-get": reverse_lazy("schedule_preview"),
                "hx-trigger": "change",
                "hx-target": "#cron-preview",
                "hx-swap": "outerHTML",
                "hx-include": "#schedule-fieldset",
            }
        ),
    )

    def clean_schedule_cron(self) -> str:
        cron = " ".join(self.cleaned_data["schedule_cron"].split())
        if len(cron.split()) != 5:
            raise forms.ValidationError("Enter a 5-field cron expression, e.g. “0 3 * * *”.")
        try:
            next_runs(cron=cron, tz=operator_zone(None), count=1)
        except ValueError as exc:
            raise forms.ValidationError(str(exc)) from exc
        return cron


class CronPreviewForm(forms.Form):
    """Query of the live cron preview partial."""

    schedule_cron = forms.CharField(required=False, max_length=120)
    tz = forms.CharField(required=False, max_length=64)
    # The agent form's preview also sends ``schedule_form=1`` and its checkbox (absent when
    # unticked, as browsers send checkboxes); the standalone preview page sends neither.
    schedule_form = forms.BooleanField(required=False)
    schedule_enabled = forms.BooleanField(required=False)

    def enabled(self) -> bool:
        """Whether the schedule previewed runs: the agent form's checkbox when it sent one."""
        data = getattr(self, "cleaned_data", {})
        return bool(data.get("schedule_enabled")) or not data.get("schedule_form")
