"""Metadata encoding of the Chroma adapter (scheme in ``chroma_store``'s module docstring).

A value Chroma stores faithfully is stored as is; any other JSON value is stored as the string
``"json:" + json.dumps(value)`` and decoded back on read.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from ..records import metadata_key_problem

__all__ = ["JSON_MARKER", "check_text", "decode_metadata", "encode_metadata"]

JSON_MARKER = "json:"
"""Prefix of metadata strings that hold a JSON-encoded value (see module docstring)."""

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


# --------------------------------------------------------------------------------------------
# Metadata encoding
# --------------------------------------------------------------------------------------------


def _check_json_value(value: Any, where: str) -> None:
    """Raise ``ValueError`` unless ``value`` is exactly representable as JSON."""
    if value is None or isinstance(value, bool | int | str):
        if isinstance(value, str):
            check_text(value, where)
        return
    if isinstance(value, float):
        return
    if isinstance(value, list):
        for i, item in enumerate(value):
            _check_json_value(item, f"{where}[{i}]")
        return
    if isinstance(value, dict):
        for k, item in value.items():
            if not isinstance(k, str):
                raise ValueError(f"metadata {where}: dict keys must be strings, got {k!r}")
            check_text(k, where)
            _check_json_value(item, f"{where}[{k!r}]")
        return
    raise ValueError(
        f"metadata {where}: {type(value).__name__} has no exact JSON form "
        "(use str, int, float, bool, None, list or dict)"
    )


def check_text(value: str, where: str) -> None:
    """Raise ``ValueError`` naming ``where`` when ``value`` is not encodable as UTF-8."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(f"metadata {where}: string is not valid Unicode ({exc.reason})") from exc


def _native_scalar(value: Any) -> bool:
    """True when Chroma stores ``value`` faithfully as a scalar (or list item)."""
    if isinstance(value, bool):
        return True
    if isinstance(value, int):
        return _INT64_MIN <= value <= _INT64_MAX
    if isinstance(value, float):
        return math.isfinite(value) and not (value == 0.0 and math.copysign(1.0, value) < 0)
    return isinstance(value, str)


def _native(value: Any) -> bool:
    if isinstance(value, str):
        return not value.startswith(JSON_MARKER)
    if isinstance(value, list):
        if not value or not all(_native_scalar(v) for v in value):
            return False
        kinds = {bool if isinstance(v, bool) else type(v) for v in value}
        return len(kinds) == 1
    return _native_scalar(value)


def _check_key(key: Any) -> str:
    if not isinstance(key, str):
        raise ValueError(f"metadata keys must be strings, got {key!r}")
    problem = metadata_key_problem(key)
    if problem:
        raise ValueError(problem)
    check_text(key, repr(key))
    return key


def encode_metadata(metadata: Mapping[str, Any] | None) -> dict[str, Any]:
    """Encode a record's metadata for Chroma (scheme in the module docstring).

    Returns a new dict (empty for ``None``/``{}``). Raises ``ValueError`` naming the key for a
    reserved or non-string key or a value with no exact JSON form.
    """
    out: dict[str, Any] = {}
    for key, value in (metadata or {}).items():
        _check_key(key)
        _check_json_value(value, repr(key))
        if _native(value):
            out[key] = list(value) if isinstance(value, list) else value
        else:
            out[key] = JSON_MARKER + json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return out


def decode_metadata(metadata: Mapping[str, Any] | None) -> dict[str, Any]:
    """Inverse of :func:`encode_metadata`: ``json:``-marked strings become their values."""
    out: dict[str, Any] = {}
    for key, value in (metadata or {}).items():
        if isinstance(value, str) and value.startswith(JSON_MARKER):
            try:
                out[key] = json.loads(value[len(JSON_MARKER) :])
            except ValueError:  # not ours: keep the foreign string as it is
                out[key] = value
        else:
            out[key] = value
    return out
