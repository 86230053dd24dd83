"""``manage.py revoke_api_token (TOKEN | --prefix PREFIX | --user USERNAME [--all])``."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from memoryadmin.api.models import ApiToken
from memoryadmin.api.tokens import hash_token, token_revoke


class Command(BaseCommand):
    help = (
        "Revoke an API token, given the token itself or the prefix shown on the user's token page "
        "(e.g. ma_AbC123x); --user USERNAME lists a user's tokens, --user USERNAME --all revokes "
        "all of them."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("token", nargs="?", default=None, help="the token, or its prefix")
        parser.add_argument(
            "--user", default=None, help="list (or with --all revoke) this user's tokens"
        )
        parser.add_argument(
            "--all", action="store_true", help="with --user: revoke every active token"
        )

    def handle(self, *args: Any, **opts: Any) -> None:
        if opts["user"]:
            tokens = list(
                ApiToken.objects.filter(user__username=opts["user"]).select_related("user")
            )
            if not opts["all"]:
                for t in tokens:
                    state = "active" if t.is_active else f"revoked {t.revoked_at:%Y-%m-%d %H:%M}"
                    self.stdout.write(f"{t.prefix}…  {t.name or '-'}  {state}")
                return
            targets = [t for t in tokens if t.is_active]
        elif opts["token"]:
            targets = self._find(opts["token"].strip().rstrip("…"))
        else:
            raise CommandError("Give a token (or its prefix), or --user USERNAME.", returncode=2)
        for t in targets:
            token_revoke(token=t, by=None)
            self.stdout.write(
                f"revoked {t.prefix}… ({t.name or 'unnamed'}) of {t.user.get_username()}"
            )

    @staticmethod
    def _find(value: str) -> list[ApiToken]:
        exact = ApiToken.objects.filter(token_hash=hash_token(value)).select_related("user")
        if exact:
            return list(exact)
        matches = (
            list(ApiToken.objects.filter(prefix__startswith=value).select_related("user"))
            if len(value) >= 6
            else []
        )
        if len(matches) != 1:
            why = "no token matches" if not matches else f"{len(matches)} tokens match"
            raise CommandError(
                f"{why} {value!r}; give the whole token or a longer prefix.", returncode=2
            )
        return matches
