"""``manage.py create_api_token USERNAME [--name NAME]``: print a new API token, once."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from memoryadmin.api.tokens import token_create


class Command(BaseCommand):
    help = (
        "Create an API token for USERNAME and print it (only its hash is stored: copy it now). "
        "The token acts with the user's role in the JSON API and the MCP server over HTTP."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("username")
        parser.add_argument("--name", default="", help="what the token is for, e.g. 'ci'")

    def handle(self, *args: Any, **opts: Any) -> None:
        user = get_user_model().objects.filter(username=opts["username"]).first()
        if user is None:
            raise CommandError(f"Unknown user {opts['username']!r}.", returncode=2)
        try:
            _token, raw = token_create(user=user, name=opts["name"], by=None)
        except ValueError as exc:
            raise CommandError(str(exc), returncode=2) from None
        self.stdout.write(raw)
