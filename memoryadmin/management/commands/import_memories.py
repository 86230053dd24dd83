"""``manage.py import_memories AGENT PATH.jsonl [--skip-invalid]``: JSONL → the agent's store."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand

from memoryadmin.core.errors import ServiceError
from memoryadmin.management.commands._cli import (
    bad_input,
    failed,
    get_agent,
    is_terminal,
    progress_bar,
)
from memoryadmin.memories.services.transfer import ImportRefused, memories_import_jsonl


class Command(BaseCommand):
    help = (
        "Import memories from a JSONL file (one object per line: id, document, metadata, optional "
        "384-number embedding). Nothing is written unless every line is valid; --skip-invalid "
        "writes the valid lines and lists the others."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("agent", help="agent slug")
        parser.add_argument("path", type=Path)
        parser.add_argument("--skip-invalid", action="store_true")
        parser.add_argument("--json", action="store_true", help="print one JSON object")

    def handle(self, *args: Any, **opts: Any) -> None:
        agent = get_agent(opts["agent"])
        path: Path = opts["path"]
        if not path.is_file():
            raise bad_input(f"No such file: {path}")
        bar = progress_bar(0, "importing", is_terminal(self.stderr) and not opts["json"])
        try:
            report = memories_import_jsonl(
                agent=agent,
                fileobj=path,
                skip_invalid=opts["skip_invalid"],
                actor="cli",
                progress=lambda n, label: bar.update(n),
            )
        except ImportRefused as exc:
            for err in exc.errors:
                self.stderr.write(f"{path.name}: {err}")
            if exc.error_count > len(exc.errors):
                self.stderr.write(f"{path.name}: {exc.error_count - len(exc.errors):,} more")
            raise bad_input(str(exc)) from None
        except ServiceError as exc:
            raise failed(str(exc)) from None
        finally:
            bar.close()
        if opts["json"]:
            self.stdout.write(json.dumps(report.to_dict()))
            return
        for err in report.errors:
            self.stderr.write(f"{path.name}: {err} (skipped)")
        if report.error_count > len(report.errors):
            unlisted = report.error_count - len(report.errors)
            self.stderr.write(f"{path.name}: {unlisted:,} more invalid lines (skipped)")
        self.stdout.write(report.summary())
