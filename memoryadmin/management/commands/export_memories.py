"""``manage.py export_memories AGENT PATH.jsonl``: the agent's store → JSONL (with embeddings)."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand

from memoryadmin.core.errors import ServiceError
from memoryadmin.management.commands._cli import bad_input, failed, get_agent
from memoryadmin.memories.selectors.transfer import memories_export_jsonl


class Command(BaseCommand):
    help = (
        "Export every memory of an agent as JSONL (id, document, metadata, embedding); "
        "'-' is stdout."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("agent", help="agent slug")
        parser.add_argument("path", help="output file, or - for stdout")
        parser.add_argument("--no-embeddings", action="store_true")

    def handle(self, *args: Any, **opts: Any) -> None:
        agent = get_agent(opts["agent"])
        include = not opts["no_embeddings"]
        try:
            if opts["path"] == "-":
                n = memories_export_jsonl(
                    agent=agent, fileobj=sys.stdout, include_embeddings=include
                )
                return
            path = Path(opts["path"])
            if not path.parent.is_dir():
                raise bad_input(f"No such directory: {path.parent}")
            # Write to a temporary file and rename, so a failed export never leaves half a file.
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as fh:
                    n = memories_export_jsonl(agent=agent, fileobj=fh, include_embeddings=include)
                os.replace(tmp, path)
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
        except ServiceError as exc:
            raise failed(str(exc)) from None
        self.stdout.write(f"{agent.slug}: {n:,} memories exported to {path}")
