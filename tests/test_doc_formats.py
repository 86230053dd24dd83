"""docs/API.md tells an operator what an upload may carry and how an MCP client must start the
stdio server: every metadata key the engine reads is in its table, and the stdio example passes
the Chroma settings (a client starts it without the shell's environment)."""

from __future__ import annotations

import json
import re
from dataclasses import fields
from pathlib import Path

from consolidation import FieldMap

API_DOC = (Path(__file__).resolve().parents[1] / "docs" / "API.md").read_text(encoding="utf-8")


def test_the_upload_table_names_every_metadata_key_the_engine_reads() -> None:
    section = API_DOC.split("## Upload format (JSONL)", 1)[1].split("\n## ", 1)[0]
    keys = set(re.findall(r"`([a-z_]+)`", section))
    read = {
        getattr(FieldMap(), f.name)
        for f in fields(FieldMap)
        if f.name not in ("document", "scope", "text_hash", "text_copies", "merged_from")
        and f.name != "supersedes"
    }
    assert read <= keys, sorted(read - keys)
    assert set(FieldMap().scope) <= keys


def test_the_stdio_mcp_example_passes_the_chroma_settings() -> None:
    blocks = [json.loads(b) for b in re.findall(r"```json\n(.*?)```", API_DOC, re.S)]
    stdio = [
        s
        for b in blocks
        for s in b.get("mcpServers", {}).values()
        if "mcp_server" in s.get("args", [])
    ]
    assert stdio and all({"CHROMA_HOST", "CHROMA_PORT"} <= set(s.get("env", {})) for s in stdio)
