"""Test helpers for the MCP server: the LoCoMo data, a free port, calling tools with the SDK's
own client and reading the structured result or the tool error."""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Any

import pytest

LOCOMO7 = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "locomo" / "locomo7.json"
TOOLS = {
    "list_agents",
    "search_memories",
    "memory_consolidate",
    "memory_compact",
    "list_proposals",
    "get_pass",
    "approve_pass",
    "reject_pass",
}


def locomo_file() -> Path:
    """The LoCoMo subset; a failure (not a skip) when it is missing and ``CI`` is set."""
    if not LOCOMO7.exists():
        if os.environ.get("CI"):
            pytest.fail(f"LoCoMo data missing at {LOCOMO7} (required when CI is set)")
        pytest.skip("LoCoMo data not available")
    return LOCOMO7.resolve()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def result(call: Any) -> Any:
    """The structured content of a successful tool call (lists come as ``{"result": [...]}``)."""
    assert not call.is_error, call.content[0].text
    data = call.structured_content
    return data["result"] if set(data) == {"result"} else data


def error(call: Any) -> str:
    """The message of a tool error (the call must have failed)."""
    assert call.is_error, call.structured_content
    return call.content[0].text
