"""Roles as groups with permissions: viewer (reads), reviewer (+ proposals), admin (+ agents,
memories).

Login is required everywhere, so a viewer needs no permission to read. ``ensure_roles`` is
idempotent (``manage.py setup_roles``).
"""

from __future__ import annotations

from typing import Any

from memoryadmin.core.errors import NotAllowed

__all__ = [
    "ROLE_PERMISSIONS",
    "ROLES",
    "can_edit_memories",
    "can_manage",
    "can_review",
    "ensure_roles",
    "has_role",
    "require",
]

REVIEW = "console.review_pass"
MANAGE = "console.manage_agents"
EDIT_MEMORIES = "console.edit_memories"

ROLES = ("viewer", "reviewer", "admin")
ROLE_PERMISSIONS: dict[str, tuple[str, ...]] = {
    "viewer": (),
    "reviewer": (REVIEW,),
    "admin": (REVIEW, MANAGE, EDIT_MEMORIES),
}
"""Group name → permissions (``app_label.codename``) it holds, exactly."""


def ensure_roles() -> dict[str, int]:
    """Create the three groups and set their permissions exactly; returns group → permission
    count."""
    from django.contrib.auth.models import Group, Permission

    out = {}
    for role, perms in ROLE_PERMISSIONS.items():
        group, _ = Group.objects.get_or_create(name=role)
        objs = []
        for perm in perms:
            app_label, codename = perm.split(".", 1)
            objs.append(
                Permission.objects.get(content_type__app_label=app_label, codename=codename)
            )
        group.permissions.set(objs)
        out[role] = len(objs)
    return out


def has_role(user: Any) -> bool:
    """True when ``user`` is signed in (or a token's user) and holds a role: one of the
    :data:`ROLES` groups, or a superuser. The viewer role is the least that reads the
    console's figures outside the pages (``/metrics`` by token); an account nobody gave a
    role reads nothing there."""
    if not (user and user.is_authenticated and user.is_active):
        return False
    return bool(user.is_superuser or user.groups.filter(name__in=ROLES).exists())


def can_review(user: Any) -> bool:
    """True when ``user`` may approve, reject, exclude and edit proposals (reviewer, admin)."""
    return bool(user and user.is_authenticated and user.has_perm(REVIEW))


def can_manage(user: Any) -> bool:
    """True when ``user`` may create and edit agents, policies and schedules (admin)."""
    return bool(user and user.is_authenticated and user.has_perm(MANAGE))


def can_edit_memories(user: Any) -> bool:
    """True when ``user`` may pin, edit and delete single memories (admin)."""
    return bool(user and user.is_authenticated and user.has_perm(EDIT_MEMORIES))


_MAY = {REVIEW: "reviewers and admins", MANAGE: "admins", EDIT_MEMORIES: "admins"}


def require(user: Any, perm: str, what: str) -> None:
    """Refuse ``what`` (a phrase: "approve pass #12") unless ``user`` holds ``perm`` (one of
    :data:`REVIEW`, :data:`MANAGE`, :data:`EDIT_MEMORIES`). The one role check of every write
    service, so a page, the API and MCP refuse with the same sentence.

    ``user`` ``None`` or anonymous is the shell or the system (management commands, the worker,
    the schedule), which the role model does not restrict. Raises
    :class:`~memoryadmin.core.errors.NotAllowed`."""
    if user is None or not getattr(user, "is_authenticated", False) or user.has_perm(perm):
        return
    groups = ", ".join(sorted(g.name for g in user.groups.all())) or "no role"
    raise NotAllowed(f"{user.get_username()} ({groups}) may not {what}: only {_MAY[perm]} may.")
