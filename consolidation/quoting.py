"""Memory text as quoted data (docs/ARCHITECTURE.md, I-7): JSON that cannot leave its block.

Every LLM request the engine makes (distillation, the LLM judge) sends memories only inside one
``<memories>…</memories>`` block of the user message, as JSON whose text cannot contain ``<``,
``>`` or ``&``: a memory can never write ``</memories>`` and step out of the data.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["quoted_json", "unquote_block"]


def quoted_json(value: Any) -> str:
    """JSON of ``value`` (indented, non-ASCII kept) with ``<``, ``>`` and ``&`` escaped as
    ``\\u003c``/``\\u003e``/``\\u0026``; it decodes to exactly ``value``."""
    text = json.dumps(value, ensure_ascii=False, indent=1)
    return text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")


def unquote_block(message: str, prefix: str, suffix: str) -> Any:
    """The decoded JSON of ``message`` framed as ``prefix + quoted_json(…) + suffix``.

    Raises ``ValueError`` when the frame does not match. Used by tests and debugging tools to
    prove memory text travelled only as data."""
    if not (message.startswith(prefix) and message.endswith(suffix)):
        raise ValueError("not a quoted-data message of this kind")
    return json.loads(message[len(prefix) : len(message) - len(suffix)])
