"""The MCP server: the console's agents, memories and passes as MCP tools (official ``mcp`` SDK).

Tools (typed inputs, structured results — the JSON API's schemas): ``list_agents``,
``search_memories``, ``memory_consolidate``, ``memory_compact`` (the dream-pass tool names of
``seeds/003``), ``get_dry_run``, ``list_proposals``, ``get_pass``, ``exclude_operation``,
``resolve_conflict``, ``approve_pass``, ``reject_pass``, ``list_decisions``, ``revoke_decision``,
``forget``, ``approve_forget``, ``reject_forget``. Each acts for one user with that user's console
role: the ``--user`` of a stdio server, or the owner of the bearer API token of an HTTP request.
Every refusal or failure (unknown agent, bad argument,
forbidden call, store down) is an MCP tool error with a readable message; nothing crashes the
server. Tools are plain functions: the SDK runs them in worker threads, where the Django ORM
may be used.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Annotated, Any, Literal, TypeVar

import anyio.to_thread
from django.contrib.auth import get_user_model
from django.core.paginator import EmptyPage
from django.db import close_old_connections
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field, ValidationError

from memoryadmin.agents.models import Agent
from memoryadmin.api import schemas as s
from memoryadmin.api.actions import common, decisions, dry_runs, passes, review
from memoryadmin.api.actions import forget as forget_actions
from memoryadmin.api.present.agents import agent_out
from memoryadmin.api.present.memories import memory_out
from memoryadmin.api.present.passes import pass_detail_out, pass_out
from memoryadmin.api.tokens import token_user
from memoryadmin.core.validation import DB_INT_MAX, MAX_NOTE_CHARS
from memoryadmin.memories.selectors.memories import memory_search
from memoryadmin.proposals.models import Pass

log = logging.getLogger(__name__)

F = TypeVar("F", bound=Callable[..., Any])

INSTRUCTIONS = (
    "memoryadmin keeps AI agents' long-term memory healthy. Consolidation passes (merge "
    "duplicates, reconcile contradictions, promote, prune) are planned as proposals that a "
    "reviewer approves or rejects; nothing is removed without an archive. Use list_agents "
    "first; memory_consolidate with dry_run=true to see what a pass would do without writing (the "
    "worker plans it: if it is not done within the wait, poll get_dry_run with its dry_run_id)."
)
MCP_DRY_RUN_WAIT = 25.0
"""Seconds ``memory_consolidate(dry_run=true)`` and ``get_dry_run`` wait by default for a dry run
to finish (the server's ``MEMORYADMIN_DRY_RUN_MAX_WAIT`` bounds any wait)."""
PROPOSALS_LISTED = 50
"""``list_proposals`` returns at most this many proposals, newest first."""


class TokenVerifier:
    """The MCP SDK's bearer-token check backed by our API tokens (revoked → 401)."""

    async def verify_token(self, token: str) -> AccessToken | None:
        def lookup() -> Any:
            close_old_connections()
            try:
                return token_user(token)
            finally:
                close_old_connections()

        user = await anyio.to_thread.run_sync(lookup)
        if user is None:
            return None
        return AccessToken(
            token=token, client_id="memoryadmin-api-token", scopes=[], subject=str(user.pk)
        )


def _tool(fn: F) -> F:
    """Run a tool body with fresh DB connections; turn every failure into a readable ToolError."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        close_old_connections()
        try:
            return fn(*args, **kwargs)
        except common.ActionError as exc:
            raise ToolError(exc.message) from None
        except ToolError:
            raise
        except Exception as exc:  # never crash the server: log it, tell the caller what happened
            log.exception("MCP tool %s failed", fn.__name__)
            raise ToolError(f"{fn.__name__} failed: {type(exc).__name__}: {exc}") from None
        finally:
            close_old_connections()

    return wrapper  # type: ignore[return-value]


def argument_errors(tool: str, exc: ValidationError) -> str:
    """One readable line per bad argument of ``tool``: "Bad arguments for get_pass:" then
    "- pass_id: Input should be a valid integer" lines (the argument's name, Pydantic's message
    without the model name or the errors.pydantic.dev link)."""
    lines = [f"Bad arguments for {tool}:"]
    for err in exc.errors(include_url=False):
        name = ".".join(str(part) for part in err["loc"]) or "arguments"
        msg = "required" if err["type"] == "missing" else err["msg"]
        if err["type"] == "extra_forbidden":
            msg = "not an argument of this tool"
        lines.append(f"- {name}: {msg}")
    return "\n".join(lines)


class ConsoleMCPServer(MCPServer):
    """The SDK's server with readable argument errors (:func:`argument_errors`) in place of
    Pydantic's raw validation text."""

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            if isinstance(exc.__cause__, ValidationError):
                raise ToolError(argument_errors(name, exc.__cause__)) from exc.__cause__
            raise


def build_server(*, user_id: int | None = None, auth: AuthSettings | None = None) -> MCPServer:
    """The MCP server acting as user ``user_id`` (stdio), or as each request's token owner
    (``auth`` given: streamable HTTP with our API tokens)."""

    def current_user() -> Any:
        pk = user_id
        if pk is None:
            access = get_access_token()
            if access is None or access.subject is None:
                raise ToolError("Not authenticated: send 'Authorization: Bearer <API token>'.")
            pk = int(access.subject)
        user = get_user_model().objects.filter(pk=pk, is_active=True).first()
        if user is None:
            raise ToolError("The acting user no longer exists or is inactive.")
        return user

    server = ConsoleMCPServer(
        "memoryadmin",
        instructions=INSTRUCTIONS,
        version="1",
        auth=auth,
        token_verifier=TokenVerifier() if auth else None,
    )
    _register(server, current_user)
    _register_planning(server, current_user)
    _register_review(server, current_user)
    _register_forget(server, current_user)
    return server


def http_app(*, host: str, port: int) -> Any:
    """The streamable-HTTP Starlette app (endpoint ``/mcp``) that requires an API token; served
    by ``mcp_server --transport http`` with uvicorn (and by the tests in a thread)."""
    base = f"http://{host}:{port}"
    auth = AuthSettings(
        issuer_url=base, resource_server_url=f"{base}/mcp", validate_token_resource=False
    )
    return build_server(auth=auth).streamable_http_app(host=host)


def _register(server: MCPServer, current_user: Callable[[], Any]) -> None:
    """The reading tools and compact: agents, search, compact, proposals, a pass."""

    @server.tool()
    @_tool
    def list_agents() -> list[s.AgentOut]:
        """Every agent with its memory count, pending proposals, pass counts and schedule."""
        current_user()
        return [agent_out(a) for a in Agent.objects.order_by("name")]

    @server.tool()
    @_tool
    def search_memories(
        agent: Annotated[
            str, Field(min_length=1, max_length=80, description="agent slug (see list_agents)")
        ],
        query: Annotated[
            str, Field(min_length=1, max_length=2000, description="text to search for")
        ],
        k: Annotated[int, Field(ge=1, le=100, description="how many memories")] = 10,
    ) -> list[s.MemoryOut]:
        """The k memories of an agent closest in meaning to the query (cosine), best first."""
        current_user()
        a = common.get_agent(agent)
        try:
            found = memory_search(agent=a, text=query, k=k)
        except Exception as exc:
            raise common.Unavailable(f"The agent's store cannot be read now: {exc}") from None
        return [memory_out(m) for m in found]

    @server.tool()
    @_tool
    def memory_compact(
        agent: Annotated[
            str, Field(min_length=1, max_length=80, description="agent slug (see list_agents)")
        ],
        layer: Annotated[
            str,
            Field(
                min_length=1,
                max_length=40,
                description="memory layer: semantic, episodic, procedural, summary",
            ),
        ] = "semantic",
        replace: Annotated[
            bool, Field(description="supersede a proposal still waiting for review")
        ] = False,
    ) -> s.PassOut:
        """A pass restricted to reconciling contradictions and folding duplicates (admins), as a
        proposal for review. Only memories of ``layer`` are planned (a memory without a layer
        counts as semantic); the others are neither compared nor touched. Refused naming the
        agent's proposal waiting for review unless replace=true."""
        return passes.compact(
            agent=common.get_agent(agent), user=current_user(), layer=layer, replace=replace
        )

    @server.tool()
    @_tool
    def list_proposals(
        agent: Annotated[
            str | None, Field(max_length=80, description="agent slug; null = every agent")
        ] = None,
    ) -> list[s.PassOut]:
        """Passes waiting for review (status proposed), newest first (at most 50)."""
        current_user()
        qs = (
            Pass.objects.filter(status=Pass.Status.PROPOSED)
            .select_related("agent", "requested_by", "decided_by")
            .order_by("-created_at", "-id")
        )
        if agent is not None:
            qs = qs.filter(agent=common.get_agent(agent))
        return [pass_out(p) for p in qs[:PROPOSALS_LISTED]]

    @server.tool()
    @_tool
    def get_pass(
        pass_id: Annotated[int, Field(ge=1, le=DB_INT_MAX, description="pass id")],
        page: Annotated[
            int, Field(ge=1, le=DB_INT_MAX, description="page of operations (20 a page)")
        ] = 1,
    ) -> s.PassDetailOut:
        """One pass: summary, loss guard, recall and its operations (20 a page)."""
        current_user()
        try:
            return pass_detail_out(common.get_pass(pass_id), page=page)
        except EmptyPage:
            raise common.NotFound(f"Pass #{pass_id} has no page {page} of operations.") from None


def _register_planning(server: MCPServer, current_user: Callable[[], Any]) -> None:
    """Planning now: ``memory_consolidate`` (a pass, or a dry run queued for the worker) and
    ``get_dry_run`` (polling that dry run)."""

    @server.tool()
    @_tool
    def memory_consolidate(
        agent: Annotated[
            str, Field(min_length=1, max_length=80, description="agent slug (see list_agents)")
        ],
        dry_run: Annotated[bool, Field(description="plan and measure only; write nothing")] = False,
        policy: Annotated[
            str | None,
            Field(
                max_length=40,
                description="named policy (default, aggressive); null = the agent's own",
            ),
        ] = None,
        replace: Annotated[
            bool, Field(description="supersede a proposal still waiting for review")
        ] = False,
        wait: Annotated[
            float,
            Field(ge=0, le=60, description="dry runs: seconds to wait for the result"),
        ] = MCP_DRY_RUN_WAIT,
    ) -> s.ConsolidateOut | s.DryRunOut:
        """Plan a consolidation pass. With dry_run: the worker plans it (nothing written) and
        this waits up to `wait` seconds: status done with `result` — the ConsolidationResult
        figures (entries before/after, merged, promoted, pruned, loss fraction), the loss-guard
        verdict and recall figures — or, still queued/running, its dry_run_id for get_dry_run.
        One dry run per agent at a time (the same request again returns it) and a few per
        user; over a limit the call is refused with the dry run to wait for. Otherwise
        (admins): a proposal for review, or applied per the agent's auto-apply policy; returns
        its id and status. Refused naming the agent's proposal waiting for review unless
        replace=true (it is then marked stale, superseded, its exclusions and edits carried
        over)."""
        return passes.consolidate(
            agent=common.get_agent(agent),
            user=current_user(),
            dry_run=dry_run,
            policy=policy,
            replace=replace,
            wait=wait,
        )

    @server.tool()
    @_tool
    def get_dry_run(
        dry_run_id: Annotated[int, Field(ge=1, le=DB_INT_MAX, description="dry run id")],
        wait: Annotated[
            float, Field(ge=0, le=60, description="seconds to wait for it to finish")
        ] = MCP_DRY_RUN_WAIT,
    ) -> s.DryRunOut:
        """A dry run memory_consolidate(dry_run=true) queued: status queued, running, done (with
        `result`, its figures) or failed (with `error`); waits up to `wait` seconds for it."""
        current_user()
        return dry_runs.dry_run_fetch(dry_run_id=dry_run_id, wait=wait)


def _register_review(server: MCPServer, current_user: Callable[[], Any]) -> None:
    """The reviewer's tools: exclude/include an operation, decide a conflict, approve, reject."""

    @server.tool()
    @_tool
    def exclude_operation(
        pass_id: Annotated[int, Field(ge=1, le=DB_INT_MAX, description="pass id")],
        index: Annotated[
            int, Field(ge=0, le=DB_INT_MAX, description="operation index (get_pass lists them)")
        ],
        excluded: Annotated[bool, Field(description="true = leave out; false = include")] = True,
    ) -> s.PassOut:
        """Leave an operation of a proposal out of it, or include it again (reviewers and
        admins); the summary and the loss guard follow. Audited as the calling user."""
        return review.set_excluded(
            run=common.get_pass(pass_id), index=index, excluded=excluded, user=current_user()
        )

    @server.tool()
    @_tool
    def resolve_conflict(
        pass_id: Annotated[int, Field(ge=1, le=DB_INT_MAX, description="pass id")],
        index: Annotated[
            int, Field(ge=0, le=DB_INT_MAX, description="index of the conflict operation")
        ],
        keep: Annotated[
            Literal["a", "b", "both"],
            Field(description="a = keep its first memory, b = its second, both = remove none"),
        ],
    ) -> s.PassOut:
        """Decide a conflict of a proposal (reviewers and admins). Keeping ``a`` or ``b`` removes
        the other on apply (archived, undone by a rollback); ``both`` removes nothing. Refused
        when the pass is no longer a proposal or the memories changed since it was planned."""
        return review.resolve_conflict(
            run=common.get_pass(pass_id), index=index, keep=keep, user=current_user()
        )

    @server.tool()
    @_tool
    def approve_pass(
        pass_id: Annotated[int, Field(ge=1, le=DB_INT_MAX, description="pass id")],
        note: Annotated[str, Field(max_length=MAX_NOTE_CHARS, description="why (optional)")] = "",
        revision: Annotated[
            str | None,
            Field(max_length=64, description="the pass's revision as read (get_pass); optional"),
        ] = None,
    ) -> s.PassOut:
        """Approve a proposal (reviewers and admins); the loss guard is checked again first.
        With revision: refused, nothing applied, when the operations changed since it was
        read."""
        return review.approve(
            run=common.get_pass(pass_id), user=current_user(), note=note, revision=revision
        )

    @server.tool()
    @_tool
    def reject_pass(
        pass_id: Annotated[int, Field(ge=1, le=DB_INT_MAX, description="pass id")],
        note: Annotated[
            str, Field(min_length=1, max_length=MAX_NOTE_CHARS, description="why (required)")
        ],
        never_again: Annotated[
            bool,
            Field(description="and never propose these again (keep-apart / keep decisions)"),
        ] = False,
    ) -> s.PassOut:
        """Reject a proposal with a note (reviewers and admins); the store is left untouched.
        Remembered as a rejected-plan decision: a later automatic pass never applies the same
        operations on its own. With never_again, also keep the memories of its merges and
        reconciles apart and keep what it would prune."""
        return review.reject(
            run=common.get_pass(pass_id), user=current_user(), note=note, never_again=never_again
        )

    @server.tool()
    @_tool
    def list_decisions(
        agent: Annotated[str, Field(description="agent slug (see list_agents)")],
        state: Annotated[
            Literal["active", "revoked", "all"], Field(description="which decisions")
        ] = "active",
        page: Annotated[int, Field(ge=1, le=DB_INT_MAX, description="page (50 a page)")] = 1,
    ) -> list[s.DecisionOut]:
        """An agent's standing decisions, newest first: keep_apart (an excluded merge or
        reconcile), keep (a restored memory, a conflict's "keep both"), conflict_pick (keep A /
        B), rejected_plan (a rejected pass); who set each, when, why, from which pass, the
        memories and content hashes, how many later operations it held back."""
        current_user()
        return decisions.list_decisions(agent=common.get_agent(agent), state=state, page=page)

    @server.tool()
    @_tool
    def revoke_decision(
        agent: Annotated[str, Field(description="agent slug (see list_agents)")],
        decision_id: Annotated[int, Field(ge=1, description="decision id (list_decisions)")],
        note: Annotated[str, Field(max_length=MAX_NOTE_CHARS, description="why (optional)")] = "",
    ) -> s.DecisionOut:
        """Revoke a standing decision (reviewers and admins, audited): the next pass judges
        its memories again (a revoked keep-apart lets their merge be proposed again)."""
        return decisions.revoke(
            agent=common.get_agent(agent), decision_id=decision_id, user=current_user(), note=note
        )


def _register_forget(server: MCPServer, current_user: Callable[[], Any]) -> None:
    """The forget tools: request (or dry-run) a forget, approve or reject one."""

    @server.tool()
    @_tool
    def forget(
        agent: Annotated[str, Field(description="agent slug (see list_agents)")],
        kind: Annotated[
            Literal["scope", "ids", "contains", "similar"],
            Field(description="select by a scope value, ids, text contains, or similarity"),
        ],
        key: Annotated[
            str, Field(max_length=200, description="scope key (kind scope), e.g. user_id")
        ] = "",
        value: Annotated[str, Field(max_length=500, description="scope value (kind scope)")] = "",
        ids: Annotated[
            list[str] | None, Field(max_length=10_000, description="memory ids (kind ids)")
        ] = None,
        text: Annotated[
            str, Field(max_length=2000, description="text (kinds contains and similar)")
        ] = "",
        similarity: Annotated[
            float, Field(ge=0.0, le=1.0, description="least cosine (kind similar)")
        ] = 0.8,
        max_count: Annotated[
            int, Field(ge=1, le=10_000, description="at most this many (contains, similar)")
        ] = 100,
        reason: Annotated[str, Field(max_length=MAX_NOTE_CHARS, description="why")] = "",
        dry_run: Annotated[bool, Field(description="list only, store nothing")] = False,
    ) -> s.ForgetOut:
        """Request that memories be forgotten for good (reviewers and admins): lists every
        memory it would remove, live and archived. With dry_run nothing is stored; otherwise a
        proposed forget request waits for approve_forget (it is never applied on its own and
        cannot be rolled back once applied)."""
        payload = s.ForgetIn(
            kind=kind,
            key=key,
            value=value,
            ids=ids or [],
            text=text,
            similarity=similarity,
            max_count=max_count,
            reason=reason,
            dry_run=dry_run,
        )
        return forget_actions.forget(
            agent=common.get_agent(agent), payload=payload, user=current_user()
        )

    @server.tool()
    @_tool
    def approve_forget(
        forget_id: Annotated[int, Field(ge=1, le=DB_INT_MAX, description="forget request id")],
        note: Annotated[str, Field(max_length=MAX_NOTE_CHARS, description="why (optional)")] = "",
    ) -> s.ForgetOut:
        """Approve a forget request (reviewers and admins): the worker removes the memories,
        their archived copies and every text of them for good (status ``applying`` until it is
        done; ``GET /api/v1/forget/{id}`` and the request's page show the outcome and any ids
        skipped because they changed since planning). Cannot be rolled back."""
        return forget_actions.approve(
            req=forget_actions.get_forget(forget_id), user=current_user(), note=note
        )

    @server.tool()
    @_tool
    def reject_forget(
        forget_id: Annotated[int, Field(ge=1, le=DB_INT_MAX, description="forget request id")],
        note: Annotated[str, Field(max_length=MAX_NOTE_CHARS, description="why (optional)")] = "",
    ) -> s.ForgetOut:
        """Reject a forget request (reviewers and admins): nothing is removed."""
        return forget_actions.reject(
            req=forget_actions.get_forget(forget_id), user=current_user(), note=note
        )
