"""``manage.py forget SLUG (--scope KEY=VALUE | --ids ID … | --contains TEXT | --similar TEXT)
[--similarity X] [--max-count N] [--dry-run] [--yes [--note TEXT]] [--json]``.

- ``--dry-run``: lists every memory the selection would remove (live and archived); nothing
  stored.
- default: stores a proposed forget request for a reviewer (console, API, MCP), printing its id.
- ``--yes``: also approves it as the command's operator (actor ``cli``) and applies it now; it
  cannot be rolled back. ``--note`` is the approval's note (and the request's reason).

With ``--json`` it prints exactly one JSON object (the API's ``ForgetOut``). Exit status: 0 when
done; 2 for bad input (unknown agent, no or two selections, a key that is not a scope key,
nothing matches) with one line on stderr; 1 when it could not run (Chroma down, a pass of the
agent active).
"""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand

from memoryadmin.api.present.forget import forget_out, plan_out
from memoryadmin.core.errors import ServiceError, StoreUnavailable
from memoryadmin.management.commands._cli import bad_input, failed, get_agent
from memoryadmin.memories.models import ForgetRequest
from memoryadmin.memories.selectors.forget import ForgetSelection, forget_plan
from memoryadmin.memories.services.forget import NOT_UNDOABLE, forget_approve, forget_request_create


class Command(BaseCommand):
    help = (
        "Forget memories of an agent for good, by --scope KEY=VALUE, --ids, --contains or "
        "--similar: --dry-run lists them, the default stores a request for a reviewer, --yes "
        "approves and applies it now (cannot be rolled back)."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("agent", help="agent slug")
        parser.add_argument("--scope", metavar="KEY=VALUE", help="a field-map scope key's value")
        parser.add_argument("--ids", nargs="+", metavar="ID", help="memory ids")
        parser.add_argument("--contains", metavar="TEXT", help="text contains (any case)")
        parser.add_argument("--similar", metavar="TEXT", help="similar in meaning to TEXT")
        parser.add_argument("--similarity", type=float, default=0.8, help="least cosine (0.8)")
        parser.add_argument("--max-count", type=int, default=100, help="cap (contains, similar)")
        parser.add_argument("--dry-run", action="store_true", help="list only, store nothing")
        parser.add_argument("--yes", action="store_true", help="approve and apply now")
        parser.add_argument("--note", default="", help="why (the approval's note)")
        parser.add_argument("--json", action="store_true", help="one JSON object")

    def _selection(self, options: dict[str, Any]) -> ForgetSelection:
        given = [k for k in ("scope", "ids", "contains", "similar") if options.get(k)]
        if len(given) != 1:
            raise bad_input(
                "Give exactly one of --scope KEY=VALUE, --ids ID …, --contains TEXT, "
                f"--similar TEXT (got {len(given)})."
            )
        kind = given[0]
        common = {"max_count": options["max_count"], "similarity": options["similarity"]}
        if kind == "scope":
            key, sep, value = options["scope"].partition("=")
            if not sep:
                raise bad_input(f"--scope takes KEY=VALUE, not {options['scope']!r}.")
            return ForgetSelection("scope", key=key.strip(), value=value.strip(), **common)
        if kind == "ids":
            return ForgetSelection("ids", ids=tuple(dict.fromkeys(options["ids"])), **common)
        return ForgetSelection(kind, text=options[kind].strip(), **common)

    def handle(self, *args: Any, **options: Any) -> None:
        agent = get_agent(options["agent"])
        selection = self._selection(options)
        if options["dry_run"] and options["yes"]:
            raise bad_input("--dry-run and --yes exclude each other.")
        try:
            if options["dry_run"]:
                plan = forget_plan(agent=agent, selection=selection)
                out = plan_out(agent_slug=agent.slug, plan=plan)
            else:
                req, _plan = forget_request_create(
                    agent=agent, selection=selection, user=None, reason=options["note"]
                )
                if options["yes"]:
                    req = forget_approve(request=req, user=None, note=options["note"], here=True)
                    if req.status == ForgetRequest.Status.FAILED:
                        raise failed(f"Forget request #{req.pk} failed: {req.error}")
                out = forget_out(req)
        except ValueError as exc:
            raise bad_input(str(exc)) from None
        except StoreUnavailable as exc:
            raise failed(str(exc)) from None
        except ServiceError as exc:
            if "matches" in str(exc):
                raise bad_input(str(exc)) from None
            raise failed(str(exc)) from None
        if options["json"]:
            self.stdout.write(json.dumps(out.model_dump(mode="json"), ensure_ascii=False))
            return
        self._print(out)

    def _print(self, out: Any) -> None:
        head = "Dry run" if out.dry_run else f"Forget request #{out.id} ({out.status})"
        self.stdout.write(
            f"{head}: {out.count} memories ({out.live_count} live, {out.archived_count} archived)."
        )
        for m in out.memories:
            self.stdout.write(f"  {m.where:8} {m.id}  {(m.document or '')[:100]}")
        for m in out.related:
            self.stdout.write(f"  related  {m.id}  {(m.document or '')[:100]}  (stays)")
        if out.status == "proposed":
            self.stdout.write(f"Waiting for a reviewer. {NOT_UNDOABLE}")
        elif out.status == "applied":
            self.stdout.write("Removed for good; the tombstone keeps the hashed selection.")
