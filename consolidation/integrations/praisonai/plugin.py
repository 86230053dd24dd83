"""`ConsolidationPlugin`: the PraisonAI plugin (the seed's "scheduler ships in praisonai-plugins").

praisonaiagents 1.7.17 defines the consolidation contract (``MemoryConsolidationProtocol``,
``ConsolidationResult``) but never calls it. This plugin is a consolidator *and* its scheduler:

- ``consolidate(memory, *, max_loss_fraction=0.25)`` (and ``aconsolidate``) — the seed's
  protocol. **Local mode** (default): the engine plans over the agent's own memory and applies
  under the loss guard (:class:`~consolidation.Consolidator` through
  :func:`~.stores.writable_store`). **Console mode** (``MEMORYADMIN_URL`` and
  ``MEMORYADMIN_TOKEN`` set): the console plans the pass for review (:mod:`.console`).
  Either way the answer is praisonaiagents' own ``ConsolidationResult``.
- triggers, off the reply path (each pass runs in a background thread, one at a time per
  agent) for the agents given to :meth:`ConsolidationPlugin.watch`: a **timer** (``cron``,
  default ``"0 3 * * *"``, the seed's nightly example and the console's default schedule) and
  **every N turns** (``every_turns``), counted by the ``after_agent`` hook. PraisonAI withholds
  that hook from a plugin it discovered unless the operator grants it
  (``allow_conversation: true`` in the plugin's options: ``PluginManager``'s least-privilege
  rule for hooks that carry conversation text); the plugin reads only the agent's name from it.

PraisonAI loads it from the ``praisonai.plugins`` entry point with ``ep.load()()``, so it
builds with no arguments; options come from ``on_config`` (PraisonAI's per-plugin options, e.g.
``plugins.enable(["memoryadmin"], {"memoryadmin": {...}})``) or keyword arguments.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from croniter import croniter
from praisonaiagents.memory import ConsolidationResult as PraisonResult
from praisonaiagents.plugins import Plugin, PluginHook, PluginInfo

from consolidation.consolidator import Consolidator
from consolidation.policy import NAMED_POLICIES
from consolidation.result import ConsolidationResult, validate_loss_threshold

from .console import Console, ConsoleSettings
from .stores import writable_store

__all__ = ["DEFAULT_CRON", "PLUGIN_NAME", "ConsolidationPlugin", "PluginOptions", "to_praisonai"]

log = logging.getLogger(__name__)

PLUGIN_NAME = "memoryadmin"
"""The plugin's name in PraisonAI (``PluginInfo.name``, the key of its options)."""

DEFAULT_CRON = "0 3 * * *"
"""Nightly at 03:00 (the process's local time): the seed's example schedule, and the default
``schedule_cron`` of a console agent."""

CORE_REQUIREMENT = "praisonaiagents>=1.7.17,<2"
"""What the plugin was written and tested against (``PluginManager`` refuses it otherwise)."""


@dataclass(frozen=True)
class PluginOptions:
    """The plugin's options, validated.

    - ``every_turns``: consolidate a watched agent after this many turns (0 = off; needs the
      ``after_agent`` hook, see the module docstring).
    - ``cron``: when the timer consolidates every watched agent (croniter syntax, 5 fields, or
      6 with seconds); ``""`` = no timer.
    - ``max_loss_fraction``: the loss guard of triggered passes (0.25, the contract's default).
    - ``policy``: the named policy (``default``: plan within the loss budget, so a pass applies
      the most certain operations that fit and leaves the rest to the next; ``aggressive``).
      Local passes use it; console passes send it only when set explicitly.
    - ``agent``: the console agent's slug (overrides ``MEMORYADMIN_AGENT``).
    - ``wait_seconds``: how long a console pass is waited for (default 120 s).
    """

    every_turns: int = 0
    cron: str = DEFAULT_CRON
    max_loss_fraction: float = 0.25
    policy: str = "default"
    agent: str | None = None
    wait_seconds: float = 120.0
    policy_given: bool = False

    @classmethod
    def from_mapping(
        cls, values: Mapping[str, Any], base: PluginOptions | None = None
    ) -> PluginOptions:
        """``base`` (default: the defaults) updated with ``values``; ``ValueError`` naming the
        option for an unknown key or a bad value. PraisonAI's own ``allow_conversation`` key
        is accepted and ignored (the manager reads it)."""
        base = base or cls()
        known = {f.name for f in dataclasses.fields(cls)} - {"policy_given"}
        unknown = sorted(set(values) - known - {"allow_conversation"})
        if unknown:
            raise ValueError(f"unknown option(s) {', '.join(unknown)}; known: {sorted(known)}")
        changes = {k: values[k] for k in known if k in values}
        if "policy" in changes:
            changes["policy_given"] = True
        return dataclasses.replace(base, **changes)

    def __post_init__(self) -> None:
        n = self.every_turns
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ValueError(f"every_turns must be a whole number ≥ 0, got {n!r}")
        if not isinstance(self.cron, str) or (self.cron and not croniter.is_valid(self.cron)):
            raise ValueError(f"cron must be a cron expression or '', got {self.cron!r}")
        threshold = validate_loss_threshold(self.max_loss_fraction)
        object.__setattr__(self, "max_loss_fraction", threshold)
        if self.policy not in NAMED_POLICIES:
            raise ValueError(f"policy must be one of {sorted(NAMED_POLICIES)}, got {self.policy!r}")
        if self.agent is not None and (not isinstance(self.agent, str) or not self.agent.strip()):
            raise ValueError(f"agent must be a console agent's slug, got {self.agent!r}")
        w = self.wait_seconds
        if isinstance(w, bool) or not isinstance(w, int | float) or not 0 < w <= 86_400:
            raise ValueError(f"wait_seconds must be a number of seconds in (0, 86400], got {w!r}")


def to_praisonai(result: ConsolidationResult) -> PraisonResult:
    """Our result as praisonaiagents' ``ConsolidationResult`` (same fields, ``context`` copied)."""
    return PraisonResult(
        entries_before=result.entries_before,
        entries_after=result.entries_after,
        merged=result.merged,
        promoted=result.promoted,
        pruned=result.pruned,
        rejected=result.rejected,
        reason=result.reason,
        retained_originals=result.retained_originals,
        context=dict(result.context or {}),
    )


class ConsolidationPlugin(Plugin):
    """PraisonAI plugin and consolidator (module docstring).

    ``environ`` (default ``os.environ``, read at each pass) decides the mode; ``options`` are
    :class:`PluginOptions` fields. After a triggered pass, :attr:`results` holds its result by
    agent name and :attr:`errors` the message of one that raised; :meth:`wait` joins the
    passes still running.
    """

    def __init__(self, *, environ: Mapping[str, str] | None = None, **options: Any) -> None:
        self.options = PluginOptions.from_mapping(options)
        self.environ = environ
        self.results: dict[str, PraisonResult] = {}
        self.errors: dict[str, str] = {}
        self._agents: dict[str, Any] = {}
        self._turns: dict[str, int] = {}
        self._running: dict[str, threading.Thread] = {}
        self._lock = threading.Lock()
        self._timer: _CronTimer | None = None

    @property
    def info(self) -> PluginInfo:
        """``PluginInfo(name="memoryadmin", hooks=[after_agent], dependencies=[…])``."""
        return PluginInfo(
            name=PLUGIN_NAME,
            version=_version(),
            description="Memory consolidation for PraisonAI agents: local passes under the "
            "loss guard, or passes reviewed in the memoryadmin console.",
            author="memoryadmin",
            hooks=[PluginHook.AFTER_AGENT],
            dependencies=[CORE_REQUIREMENT],
        )

    # ----- the consolidation protocol -------------------------------------------------------

    def consolidate(self, memory: Any, *, max_loss_fraction: float = 0.25) -> PraisonResult:
        """One pass over ``memory`` in the current mode (module docstring).

        An invalid ``max_loss_fraction`` gives ``rejected=True`` and writes nothing, as the
        engine's ``Consolidator`` does. Raises what the engine raises for an unusable memory,
        and :class:`~.console.ConsoleError` when the console cannot be reached or refuses.
        """
        settings = ConsoleSettings.from_env(
            self.environ if self.environ is not None else os.environ,
            agent=self.options.agent,
            policy=self.options.policy if self.options.policy_given else None,
            wait_seconds=self.options.wait_seconds,
        )
        if settings is None:
            return to_praisonai(self._locally(memory, max_loss_fraction))
        try:
            validate_loss_threshold(max_loss_fraction)
        except ValueError as exc:
            return to_praisonai(
                ConsolidationResult(rejected=True, reason=f"invalid loss threshold: {exc}")
            )
        with Console(settings) as console:
            return to_praisonai(console.consolidate(memory))

    async def aconsolidate(self, memory: Any, *, max_loss_fraction: float = 0.25) -> PraisonResult:
        """:meth:`consolidate` in a worker thread."""
        return await asyncio.to_thread(
            self.consolidate, memory, max_loss_fraction=max_loss_fraction
        )

    def _locally(self, memory: Any, max_loss_fraction: float) -> ConsolidationResult:
        store, fieldmap = writable_store(memory)
        policy = NAMED_POLICIES[self.options.policy]
        # An invalid threshold keeps the policy's: the Consolidator rejects the pass with why.
        with contextlib.suppress(ValueError):
            threshold = validate_loss_threshold(max_loss_fraction)
            policy = dataclasses.replace(policy, max_loss_fraction=threshold)
        result = Consolidator(policy, fieldmap=fieldmap).consolidate(
            store, max_loss_fraction=max_loss_fraction
        )
        result.context["mode"] = "local"
        return result

    # ----- triggers -------------------------------------------------------------------------

    def on_config(self, config: dict[str, Any]) -> dict[str, Any]:
        """Take PraisonAI's options for this plugin (:class:`PluginOptions` keys); a bad option
        raises ``ValueError`` (PraisonAI logs it) and leaves the options as they were."""
        self.options = PluginOptions.from_mapping(config or {}, self.options)
        if self._timer is not None:
            self._timer.stop()
            self._timer = None
        self._ensure_timer()
        return config

    def on_shutdown(self) -> None:
        """Stop the timer (a pass already running finishes)."""
        if self._timer is not None:
            self._timer.stop()
            self._timer = None

    def watch(self, agent: Any) -> None:
        """Consolidate ``agent``'s memory (``agent._memory_instance``) on the triggers. Agents
        are told apart by ``agent.name``, as PraisonAI's hooks name them. ``ValueError`` for
        an agent without memory."""
        if getattr(agent, "_memory_instance", None) is None:
            name = getattr(agent, "name", agent)
            raise ValueError(f"agent {name!r} has no memory to consolidate")
        with self._lock:
            self._agents[str(agent.name)] = agent
            self._turns.setdefault(str(agent.name), 0)
        self._ensure_timer()

    def unwatch(self, agent: Any) -> None:
        """Stop consolidating ``agent`` (by name)."""
        with self._lock:
            self._agents.pop(str(getattr(agent, "name", agent)), None)

    def after_agent(self, response: str, context: dict[str, Any]) -> str:
        """Count a turn of a watched agent; start its pass every ``every_turns`` turns.
        Returns ``response`` unchanged (only ``context["agent_name"]`` is read)."""
        name = str((context or {}).get("agent_name") or "")
        n = self.options.every_turns
        with self._lock:
            if n <= 0 or name not in self._agents:
                return response
            self._turns[name] = self._turns.get(name, 0) + 1
            due = self._turns[name] >= n
            if due:
                self._turns[name] = 0
        if due:
            self.trigger(name)
        return response

    def trigger(self, name: str | None = None) -> list[str]:
        """Start a background pass for the watched agent ``name`` (all when ``None``) unless
        one is running for it; returns the names started."""
        started = []
        with self._lock:
            names = [name] if name is not None else sorted(self._agents)
            for agent_name in names:
                agent = self._agents.get(agent_name)
                busy = self._running.get(agent_name)
                if agent is None or (busy is not None and busy.is_alive()):
                    continue
                thread = threading.Thread(
                    target=self._run,
                    args=(agent_name, agent),
                    name=f"memoryadmin-consolidate-{agent_name}",
                    daemon=True,
                )
                self._running[agent_name] = thread
                started.append(agent_name)
                thread.start()
        return started

    def _run(self, name: str, agent: Any) -> None:
        try:
            result = self.consolidate(
                agent._memory_instance, max_loss_fraction=self.options.max_loss_fraction
            )
        except Exception as exc:  # a background pass must never take the agent down
            self.errors[name] = f"{type(exc).__name__}: {exc}"
            log.warning("memoryadmin: consolidation of agent %r failed: %s", name, exc)
            return
        self.results[name] = result
        self.errors.pop(name, None)
        log.info(
            "memoryadmin: consolidated agent %r: merged %d, promoted %d, pruned %d, %s",
            name,
            result.merged,
            result.promoted,
            result.pruned,
            f"rejected ({result.reason})" if result.rejected else "applied",
        )

    def wait(self, timeout: float | None = None) -> bool:
        """Join the running passes; ``True`` when none is left running."""
        deadline = None if timeout is None else time.monotonic() + timeout
        for thread in list(self._running.values()):
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            thread.join(remaining)
        return not any(t.is_alive() for t in self._running.values())

    def _ensure_timer(self) -> None:
        with self._lock:
            if self._timer is None and self.options.cron and self._agents:
                self._timer = _CronTimer(self.options.cron, self.trigger)
                self._timer.start()


class _CronTimer:
    """A daemon thread that calls ``fire()`` at each time of ``cron`` until :meth:`stop`."""

    def __init__(self, cron: str, fire: Callable[[], Any]) -> None:
        self.cron = cron
        self.fire = fire
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="memoryadmin-timer", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _loop(self) -> None:
        schedule = croniter(self.cron, time.time())
        while not self._stop.is_set():
            delay = schedule.get_next(float) - time.time()
            if self._stop.wait(max(0.0, delay)):
                return
            try:
                self.fire()
            except Exception as exc:  # keep the timer alive
                log.warning("memoryadmin: the consolidation timer failed: %s", exc)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("memoryadmin")
    except PackageNotFoundError:
        return "0.0.0"
