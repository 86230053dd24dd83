"""Display filters for the console. Presentation only: no queries, no logic beyond formatting."""

from __future__ import annotations

import math
import re
from typing import Any

from django import template

from memoryadmin.core.selectors import operator_zone, request_zone
from memoryadmin.proposals.selectors.passes import pass_kind_rows

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
def usd(value: Any) -> str:
    """US dollars for a cost: cents from $0.01 up (``1.234`` → ``"$1.23"``), below that three
    significant digits (``0.000123`` → ``"$0.000123"``); "no price" when unknown."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return "no price"
    if value == 0 or abs(value) >= 0.01:
        return f"${value:.2f}"
    return f"${value:.3g}" if abs(value) >= 1e-4 else f"${value:.6f}".rstrip("0")


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
    "no_changes": "no changes",
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


SCORE_LABELS: dict[str, tuple[str, str]] = {
    # key: (label, format) — format "cos" 3 decimals, "pct" percent, "days", "num", "words"
    "min_cosine": ("lowest pairwise cosine", "cos"),
    "mean_cosine": ("mean cosine", "cos"),
    "cosine": ("cosine", "cos"),
    "confidence": ("confidence", "cos"),
    "score": ("decayed importance", "cos"),
    "age_days": ("age", "days"),
    "coverage": ("content words kept elsewhere", "pct"),
    "importance": ("importance", "num"),
    "sessions": ("sessions", "num"),
    "access_count": ("accesses", "num"),
    "rules": ("rules", "words"),
    "promote_rules": ("promotion rules", "words"),
    "promoted": ("merged memory promoted", "words"),
    "newer_created_at": ("newer memory created", "words"),
    "sources": ("sources", "num"),
}
"""Operation scores (``Operation.scores``) as labelled fields; other keys get their name in
words."""

SCORE_HIDDEN = {"pairwise", "rule", "conflict", "decision"}
"""Scores shown elsewhere: the pairwise matrix as a table, the rule as the operation's badge."""

METADATA_LABELS: dict[str, str] = {
    "created_at": "created",
    "updated_at": "updated",
    "last_accessed_at": "last accessed",
    "access_count": "accesses",
    "merged_from": "merged from",
    "dia_id": "dialog turn",
}
"""Metadata keys whose label is not just the key in words."""


def _display(value: Any, fmt: str = "") -> str:
    if (
        isinstance(value, bool)
        or value is None
        or isinstance(value, list | tuple | set | frozenset)
    ):
        return human(value)
    if isinstance(value, dict):
        return "; ".join(f"{label(k)}: {_display(v)}" for k, v in value.items()) or "—"
    if isinstance(value, int | float) and math.isfinite(value):
        if fmt == "cos":
            return f"{value:.3f}"
        if fmt == "pct":
            return pct(value)
        if fmt == "days":
            return f"{value:.1f} days"
        return f"{value:g}" if isinstance(value, float) else str(value)
    return str(value)


@register.filter
def score_fields(scores: Any) -> list[tuple[str, str]]:
    """An operation's ``scores`` dict as ``[(label, value text)]`` in a stable order: known keys
    first (cosines with 3 decimals, ages in days, coverage in %), then the others by name."""
    if not isinstance(scores, dict):
        return []
    known = [k for k in SCORE_LABELS if k in scores]
    other = sorted(k for k in scores if k not in SCORE_LABELS and k not in SCORE_HIDDEN)
    out = [(SCORE_LABELS[k][0], _display(scores[k], SCORE_LABELS[k][1])) for k in known]
    return out + [(label(k), _display(scores[k])) for k in other]


@register.filter
def metadata_fields(metadata: Any) -> list[tuple[str, str]]:
    """A memory's metadata dict as ``[(label, value text)]`` sorted by key: booleans as yes/no,
    lists comma-separated, nested objects as "key: value" pairs, an ISO 8601 time under a key
    ending in ``_at`` to the second in UTC ("2026-03-01 09:30:00 UTC", no microseconds)."""
    if not isinstance(metadata, dict):
        return []
    return [
        (
            METADATA_LABELS.get(k, label(k)),
            (k.endswith("_at") and _when(metadata[k])) or _display(metadata[k]),
        )
        for k in sorted(metadata)
    ]


def _when(value: Any) -> str:
    """An ISO 8601 time string as "YYYY-MM-DD HH:MM:SS UTC"; ``""`` for anything else."""
    if not isinstance(value, str) or not _ISO_TIME.match(value):
        return ""
    from consolidation.records import parse_timestamp

    when = parse_timestamp(value)
    return when.strftime("%Y-%m-%d %H:%M:%S UTC") if when is not None else ""


_ISO_TIME = re.compile(r"^\d{4}-\d\d-\d\d[T ]\d\d:\d\d")


@register.simple_tag(takes_context=True)
def operator_tz(context: template.Context) -> Any:
    """The operator's time zone (``?tz=``, the ``tz`` cookie set by app.js, else the server's).

    Used as ``{% operator_tz as optz %}{% timezone optz %}…{% endtimezone %}``.
    """
    request = context.get("request")
    if request is None:
        return operator_zone(None)
    return request_zone(request)


@register.filter
def key_list(value: Any) -> str:
    """Metadata keys as written: a list comma-separated (``user_id, run_id``), else the string;
    an empty value is "(the document)" because only the text key may be empty."""
    if isinstance(value, list | tuple):
        return ", ".join(str(v) for v in value) or "none"
    return str(value) if value not in (None, "") else "(the document)"


@register.simple_tag
def max_upload_mb() -> int:
    """The upload size cap in MB (``MEMORYADMIN_MAX_UPLOAD_MB``), for the upload form's help."""
    from django.conf import settings

    return settings.MEMORYADMIN_MAX_UPLOAD_BYTES // 2**20


@register.filter
def query_without(query: Any, key: str) -> str:
    """A ``QueryDict`` (``request.GET``) urlencoded without ``key`` (``"q=x&page=2"`` with
    ``key="page"`` → ``"q=x"``), for links that set ``key`` themselves (``_pager.html``)."""
    params = query.copy()
    params.pop(key, None)
    return params.urlencode()


@register.filter
def as_query(mapping: Any, first: str = "") -> str:
    """A mapping as a query string (``{"q": "a b"}`` → ``"q=a+b"``), after ``first`` (an
    already encoded ``"k=v"``) when given; for ``_pager.html``'s ``params``."""
    from urllib.parse import urlencode

    rest = urlencode([(str(k), str(v)) for k, v in dict(mapping or {}).items()])
    return "&".join(part for part in (first, rest) if part)


@register.simple_tag
def kind_rows(run: Any, ev: Any) -> list[dict[str, Any]]:
    """:func:`~memoryadmin.proposals.selectors.passes.pass_kind_rows` of ``run`` and its summary
    ``ev``: ``{% kind_rows run ev as rows %}`` (the pass summary and, out of band, the groups'
    headers)."""
    return pass_kind_rows(run, ev)
