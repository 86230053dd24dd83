"""Agent services: create, update, delete (each audited; the schedule is kept in sync)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils.text import slugify

from consolidation import FieldMap, Policy
from memoryadmin.agents.models import Agent
from memoryadmin.agents.services.schedules import schedule_sync
from memoryadmin.core import stores
from memoryadmin.core.errors import ServiceError
from memoryadmin.core.services import actor_name, audit
from memoryadmin.core.validation import (
    validate_auto_apply,
    validate_cron,
    validate_field_map,
    validate_policy,
)
from memoryadmin.notifications.services.notifications import subscriptions_for_new_agent
from memoryadmin.proposals.models import Pass

__all__ = ["agent_create", "agent_delete", "agent_update", "field_changes"]

_AGENT_FIELDS = {
    "archive_days",
    "name",
    "slug",
    "description",
    "field_map",
    "policy",
    "auto_apply",
    "schedule_cron",
    "schedule_enabled",
    "embedder",
}
_EMBEDDER_KEYS = {"base_url", "model", "api_key_env", "own_vectors"}


def validate_archive_days(value: Any) -> int | None:
    """``Agent.archive_days`` as stored: ``None`` (the deployment's default) or a whole number
    of days in [0, 36500] (0: forever). Raises ``ValueError`` otherwise."""
    if value is None or value == "":
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 36_500:
        raise ValueError(
            f"Keep archived copies must be a whole number of days from 0 to 36500, got {value!r}."
        )
    return value


def validate_embedder(embedder: Mapping[str, Any] | None) -> dict[str, Any]:
    """The agent's ``embedder`` setting as stored (blank values dropped).

    ``{"base_url", "model", "api_key_env", "own_vectors"}``: an OpenAI-compatible endpoint of the
    attached collection's own model (URL and model together; the key stays in the environment
    variable named, one ``settings.EMBEDDER_KEY_ENV_ALLOWED`` allows and never a service
    secret; the URL http(s) on a host ``settings.ENDPOINT_HOSTS_ALLOWED`` allows) and/or
    ``own_vectors`` (bool). Raises ``ValueError`` for unknown keys, a half-filled endpoint, a bad
    URL or key variable. Does no network I/O.
    """
    from consolidation.adapters.remote_embedder import endpoint_embedder_from_config

    data = {k: v for k, v in dict(embedder or {}).items() if v not in (None, "")}
    unknown = set(data) - _EMBEDDER_KEYS
    if unknown:
        raise ValueError(f"Unknown embedder settings: {', '.join(sorted(unknown))}.")
    if "own_vectors" in data and not isinstance(data["own_vectors"], bool):
        raise ValueError("own_vectors must be true or false.")
    for key in ("base_url", "model", "api_key_env"):
        if key in data:
            data[key] = str(data[key]).strip()
    endpoint_embedder_from_config(  # raises ValueError when invalid
        data,
        {},
        allowed_key_env=settings.EMBEDDER_KEY_ENV_ALLOWED,
        allowed_hosts=settings.ENDPOINT_HOSTS_ALLOWED,
    )
    return data


@transaction.atomic
def agent_create(
    *,
    name: str,
    slug: str,
    collection_name: str,
    attach: bool = False,
    field_map: FieldMap | Mapping[str, Any] | None = None,
    policy: Policy | Mapping[str, Any] | None = None,
    auto_apply: str | bool = "off",
    schedule_cron: str = "0 3 * * *",
    schedule_enabled: bool = True,
    description: str = "",
    embedder: Mapping[str, Any] | None = None,
    user: Any = None,
) -> Agent:
    """Create an agent, its collection (or attach an existing one) and its schedule.

    ``embedder``: the attached collection's own embedder (:func:`validate_embedder`).
    Raises ``ValueError`` for a blank name, a bad slug, a collection name Chroma refuses, an
    invalid policy/field map/cron/embedder, a slug or collection already used by an agent,
    attaching a collection that does not exist or creating one that does;
    :class:`StoreUnavailable` when Chroma is down. Nothing is written on error.
    """
    name = (name or "").strip()
    if not name:
        raise ValueError("An agent needs a name.")
    slug = (slug or "").strip()
    if not slug or slugify(slug) != slug:
        raise ValueError(f"The slug must be lowercase letters, digits and hyphens (got {slug!r}).")
    collection_name = stores.validate_collection_name(collection_name)
    policy_d = validate_policy(policy)
    fm_d = validate_field_map(field_map)
    embedder_d = validate_embedder(embedder)
    cron = validate_cron(schedule_cron)
    if Agent.objects.filter(slug=slug).exists():
        raise ValueError(f"An agent with the slug {slug!r} already exists.")
    if Agent.objects.filter(collection_name=collection_name).exists():
        raise ValueError(f"Collection {collection_name!r} already belongs to an agent.")
    exists = stores.collection_exists(collection_name)
    if attach and not exists:
        raise ValueError(f"There is no collection named {collection_name!r} to attach.")
    if not attach and exists:
        raise ValueError(
            f"A collection named {collection_name!r} already exists; attach it instead."
        )
    agent = Agent.objects.create(
        name=name,
        slug=slug,
        description=description or "",
        collection_name=collection_name,
        attached=bool(attach),
        field_map=fm_d,
        policy=policy_d,
        auto_apply=validate_auto_apply(auto_apply),
        schedule_cron=cron,
        schedule_enabled=bool(schedule_enabled),
        embedder=embedder_d,
    )
    audit(
        actor=actor_name(user, "cli"),
        verb="agent_created",
        agent=agent,
        user=user,
        data={"collection": collection_name, "attached": bool(attach)},
    )
    schedule_sync(agent=agent)
    subscriptions_for_new_agent(agent=agent)  # when the admin's notification defaults say so
    if not attach:
        stores.create_collection(collection_name)
    return agent


def field_changes(before: Mapping[str, Any], after: Mapping[str, Any]) -> dict[str, list[Any]]:
    """Each changed setting with its old and new value, ``{"auto_apply": ["safe", "all"]}``; a
    mapping field (policy, field map, embedder) per key that changed, ``"policy.prune"``, so a
    one-threshold edit does not record the whole policy twice. Keys sorted; a key absent on one
    side is ``None`` there."""
    out: dict[str, list[Any]] = {}
    for field in sorted(after):
        old, new = before.get(field), after[field]
        if isinstance(old, Mapping) and isinstance(new, Mapping):
            for key in sorted(set(old) | set(new)):
                if old.get(key) != new.get(key):
                    out[f"{field}.{key}"] = [old.get(key), new.get(key)]
        else:
            out[field] = [old, new]
    return out


@transaction.atomic
def agent_update(*, agent: Agent, user: Any = None, **fields: Any) -> Agent:
    """Change an agent's name, slug, description, field map, policy, auto-apply or schedule.

    Validates like :func:`agent_create` (``ValueError``; unknown fields and a collection change
    are refused) and re-syncs the django-q2 schedule. Audited (``agent_updated``) with the
    changed fields and each one's old and new value (:func:`field_changes`, ``data["fields"]``).
    """
    unknown = set(fields) - _AGENT_FIELDS
    if unknown:
        raise ValueError(f"Cannot change {', '.join(sorted(unknown))} of an agent here.")
    agent = Agent.objects.select_for_update().get(pk=agent.pk)
    old_schedule_name = agent.schedule_name
    clean: dict[str, Any] = {}
    for key, value in fields.items():
        if key == "name":
            value = (value or "").strip()
            if not value:
                raise ValueError("An agent needs a name.")
        elif key == "slug":
            value = (value or "").strip()
            if not value or slugify(value) != value:
                raise ValueError(
                    f"The slug must be lowercase letters, digits and hyphens (got {value!r})."
                )
            if Agent.objects.filter(slug=value).exclude(pk=agent.pk).exists():
                raise ValueError(f"An agent with the slug {value!r} already exists.")
        elif key == "policy":
            value = validate_policy(value)
        elif key == "field_map":
            value = validate_field_map(value)
        elif key == "embedder":
            value = validate_embedder(value)
        elif key == "schedule_cron":
            value = validate_cron(value)
        elif key == "auto_apply":
            value = validate_auto_apply(value)
        elif key == "schedule_enabled":
            value = bool(value)
        elif key == "description":
            value = value or ""
        elif key == "archive_days":
            value = validate_archive_days(value)
        clean[key] = value
    changed = {k: v for k, v in clean.items() if getattr(agent, k) != v}
    before = {k: getattr(agent, k) for k in changed}
    for key, value in changed.items():
        setattr(agent, key, value)
    agent.save()
    if changed:
        audit(
            actor=actor_name(user, "cli"),
            verb="agent_updated",
            agent=agent,
            user=user,
            data={"changed": sorted(changed), "fields": field_changes(before, changed)},
        )
    if agent.schedule_name != old_schedule_name:
        from django_q.models import Schedule

        Schedule.objects.filter(name=old_schedule_name).delete()
    schedule_sync(agent=agent)
    return agent


@transaction.atomic
def agent_delete(*, agent: Agent, user: Any = None) -> None:
    """Delete an agent and its schedule; its Chroma collection is kept (data is never dropped).

    Refuses (:class:`ServiceError`) while a pass of the agent is active.
    """
    from django_q.models import Schedule

    agent = Agent.objects.select_for_update().get(pk=agent.pk)
    active = agent.passes.filter(status__in=Pass.ACTIVE).first()
    if active is not None:
        raise ServiceError(
            f"Pass #{active.pk} of {agent.name} is {active.status}; wait for it to finish."
        )
    Schedule.objects.filter(name=agent.schedule_name).delete()
    audit(
        actor=actor_name(user, "cli"),
        verb="agent_deleted",
        agent=agent,
        user=user,
        data={"slug": agent.slug, "collection": agent.collection_name},
    )
    agent.delete()
