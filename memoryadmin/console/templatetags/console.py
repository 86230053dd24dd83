"""Display filters for the console. Presentation only: no queries, no logic beyond formatting."""

from __future__ import annotations

import json
import math
from typing import Any

from django import template

register = template.Library()


@register.filter
def pct(value: Any, digits: int = 1) -> str:
    """A fraction in [0, 1] as a percentage string (``0.125`` → ``"12.5%"``); "—" when unknown."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        return "—"
    if not math.isfinite(v):
        return "—"
    return f"{v * 100:.{int(digits)}f}%"


@register.filter
def bar_width(value: Any) -> str:
    """CSS width for a fraction in [0, 1], clamped (``0.3`` → ``"30.0%"``)."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        return "0%"
    if not math.isfinite(v):
        return "0%"
    return f"{max(0.0, min(1.0, v)) * 100:.1f}%"


@register.filter
def cosine(value: Any) -> str:
    """A cosine similarity with 3 decimals; "—" when not a number."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return "—"
    return f"{value:.3f}"


@register.filter
def as_json(value: Any) -> str:
    """Pretty JSON text of ``value`` (autoescaped by the template like any string)."""
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str)


@register.filter
def get_item(mapping: Any, key: Any) -> Any:
    """``mapping[key]`` or ``None``."""
    try:
        return mapping[key]
    except (KeyError, IndexError, TypeError):
        return None


@register.filter
def label(value: Any) -> str:
    """A machine name for humans: ``"rejected_by_guard"`` → ``"rejected by guard"``."""
    return str(value or "").replace("_", " ")


STATUS_WORDS: dict[str, str] = {
    "rejected_by_guard": "rejected by guard",
    "partially_applied": "partially applied",
    "rolled_back": "rolled back",
    "rolling_back": "rolling back",
}
"""Pass and operation statuses as an operator says them."""


@register.filter
def status_words(value: Any) -> str:
    """A pass/operation status in human words: ``"rolled_back"`` → ``"rolled back"``,
    other names lose their underscores too."""
    return STATUS_WORDS.get(str(value or ""), label(value))


@register.filter
def human(value: Any) -> str:
    """A policy value for humans: lists as comma-separated words, booleans as yes/no,
    ``None`` as "—", anything else as its string."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if value is None:
        return "—"
    if isinstance(value, list | tuple | set | frozenset):
        return ", ".join(label(v) for v in value) or "none"
    return str(value)


@register.simple_tag(takes_context=True)
def operator_tz(context: template.Context) -> Any:
    """The operator's time zone (``?tz=``, the ``tz`` cookie set by app.js, else the server's).

    Used as ``{% operator_tz as optz %}{% timezone optz %}…{% endtimezone %}``.
    """
    from ..views.common import request_zone

    request = context.get("request")
    if request is None:
        from ..selectors import operator_zone

        return operator_zone(None)
    return request_zone(request)


@register.filter
def query_without(query: Any, key: str) -> str:
    """A ``QueryDict`` (``request.GET``) urlencoded without ``key`` (``"q=x&page=2"`` with
    ``key="page"`` → ``"q=x"``), for links that set ``key`` themselves (``_pager.html``)."""
    params = query.copy()
    params.pop(key, None)
    return params.urlencode()
