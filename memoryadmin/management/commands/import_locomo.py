"""``manage.py import_locomo PATH [--conversation conv-26 ...]``: LoCoMo → one agent per
conversation."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand

from memoryadmin.core.errors import ServiceError
from memoryadmin.management.commands._cli import (
    bad_input,
    failed,
    is_terminal,
    progress_bar,
)
from memoryadmin.memories.services.transfer import locomo_import


class Command(BaseCommand):
    help = (
        "Import a LoCoMo file (the published locomo10.json format, or a subset such as "
        "locomo7.json): one agent per conversation (locomo-conv-26, …) with its dialog turns, "
        "observations and session summaries as memories and its QA items (categories 1–4) as "
        "probe queries. Running it again changes nothing."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("path", type=Path)
        parser.add_argument(
            "--conversation",
            action="append",
            default=None,
            help="only this sample id (repeatable), e.g. conv-26",
        )
        parser.add_argument(
            "--collection-prefix",
            default="",
            help="prefix for new collection names (default: none)",
        )
        parser.add_argument("--json", action="store_true", help="print one JSON object")

    def handle(self, *args: Any, **opts: Any) -> None:
        path: Path = opts["path"]
        if not path.is_file():
            raise bad_input(f"No such file: {path}")
        bar = progress_bar(0, "importing", is_terminal(self.stderr) and not opts["json"])
        try:
            reports = locomo_import(
                path=path,
                conversations=opts["conversation"],
                collection_prefix=opts["collection_prefix"],
                progress=lambda n, label: (bar.set_description(label), bar.update(n)),
            )
        except ValueError as exc:
            raise bad_input(str(exc)) from None
        except ServiceError as exc:
            raise failed(str(exc)) from None
        finally:
            bar.close()
        if opts["json"]:
            self.stdout.write(json.dumps({"conversations": [r.to_dict() for r in reports]}))
        else:
            for r in reports:
                self.stdout.write(r.summary())
