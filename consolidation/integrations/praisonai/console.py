"""Console mode: a PraisonAI agent's pass is planned, reviewed and applied by the console.

:class:`Console` talks to the console's JSON API (``/api/v1/…``, bearer token, docs/API.md "JSON
API and MCP server") with httpx:

1. find the console's agent for the memory: the slug given (``MEMORYADMIN_AGENT``), else the
   agent whose ``collection`` is the memory's Chroma collection (``GET /agents``);
2. start a pass (``POST /passes`` ``{"agent", "policy"}``; the token's user must be an admin,
   like "Run now"); when the agent already has a proposal waiting, that one is the answer
   (a new pass would supersede a review in progress);
3. wait for it to be planned (``GET /passes/{id}``, at most ``wait_seconds``) and answer with
   a ``ConsolidationResult``: ``rejected=True, reason="queued for review: pass #N"`` while it
   waits for a reviewer, or the applied figures when the agent's policy auto-applies it.

The console's agent policy sets the loss guard of its passes (the API takes a named policy,
not a threshold). Nothing is uploaded: the console reads the agent's store itself, so the
memory must be a Chroma collection the console has attached; a ``FileMemory`` (JSON files on
the agent's machine) gets a rejected result saying so.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import httpx

from consolidation.result import ConsolidationResult

from .stores import collection_name

__all__ = ["ACTIVE_STATUSES", "Console", "ConsoleError", "ConsoleSettings", "result_from_pass"]

ACTIVE_STATUSES = frozenset({"queued", "running", "approved", "applying"})
"""Pass statuses that are still moving without a reviewer (the console's ``Pass.ACTIVE``
without rollbacks): the result waits while a pass is in one of them."""

QUEUED_FOR_REVIEW = "queued for review: pass #{id}"
"""The reason of a pass that waits for a reviewer (the plugin's contract with its callers)."""


class ConsoleError(RuntimeError):
    """The console could not be reached, or refused the request (the message says which, with
    the console's own ``detail``)."""


@dataclass(frozen=True)
class ConsoleSettings:
    """Where the console is and how to talk to it.

    - ``url``: the console's base URL, e.g. ``https://memory.example.org`` (``MEMORYADMIN_URL``).
    - ``token``: an API token (``MEMORYADMIN_TOKEN``; ``manage.py create_api_token``), of an
      admin — starting a pass is the admins' "Run now".
    - ``agent``: the console agent's slug (``MEMORYADMIN_AGENT``); ``None`` = found by the
      memory's collection.
    - ``policy``: a named policy of the console for the pass, ``None`` = the agent's own.
    - ``wait_seconds``: how long to wait for the pass to be planned (default 120 s).
    - ``timeout``: seconds per HTTP request (default 30).
    """

    url: str
    token: str
    agent: str | None = None
    policy: str | None = None
    wait_seconds: float = 120.0
    timeout: float = 30.0

    @classmethod
    def from_env(cls, environ: Mapping[str, str], **options: Any) -> ConsoleSettings | None:
        """Settings from ``MEMORYADMIN_URL`` / ``MEMORYADMIN_TOKEN`` / ``MEMORYADMIN_AGENT``
        (``options`` fill the rest; an ``agent`` option wins over the variable); ``None``
        unless both the URL and the token are set."""
        url = (environ.get("MEMORYADMIN_URL") or "").strip()
        token = (environ.get("MEMORYADMIN_TOKEN") or "").strip()
        if not url or not token:
            return None
        agent = options.pop("agent", None) or (environ.get("MEMORYADMIN_AGENT") or "").strip()
        return cls(url=url.rstrip("/"), token=token, agent=agent or None, **options)


class Console:
    """A client of one console (module docstring). ``sleep`` is ``time.sleep`` unless given."""

    def __init__(
        self, settings: ConsoleSettings, *, sleep: Callable[[float], None] | None = None
    ) -> None:
        self.settings = settings
        self.sleep = sleep or time.sleep
        self.http = httpx.Client(
            base_url=f"{settings.url}/api/v1",
            headers={"Authorization": f"Bearer {settings.token}"},
            timeout=settings.timeout,
        )

    def close(self) -> None:
        """Close the HTTP connections."""
        self.http.close()

    def __enter__(self) -> Console:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> httpx.Response:
        try:
            return self.http.request(method, path, json=body)
        except httpx.HTTPError as exc:
            where = self.settings.url
            raise ConsoleError(f"the console at {where} did not answer: {exc}") from None

    def _json(self, response: httpx.Response, what: str) -> Any:
        if response.status_code >= 400:
            try:
                detail = response.json().get("detail")
            except ValueError:
                detail = response.text[:200]
            raise ConsoleError(f"{what}: the console answered {response.status_code}: {detail}")
        return response.json()

    def find_agent(self, memory: Any) -> tuple[str | None, str]:
        """``(slug, "")`` of the console's agent for ``memory``, or ``(None, why not)``."""
        slug = self.settings.agent
        if slug:
            r = self._call("GET", f"/agents/{slug}")
            if r.status_code == 404:
                return None, f"the console has no agent {slug!r} (MEMORYADMIN_AGENT)"
            self._json(r, f"reading agent {slug!r}")
            return slug, ""
        name = collection_name(memory)
        if name is None:
            return None, (
                f"the console cannot read this {type(memory).__name__}: console mode needs the "
                "agent's memories in a Chroma collection the console has attached (set "
                "MEMORYADMIN_AGENT to its agent), or unset MEMORYADMIN_URL to consolidate locally"
            )
        agents = self._json(self._call("GET", "/agents"), "listing agents")
        for agent in agents:
            if agent.get("collection") == name:
                return str(agent["slug"]), ""
        return None, (
            f"no agent of the console is attached to collection {name!r}: attach it "
            f"(manage.py attach_collection SLUG {name} --preset praisonai) or set MEMORYADMIN_AGENT"
        )

    def consolidate(self, memory: Any) -> ConsolidationResult:
        """One console pass for ``memory`` (module docstring); ``ConsoleError`` when the console
        cannot be reached or refuses (wrong token, role, agent state)."""
        slug, why = self.find_agent(memory)
        if slug is None:
            return ConsolidationResult(
                rejected=True, reason=why, context={"mode": "console", "applied": False}
            )
        r = self._call("POST", "/passes", {"agent": slug, "policy": self.settings.policy})
        if r.status_code == 409:
            waiting = self._waiting_proposal(slug)
            if waiting is not None:
                return result_from_pass(waiting, self.settings.url, already_waiting=True)
        created = self._json(r, f"starting a pass of {slug!r}")
        return result_from_pass(self.wait(int(created["pass_id"])), self.settings.url)

    def _waiting_proposal(self, slug: str) -> dict[str, Any] | None:
        page = self._json(
            self._call("GET", f"/passes?agent={slug}&status=proposed"), "listing proposals"
        )
        items = page.get("items") or []
        return items[0] if items else None

    def wait(self, pass_id: int) -> dict[str, Any]:
        """The pass once it leaves :data:`ACTIVE_STATUSES`, or as it is after ``wait_seconds``."""
        deadline = time.monotonic() + self.settings.wait_seconds
        while True:
            body = self._json(self._call("GET", f"/passes/{pass_id}"), f"reading pass #{pass_id}")
            if body.get("status") not in ACTIVE_STATUSES or time.monotonic() >= deadline:
                return body
            self.sleep(min(1.0, max(0.0, deadline - time.monotonic())))


def result_from_pass(
    body: Mapping[str, Any], base_url: str, *, already_waiting: bool = False
) -> ConsolidationResult:
    """The ``ConsolidationResult`` of a console pass (``PassOut`` JSON).

    ``proposed`` (or still planning) → ``rejected=True, reason="queued for review: pass #N"``;
    ``applied``/``partially_applied`` → the pass's figures, not rejected; ``rejected_by_guard``
    → rejected with the guard's reason; ``failed`` and anything else → rejected, saying so.
    ``retained_originals`` is derived from the pass's loss fraction (the API reports the
    fraction), so ``result.loss_fraction`` equals the console's. ``context`` holds the pass id,
    status, absolute URL, reconciled count, guard and recall verdicts.
    """
    pid, status = int(body["id"]), str(body.get("status"))
    before = int(body.get("entries_before") or 0)
    loss = float(body.get("loss_fraction") or 0.0)
    url = str(body.get("url") or "")
    applied = status in ("applied", "partially_applied")
    reason: str | None
    if status == "proposed":
        reason = QUEUED_FOR_REVIEW.format(id=pid)
    elif status in ACTIVE_STATUSES:
        reason = QUEUED_FOR_REVIEW.format(id=pid) + f" (still {status})"
    elif status == "rejected_by_guard":
        reason = str(body.get("reason") or body.get("guard_reason") or "loss guard tripped")
    elif status == "failed":
        reason = f"pass #{pid} failed: {body.get('error') or 'see the console'}"
    elif applied:
        reason = None if status == "applied" else f"pass #{pid} was partially applied"
    else:
        reason = f"pass #{pid} is {status}"
    return ConsolidationResult(
        entries_before=before,
        entries_after=int(body.get("entries_after") or 0),
        merged=int(body.get("merged") or 0),
        promoted=int(body.get("promoted") or 0),
        pruned=int(body.get("pruned") or 0),
        rejected=not applied,
        reason=reason,
        retained_originals=before - round(loss * before) if before else None,
        context={
            "mode": "console",
            "pass_id": pid,
            "status": status,
            "url": url if url.startswith("http") else f"{base_url}{url}",
            "applied": applied,
            "already_waiting": already_waiting,
            "reconciled": int(body.get("reconciled") or 0),
            "loss_fraction": loss,
            "max_loss_fraction": body.get("max_loss_fraction"),
            "guard_reason": body.get("guard_reason") or "",
            "recall": body.get("recall"),
        },
    )
