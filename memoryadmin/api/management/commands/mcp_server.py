"""``manage.py mcp_server [--transport stdio --user USERNAME | --transport http --port N]``."""

from __future__ import annotations

import logging
import sys
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from memoryadmin.api.mcp_tools import build_server, http_app


class Command(BaseCommand):
    help = (
        "Serve the console as MCP tools (list_agents, search_memories, memory_consolidate, "
        "memory_compact, list_proposals, get_pass, approve_pass, reject_pass). stdio (default) "
        "acts "
        "as --user USERNAME; --transport http serves streamable HTTP at http://HOST:PORT/mcp, "
        "authenticated with API tokens (Authorization: Bearer <token>)."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--transport", choices=("stdio", "http"), default="stdio")
        parser.add_argument(
            "--user", default=None, help="stdio: the user the tools act as (required)"
        )
        parser.add_argument("--host", default="127.0.0.1", help="http: interface to listen on")
        parser.add_argument("--port", type=int, default=8100, help="http: port (default 8100)")

    def handle(self, *args: Any, **opts: Any) -> None:
        # stdout is the protocol channel on stdio: every log line goes to stderr.
        logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
        if opts["transport"] == "stdio":
            if not opts["user"]:
                raise CommandError(
                    "--user USERNAME is required with --transport stdio.", returncode=2
                )
            user = get_user_model().objects.filter(username=opts["user"], is_active=True).first()
            if user is None:
                raise CommandError(f"Unknown or inactive user {opts['user']!r}.", returncode=2)
            build_server(user_id=user.pk).run("stdio")
            return
        if opts["user"]:
            raise CommandError(
                "--user is for stdio; over HTTP each API token acts as its owner.", returncode=2
            )
        import uvicorn

        host, port = opts["host"], opts["port"]
        self.stderr.write(f"MCP server (streamable HTTP) at http://{host}:{port}/mcp")
        uvicorn.run(http_app(host=host, port=port), host=host, port=port, log_level="warning")
