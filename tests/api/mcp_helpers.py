"""Test helpers for the MCP server: the LoCoMo data, a free port, calling tools with the SDK's
own client and reading the structured result or the tool error."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.conftest import free_port, locomo_path

__all__ = ["TOOLS", "error", "free_port", "locomo_file", "result"]

TOOLS = {
    "list_agents",
    "search_memories",
    "memory_consolidate",
    "memory_compact",
    "get_dry_run",
    "list_proposals",
    "get_pass",
    "exclude_operation",
    "resolve_conflict",
    "approve_pass",
    "reject_pass",
    "list_decisions",
    "revoke_decision",
    "forget",
    "approve_forget",
    "reject_forget",
}


def locomo_file() -> Path:
    """The LoCoMo subset; a failure (not a skip) when it is missing and ``CI`` is set."""
    return locomo_path().resolve()


def result(call: Any) -> Any:
    """The structured content of a successful tool call (lists come as ``{"result": [...]}``)."""
    assert not call.is_error, call.content[0].text
    data = call.structured_content
    return data["result"] if set(data) == {"result"} else data


def error(call: Any) -> str:
    """The message of a tool error (the call must have failed)."""
    assert call.is_error, call.structured_content
    return call.content[0].text
