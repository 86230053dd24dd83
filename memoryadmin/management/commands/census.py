"""``manage.py census AGENT [--json]``: store and archive record counts and content hashes."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand

from memoryadmin.agents.selectors.agents import agent_census
from memoryadmin.core.errors import ServiceError
from memoryadmin.management.commands._cli import failed, get_agent


class Command(BaseCommand):
    help = (
        "Print an agent's store record count, a SHA-256 over ids, documents, metadata and "
        "float32 embeddings (equal: byte-identical), a content SHA-256 without the embeddings "
        "(a re-write into a cosine collection may move an embedding by 1 ulp), and the same "
        "for its archive."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("agent", help="agent slug")
        parser.add_argument("--json", action="store_true", help="print one JSON object")

    def handle(self, *args: Any, **options: Any) -> None:
        agent = get_agent(options["agent"])  # unknown agent: exit 2, like every command
        try:
            census = agent_census(agent=agent)
        except ServiceError as exc:
            raise failed(str(exc)) from exc
        if options["json"]:
            self.stdout.write(json.dumps(census, sort_keys=True))
            return
        for part in ("store", "archive"):
            c = census[part]
            self.stdout.write(f"{part:8} {c['count']:>8} records  sha256 {c['sha256']}")
            if "content_sha256" in c:
                self.stdout.write(f"{'':8} {'':>8}          content {c['content_sha256']}")
