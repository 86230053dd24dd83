"""The LLM judge's reply, validated: a verdict the planner may use, or an error (= unsure)."""

from __future__ import annotations

from dataclasses import dataclass

from ..distill.replies import decode_json
from ..protocols import LLMOutputError

__all__ = ["KEEPS", "MAX_WHY_CHARS", "VERDICTS", "ModelVerdict", "parse_verdict"]

VERDICTS = ("same", "supersedes", "conflict", "distinct")
KEEPS = ("a", "b", "both")
MAX_WHY_CHARS = 500
"""Longest accepted explanation (characters): it is shown to a reviewer, nothing more."""


@dataclass(frozen=True)
class ModelVerdict:
    """A validated answer: ``verdict`` in :data:`VERDICTS`, ``keep`` in :data:`KEEPS` (``"a"``
    or ``"b"`` for same/supersedes, ``"both"`` for conflict/distinct), ``why`` (1..500 chars)."""

    verdict: str
    keep: str
    why: str

    def to_dict(self) -> dict[str, str]:
        """``{"verdict", "keep", "why"}`` (what the cache stores)."""
        return {"verdict": self.verdict, "keep": self.keep, "why": self.why}


def _bad(msg: str, content: str) -> LLMOutputError:
    return LLMOutputError(
        f"LLM judge reply does not match the verdict schema: {msg}",
        excerpt=content,
        reason="schema",
    )


def parse_verdict(content: str) -> ModelVerdict:
    """Validate ``{"verdict": "same|supersedes|conflict|distinct", "keep": "a|b|both", "why":
    "…"}`` (extra keys ignored, surrounding prose or a code fence tolerated).

    The two fields must agree: ``same`` and ``supersedes`` name the memory to keep (``"a"`` or
    ``"b"``), ``conflict`` and ``distinct`` keep ``"both"``; ``why`` is a non-empty string of
    at most :data:`MAX_WHY_CHARS` that is not the prompt's ``<placeholder>``. Anything else
    raises :class:`LLMOutputError` (``reason`` ``"empty"``, ``"not_json"``, ``"echoed_input"``
    or ``"schema"``), which the judge treats as unsure: the pair stays a conflict item.
    """
    if not isinstance(content, str) or not content.strip():
        raise LLMOutputError("LLM judge reply is empty", excerpt=str(content or ""), reason="empty")
    data = decode_json(content, "LLM judge reply", echo_keys=("a", "b"))
    if not isinstance(data, dict):
        raise _bad(f"expected a JSON object, got {type(data).__name__}", content)
    if "verdict" not in data and ("a" in data or "b" in data):
        raise LLMOutputError(
            "LLM judge reply repeats the quoted input instead of answering",
            excerpt=content,
            reason="echoed_input",
        )
    verdict, keep, why = data.get("verdict"), data.get("keep"), data.get("why")
    if verdict not in VERDICTS:
        raise _bad(f'"verdict" must be one of {", ".join(VERDICTS)}, got {verdict!r}', content)
    if keep not in KEEPS:
        raise _bad(f'"keep" must be one of a, b, both, got {keep!r}', content)
    if (verdict in ("same", "supersedes")) != (keep in ("a", "b")):
        want = '"a" or "b"' if verdict in ("same", "supersedes") else '"both"'
        raise _bad(f'"{verdict}" must keep {want}, got {keep!r}', content)
    if not isinstance(why, str) or not why.strip():
        raise _bad('"why" must be a non-empty string', content)
    why = why.strip()
    if why.startswith("<") and why.endswith(">"):
        # "<one sentence>": the prompt's placeholder copied, seen with Gemma 3 270M on
        # llama.cpp — a model that did not explain itself did not judge the pair either.
        raise _bad(f'"why" repeats the prompt\'s placeholder {why!r}', content)
    if len(why) > MAX_WHY_CHARS:
        raise _bad(f'"why" has {len(why)} characters, more than {MAX_WHY_CHARS}', content)
    return ModelVerdict(verdict, keep, why)
