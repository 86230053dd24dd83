"""Forms of the agents: create (a new collection, or attach an existing one with a field map)
and edit. Validation only: writes go through the services; forms never save.

The policy fields are generated from :class:`consolidation.Policy` (one form field per dataclass
field, with its help text), and the whole policy is validated by constructing a ``Policy``, so
the form can never accept a value the engine refuses (NaN, inf, -1, 2 …).
"""

from __future__ import annotations

import re
from dataclasses import MISSING, fields
from typing import Any

from django import forms
from django.conf import settings
from django.core.validators import RegexValidator

from consolidation import FieldMap, Policy
from consolidation.adapters.endpoints import check_endpoint_url, check_key_env
from memoryadmin.agents.forms.schedules import CronMixin
from memoryadmin.agents.models import Agent
from memoryadmin.agents.selectors.agents import collection_shape
from memoryadmin.core.errors import StoreUnavailable

FIELD_MAP_KEYS = ("document", "created_at", "updated_at", "importance", "tier", "pinned", "scope")
"""Field-map keys an operator sets when attaching an existing collection."""

FIELD_MAP_LABELS = {
    "document": (
        "Text key",
        "Metadata key holding the memory text when the collection stores "
        "no document (mem0: “data”); empty means the document.",
    ),
    "created_at": ("Created-at key", None),
    "updated_at": ("Updated-at key", None),
    "importance": ("Importance key", None),
    "tier": ("Tier key", None),
    "pinned": ("Pinned key", None),
    "scope": (
        "Scope keys",
        "Comma-separated metadata keys that keep memories apart (default "
        "“user_id, agent_id, run_id, actor_id”): different values are never merged.",
    ),
}

PRESET_CHOICES = [
    ("auto", "Detect from the records"),
    ("mem0", "mem0 (text in metadata “data”)"),
    ("praisonai", "PraisonAI memory"),
    ("plain", "Plain documents"),
    ("custom", "Custom (the keys below)"),
]

_COLLECTION_RE = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9._-]{1,510})[A-Za-z0-9]$")
collection_name_validator = RegexValidator(
    _COLLECTION_RE,
    "Chroma collection names are 3–512 characters of letters, digits, “.”, “_” and “-”, "
    "starting and ending with a letter or digit.",
)


def _collection_name_extra(value: str) -> None:
    # Chroma also refuses ".." anywhere and names that look like IPv4 addresses.
    if ".." in value:
        raise forms.ValidationError("Chroma collection names cannot contain “..”.")
    if re.fullmatch(r"\d{1,3}(\.\d{1,3}){3}", value):
        raise forms.ValidationError("Chroma collection names cannot be IPv4 addresses.")


_DEFAULT_RE = re.compile(r"default (“[^”]*”|[^;,)]+)")


def policy_help(name: str, default: Any) -> str:
    """Help text of policy field ``name`` (its metadata in :class:`Policy`) with its "default …"
    taken from the dataclass default (never a number written twice that can drift)."""
    text = POLICY_META[name].get("help", "")
    if isinstance(default, bool) or not _DEFAULT_RE.search(text):
        return text
    shown = (
        "none"
        if default is None
        else f"“{default}”"
        if isinstance(default, str)
        else f"{default:g}"
    )
    return _DEFAULT_RE.sub(lambda _m: f"default {shown}", text, count=1)


def policy_label(name: str) -> str:
    """The form's label of policy field ``name``: its metadata's ``label``, else its name in
    words ("max_loss_fraction" → "Max loss fraction")."""
    return POLICY_META[name].get("label") or name.replace("_", " ").capitalize()


def policy_error_words(message: str) -> str:
    """A :class:`Policy` validation message in the form's words: every policy field name in it
    becomes the label the form shows ("max_loss_fraction must be in [0, 1]" → "Max loss
    fraction must be in [0, 1]")."""
    for name in sorted(POLICY_FIELDS, key=len, reverse=True):
        if name in message:
            label = policy_label(name)
            word = label if message.startswith(name) else f"“{label}”"
            message = re.sub(rf"\b{name}\b", word, message)
    return message[:1].upper() + message[1:]


def _policy_formfield(name: str, type_name: str, default: Any) -> forms.Field:
    meta = POLICY_META[name]
    label, help_text = policy_label(name), policy_help(name, default)
    if type_name == "bool":
        return forms.BooleanField(label=label, required=False, initial=default, help_text=help_text)
    if type_name in ("int", "int | None"):
        return forms.IntegerField(
            label=label,
            initial=default,
            help_text=help_text,
            min_value=meta.get("low", 1),
            required=type_name == "int",
        )
    if meta.get("choices"):
        choices = [(c, c) for c in meta["choices"]]
        return forms.ChoiceField(label=label, initial=default, help_text=help_text, choices=choices)
    if type_name == "str":
        return forms.CharField(label=label, initial=default, help_text=help_text, max_length=60)
    optional = "None" in type_name
    return forms.FloatField(
        label=label, initial=default, help_text=help_text, required=not optional
    )


POLICY_FIELDS: list[str] = [f.name for f in fields(Policy)]

POLICY_META: dict[str, Any] = {f.name: f.metadata for f in fields(Policy)}
"""Each policy field's help, label, unit and range, as :class:`Policy` declares them."""


AUTO_APPLY_CHOICES = [
    ("off", "Off — every proposal waits for a reviewer"),
    ("safe", "Safe — apply the low-risk part on its own, the rest waits"),
    ("all", "All — apply every pass the guards pass (not a model's word, nor what was rejected)"),
]
"""The choices of ``Agent.auto_apply`` (docs/OPERATOR.md, "Auto-apply")."""

AUTO_APPLY_HELP = (
    "Off: nothing applies without a person. Safe: a pass that passes the guards applies only "
    "the operations at or below the auto-apply risk, losing no content words, touching no "
    "decision, never rejected and no conflict; the rest waits for review. All: everything the "
    "guards pass applies, except operations a reviewer rejected before. In every mode, "
    "conflicts, edited operations and what a model wrote or decided (LLM judge, distilled "
    "facts, LLM summaries) wait for a person."
)


class PolicyFieldsMixin(forms.Form):
    """Adds one form field per :class:`Policy` field and validates them as a whole ``Policy``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for f in fields(Policy):
            default = f.default if f.default is not MISSING else None
            self.fields[f"policy_{f.name}"] = _policy_formfield(f.name, str(f.type), default)

    def policy_bound_fields(self) -> list[forms.BoundField]:
        """The policy fields in dataclass order (for the template)."""
        return [self[f"policy_{name}"] for name in POLICY_FIELDS]

    def clean_policy(self) -> Policy | None:
        """Build the ``Policy`` from cleaned fields; ``None`` when any field is wrong.

        Every wrong field gets its own error in one submission: a field the form could not
        read (a type error) and each field :class:`Policy` refuses (a range error, or a rule
        between two fields, put on the field the message names first) — each refused value is
        set back to its default and the rest checked again, so a type error on one field no
        longer hides a range error on another."""
        defaults = Policy().to_dict()
        values, wrong = {}, False
        for name in POLICY_FIELDS:
            key = f"policy_{name}"
            wrong |= key in self.errors
            values[name] = defaults[name] if key in self.errors else self.cleaned_data.get(key)
        for _ in POLICY_FIELDS:
            try:
                policy = Policy.from_dict(values)
            except ValueError as exc:
                first = str(exc).split(" ", 1)[0]
                bad = first if first in POLICY_FIELDS else None
                self.add_error(f"policy_{bad}" if bad else None, policy_error_words(str(exc)))
                if bad is None or values[bad] == defaults[bad]:
                    return None
                values[bad], wrong = defaults[bad], True
            else:
                return None if wrong else policy
        return None

    def policy_notes(self) -> list[str]:
        """What the submitted policy turns off without saying so in its values (shown above
        the policy fields): an empty “min recall retention” disables the recall guard, an
        empty content-word limit the content guard's word count."""

        def empty(name: str) -> bool:
            key = f"policy_{name}"
            value = self.data.get(key) if self.is_bound else self.initial.get(key, "unset")
            return value in ("", None)

        notes = []
        if empty("min_recall_retention"):
            notes.append(
                "Min recall retention is empty: the recall guard is off — no pass is checked "
                "against the probe queries before it is proposed or applied."
            )
        if empty("max_lost_content_words"):
            notes.append(
                "Max lost content words is empty: the content guard does not count lost "
                "content words (only the sentence fraction)."
            )
        return notes

    @staticmethod
    def policy_initial(policy: Policy) -> dict[str, Any]:
        return {f"policy_{k}": v for k, v in policy.to_dict().items()}


class AgentCreateForm(PolicyFieldsMixin, CronMixin):
    """Create an agent: a new collection, or attach an existing one with a field mapping."""

    name = forms.CharField(max_length=120)
    slug = forms.SlugField(max_length=80, help_text="URL name: letters, digits, “-” and “_”.")
    description = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}))
    collection_name = forms.CharField(
        max_length=512,
        validators=[collection_name_validator, _collection_name_extra],
        help_text="Chroma collection that holds this agent's memories.",
    )
    attach = forms.BooleanField(
        required=False,
        label="Attach an existing collection",
        help_text="Read an existing collection as it is instead of creating a new one.",
    )
    auto_apply = forms.ChoiceField(
        choices=AUTO_APPLY_CHOICES, required=False, initial="off", help_text=AUTO_APPLY_HELP
    )
    preset = forms.ChoiceField(
        choices=PRESET_CHOICES,
        required=False,
        initial="auto",
        label="Collection written by",
        help_text="For an attached collection: the field map is chosen from its records or the "
        "library that wrote it; keys typed below override it.",
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        defaults = FieldMap()
        for key in FIELD_MAP_KEYS:
            label, help_text = FIELD_MAP_LABELS[key]
            self.fields[f"field_{key}"] = forms.CharField(
                required=False,
                max_length=300,
                label=label,
                help_text=help_text or f"Metadata key (default “{getattr(defaults, key)}”).",
            )
        self.fields["field_embedder_url"] = forms.URLField(
            required=False,
            max_length=500,
            label="Collection's embedder URL",
            assume_scheme="https",
            widget=forms.URLInput(),
            help_text="OpenAI-compatible endpoint of the model that made the collection's vectors "
            "(e.g. https://api.openai.com/v1 for mem0's default). Without it, a pass writes no "
            "new text to a collection of another model's vectors.",
        )
        self.fields["field_embedder_model"] = forms.CharField(
            required=False,
            max_length=200,
            label="Embedder model",
            help_text="e.g. text-embedding-3-small",
        )
        self.fields["field_embedder_key_env"] = forms.CharField(
            required=False,
            max_length=120,
            label="Embedder key variable",
            help_text="Environment variable holding its API key (the key is never stored): "
            "one the deployment allows (EMBEDDER_KEY_ENV_ALLOWED, by default OPENAI_API_KEY or "
            "MEMORYADMIN_EMBEDDER_KEY…), never one of the service's secrets.",
        )
        order = [
            "name",
            "slug",
            "description",
            "collection_name",
            "attach",
            "preset",
            *[f"field_{k}" for k in FIELD_MAP_KEYS],
            "field_embedder_url",
            "field_embedder_model",
            "field_embedder_key_env",
            "auto_apply",
            "schedule_cron",
            "schedule_enabled",
        ]
        self.order_fields(order)

    def clean_field_embedder_url(self) -> str:
        url = self.cleaned_data.get("field_embedder_url") or ""
        if not url:
            return ""
        try:
            return check_endpoint_url(url, settings.ENDPOINT_HOSTS_ALLOWED, what="embedder")
        except ValueError as exc:
            raise forms.ValidationError(str(exc)) from exc

    def clean_field_embedder_key_env(self) -> str:
        name = (self.cleaned_data.get("field_embedder_key_env") or "").strip()
        if not name:
            return ""
        try:
            return check_key_env(name, settings.EMBEDDER_KEY_ENV_ALLOWED)
        except ValueError as exc:
            raise forms.ValidationError(str(exc)) from exc

    def clean_slug(self) -> str:
        slug = self.cleaned_data["slug"]
        if Agent.objects.filter(slug=slug).exists():
            raise forms.ValidationError("An agent with this slug already exists.")
        return slug

    def clean_collection_name(self) -> str:
        name = self.cleaned_data["collection_name"]
        if Agent.objects.filter(collection_name=name).exists():
            raise forms.ValidationError("Another agent already uses this collection.")
        return name

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        data["policy"] = self.clean_policy()
        typed = {
            k: data[f"field_{k}"].strip()
            for k in FIELD_MAP_KEYS
            if data.get(f"field_{k}", "").strip()
        }
        data["field_map"] = typed
        preset = data.get("preset") or "custom"
        if data.get("attach") and preset != "custom" and data.get("collection_name"):
            data["field_map"] = self._preset_field_map(data["collection_name"], preset, typed)
        return data

    def _preset_field_map(
        self, collection: str, preset: str, typed: dict[str, str]
    ) -> dict[str, Any]:
        """The preset's (or detected) field map with the typed keys on top; errors on the form."""
        try:
            report = collection_shape(collection_name=collection, preset=preset)
        except StoreUnavailable as exc:
            self.add_error(None, str(exc))
            return typed
        except ValueError as exc:
            self.add_error("collection_name" if "no collection" in str(exc) else "preset", str(exc))
            return typed
        return {**report.field_map.to_dict(), **typed}

    def service_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``services.agent_create`` (after ``is_valid()``)."""
        d = self.cleaned_data
        return {
            "name": d["name"],
            "slug": d["slug"],
            "collection_name": d["collection_name"],
            "attach": d["attach"],
            "field_map": d["field_map"],
            "policy": d["policy"].to_dict(),
            "embedder": {
                "base_url": d.get("field_embedder_url") or "",
                "model": d.get("field_embedder_model") or "",
                "api_key_env": d.get("field_embedder_key_env") or "",
            },
            "auto_apply": d["auto_apply"] or "off",
            "schedule_cron": d["schedule_cron"],
            "schedule_enabled": d["schedule_enabled"],
            "description": d["description"],
        }


class AgentEditForm(PolicyFieldsMixin, CronMixin):
    """Edit an agent's name, description, policy, auto-apply and schedule."""

    name = forms.CharField(max_length=120)
    description = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}))
    auto_apply = forms.ChoiceField(
        choices=AUTO_APPLY_CHOICES, required=False, initial="off", help_text=AUTO_APPLY_HELP
    )
    archive_days = forms.IntegerField(
        required=False,
        min_value=0,
        max_value=36_500,
        label="Keep archived copies (days)",
        help_text="0 keeps them forever; empty uses the deployment's default. Older copies are "
        "purged daily and passes applied before then can no longer be undone.",
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.order_fields(
            ["name", "description", "auto_apply", "schedule_cron", "schedule_enabled"]
        )

    @classmethod
    def for_agent(cls, agent: Agent, data: Any = None) -> AgentEditForm:
        """Bound to ``data`` when given, else initialised from ``agent``."""
        try:
            policy = agent.get_policy()
        except ValueError:
            policy = Policy()
        initial = {
            "archive_days": agent.archive_days,
            "name": agent.name,
            "description": agent.description,
            "auto_apply": agent.auto_apply,
            "schedule_cron": agent.schedule_cron,
            "schedule_enabled": agent.schedule_enabled,
            **cls.policy_initial(policy),
        }
        return cls(data, initial=initial) if data is not None else cls(initial=initial)

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        data["policy"] = self.clean_policy()
        return data

    def service_kwargs(self) -> dict[str, Any]:
        """Fields for ``services.agent_update`` (after ``is_valid()``)."""
        d = self.cleaned_data
        return {
            "archive_days": d.get("archive_days"),
            "name": d["name"],
            "description": d["description"],
            "auto_apply": d["auto_apply"] or "off",
            "policy": d["policy"].to_dict(),
            "schedule_cron": d["schedule_cron"],
            "schedule_enabled": d["schedule_enabled"],
        }


__all__ = ["POLICY_FIELDS", "AgentCreateForm", "AgentEditForm", "PolicyFieldsMixin"]
