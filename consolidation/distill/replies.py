"""Distillation reply parsing: a model's answer validated against the facts schema."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from ..protocols import LLMOutputError

MAX_FACT_CHARS = 500
"""Longest accepted fact text, in characters (after stripping whitespace)."""

MAX_FACTS_PER_REPLY = 50
"""More facts than this in one reply is treated as a schema violation (a runaway model)."""


@dataclass(frozen=True)
class Fact:
    """One validated fact: ``text`` (1..500 chars), ``evidence`` ids (non-empty, unique, all
    among the ids sent) and ``confidence`` in [0, 1]."""

    text: str
    evidence: tuple[str, ...]
    confidence: float


def facts_schema(ids: Collection[str], max_facts: int = MAX_FACTS_PER_REPLY) -> dict[str, Any]:
    """The JSON Schema of a reply for a group with these memory ``ids``, sent as the request's
    ``response_format``: where the server turns it into a grammar (llama.cpp), the model can
    only write ``{"facts": [...]}`` and cite ids that were sent — it cannot echo the input.
    Strict-mode shaped (every property required, no others). :func:`parse_facts` still
    validates the reply, since not every server honours the schema."""
    return {
        "type": "object",
        "properties": {
            "facts": {
                "type": "array",
                "maxItems": max_facts,
                "items": {
                    "type": "object",
                    "properties": {
                        "text": {"type": "string"},
                        "evidence": {
                            "type": "array",
                            "items": {"type": "string", "enum": sorted(set(ids))},
                        },
                        "confidence": {"type": "number"},
                    },
                    "required": ["text", "evidence", "confidence"],
                    "additionalProperties": False,
                },
            }
        },
        "required": ["facts"],
        "additionalProperties": False,
    }


_FENCE = re.compile(r"^```[a-zA-Z]*\s*\n?(.*?)\n?```$", re.DOTALL)


def decode_json(
    content: str, what: str = "LLM output", echo_keys: tuple[str, ...] = ("session", "memories")
) -> Any:
    """JSON value from a reply; tolerates a Markdown code fence or prose around one object,
    since ``response_format`` is not honoured by every endpoint. Raises
    :class:`LLMOutputError` (``reason="not_json"``, or ``"echoed_input"`` when the text starts
    like the quoted data — an object whose first key is one of ``echo_keys`` —: a small model
    repeating its input until the token limit)."""
    text = content.strip()
    m = _FENCE.match(text)
    if m:
        text = m.group(1).strip()
    try:
        return json.loads(text)
    except ValueError as first:
        start, end = text.find("{"), text.rfind("}")
        if 0 <= start < end:
            try:
                return json.loads(text[start : end + 1])
            except ValueError:
                pass
        keys = "|".join(re.escape(k) for k in echo_keys)
        if re.match(rf'^\s*\{{\s*"({keys})"\s*:', text):
            raise LLMOutputError(
                f"{what} repeats the quoted input instead of answering",
                excerpt=content,
                reason="echoed_input",
            ) from None
        raise LLMOutputError(
            f"{what} is not valid JSON: {first}", excerpt=content, reason="not_json"
        ) from None


def _bad(msg: str, content: str) -> LLMOutputError:
    return LLMOutputError(
        f"LLM output does not match the facts schema: {msg}", excerpt=content, reason="schema"
    )


def parse_facts(
    content: str,
    allowed_ids: Collection[str],
    *,
    max_facts: int = MAX_FACTS_PER_REPLY,
) -> tuple[list[Fact], int]:
    """Validate a reply against ``{"facts": [{"text", "evidence", "confidence"}]}``.

    Schema: a JSON object with key ``facts`` (a list of at most ``max_facts`` objects); each fact
    has ``text`` (string, 1..500 chars after stripping), ``evidence`` (non-empty list of
    strings; duplicates removed, order kept) and ``confidence`` (a number, not a bool, in
    [0, 1]). Extra keys are ignored. Any violation raises :class:`LLMOutputError` naming the
    first problem (e.g. ``facts[0].evidence must be a non-empty list of ids``) — the whole reply
    is rejected, so a partially valid reply yields nothing.

    Facts citing any id not in ``allowed_ids`` are dropped (a model inventing sources is not
    evidence). Returns ``(facts, dropped_unknown_evidence)``. The error's ``reason`` is
    ``"empty"``, ``"not_json"``, ``"echoed_input"`` (the reply is the quoted data, or starts
    like it) or ``"schema"``.
    """
    if not isinstance(content, str) or not content.strip():
        raise LLMOutputError("LLM output is empty", excerpt=str(content or ""), reason="empty")
    data = decode_json(content)
    if not isinstance(data, dict):
        raise _bad(f"expected a JSON object, got {type(data).__name__}", content)
    if "facts" not in data and ("memories" in data or "session" in data):
        raise LLMOutputError(
            "LLM output repeats the quoted input instead of answering",
            excerpt=content,
            reason="echoed_input",
        )
    if "facts" not in data:
        raise _bad('missing key "facts"', content)
    raw = data["facts"]
    if not isinstance(raw, list):
        raise _bad(f'"facts" must be a list, got {type(raw).__name__}', content)
    if len(raw) > max_facts:
        raise _bad(f'"facts" has {len(raw)} items, more than the limit of {max_facts}', content)
    allowed = set(allowed_ids)
    facts: list[Fact] = []
    dropped = 0
    for i, item in enumerate(raw):
        where = f"facts[{i}]"
        if not isinstance(item, dict):
            raise _bad(f"{where} must be an object, got {type(item).__name__}", content)
        text = item.get("text")
        if not isinstance(text, str) or not text.strip():
            raise _bad(f"{where}.text must be a non-empty string", content)
        text = text.strip()
        if len(text) > MAX_FACT_CHARS:
            raise _bad(
                f"{where}.text has {len(text)} characters, more than {MAX_FACT_CHARS}", content
            )
        evidence = item.get("evidence")
        if (
            not isinstance(evidence, list)
            or not evidence
            or not all(isinstance(e, str) and e for e in evidence)
        ):
            raise _bad(f"{where}.evidence must be a non-empty list of ids (strings)", content)
        conf = item.get("confidence")
        if (
            isinstance(conf, bool)
            or not isinstance(conf, int | float)
            or not math.isfinite(conf)
            or not 0.0 <= conf <= 1.0
        ):
            raise _bad(f"{where}.confidence must be a number in [0, 1], got {conf!r}", content)
        ev = tuple(dict.fromkeys(evidence))
        if not set(ev) <= allowed:
            dropped += 1
            continue
        facts.append(Fact(text=text, evidence=ev, confidence=float(conf)))
    return facts, dropped
