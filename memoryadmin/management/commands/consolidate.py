"""``manage.py consolidate AGENT [--propose | --apply | --dry-run] [--policy NAME] [--json]``.

Runs a pass in the foreground (actor ``cli``):

- ``--propose`` (default): snapshot → plan → stored proposal → guards; review it in the console.
- ``--apply``: the same, then — when the guards pass — approve (actor ``cli``) and apply it now.
- ``--dry-run``: the same pass with its writes switched off (:func:`pass_plan`: the
  snapshot, checkpoint, distillation and guards of ``--propose``); nothing is stored and no
  pass is recorded.

With ``--json`` it prints exactly one JSON object (keys in :data:`KEYS`). Exit status: 0 when the
pass ran, whatever the verdict; 2 for bad input (unknown agent, unknown policy) with one line on
stderr; 1 when it could not run (Chroma down, another pass active).
"""

from __future__ import annotations

import json
import time
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand
from django.utils import timezone

from consolidation import NAMED_POLICIES, Policy
from consolidation.snapshot import llm_brief
from memoryadmin.core.errors import ServiceError
from memoryadmin.management.commands._cli import (
    bad_input,
    failed,
    get_agent,
    is_terminal,
    progress_bar,
)
from memoryadmin.proposals.models import Pass
from memoryadmin.proposals.selectors.passes import pass_summary, promoted_counts
from memoryadmin.proposals.services.apply import pass_apply
from memoryadmin.proposals.services.passes import pass_dry_run, pass_request, pass_run
from memoryadmin.proposals.services.review import pass_approve

KEYS = (
    "pass_id",
    "agent",
    "mode",
    "policy",
    "status",
    "entries_before",
    "entries_after",
    "merged",
    "promoted",
    "pruned",
    "reconciled",
    "loss_fraction",
    "max_loss_fraction",
    "guard_passed",
    "guard_reason",
    "recall_passed",
    "recall_reason",
    "recall_before",
    "recall_after",
    "context_chars_before",
    "context_chars_after",
    "llm",
    "seconds",
)
"""Keys of the ``--json`` object (the summary figures, plus agent/mode/policy and the recall guard's
verdict, and ``llm``: the model's requests, tokens, seconds and one sentence per LLM step, or
``null`` when nothing was sent to a model)."""


class Command(BaseCommand):
    help = (
        "Run a consolidation pass for an agent in the foreground: --propose (default) stores a "
        "reviewable proposal, --apply also approves and applies it when the guards pass, "
        "--dry-run only plans and measures. Named policies: "
        + ", ".join(sorted(NAMED_POLICIES))
        + "."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("agent", help="agent slug")
        mode = parser.add_mutually_exclusive_group()
        mode.add_argument("--propose", dest="mode", action="store_const", const="propose")
        mode.add_argument("--apply", dest="mode", action="store_const", const="apply")
        mode.add_argument("--dry-run", dest="mode", action="store_const", const="dry-run")
        parser.add_argument(
            "--policy",
            default=None,
            help=f"named policy ({', '.join(sorted(NAMED_POLICIES))}); default: the agent's",
        )
        parser.add_argument("--json", action="store_true", help="print exactly one JSON object")

    def handle(self, *args: Any, **opts: Any) -> None:
        agent = get_agent(opts["agent"])
        mode = opts["mode"] or "propose"
        if opts["policy"] is not None:
            if opts["policy"] not in NAMED_POLICIES:
                names = ", ".join(sorted(NAMED_POLICIES))
                raise bad_input(f"Unknown policy {opts['policy']!r}; named policies: {names}.")
            policy = NAMED_POLICIES[opts["policy"]]
        else:
            try:
                policy = agent.get_policy()
            except (ValueError, TypeError) as exc:
                raise bad_input(f"Agent {agent.slug!r} has an invalid policy: {exc}") from None
        show = is_terminal(self.stderr) and not opts["json"]
        t0 = time.perf_counter()
        try:
            if mode == "dry-run":
                out = self._dry_run(agent, policy, show)
            else:
                out = self._run(agent, policy, opts["policy"], mode == "apply", show)
        except ServiceError as exc:
            raise failed(str(exc)) from None
        out.update(
            agent=agent.slug,
            mode=mode,
            policy=opts["policy"] or "agent",
            seconds=round(time.perf_counter() - t0, 3),
        )
        out = {k: out.get(k) for k in KEYS}
        if opts["json"]:
            self.stdout.write(json.dumps(out))
        else:
            self.stdout.write(self._human(out))

    # ------------------------------------------------------------------------------------------

    def _dry_run(self, agent: Any, policy: Policy, show: bool) -> dict[str, Any]:
        """The pass as ``--propose`` would plan it (:func:`pass_plan`: same snapshot,
        checkpoint, distillation and guards), with nothing stored."""

        bar = progress_bar(100, "reading the store", show)
        done = [0]  # percent shown so far

        def progress(fraction: float, label: str) -> None:
            bar.set_description(label)
            bar.update(max(0, int(fraction * 100) - done[0]))
            done[0] = max(done[0], int(fraction * 100))

        figures = pass_dry_run(agent=agent, policy=policy, now=timezone.now(), progress=progress)
        bar.close()
        return {"pass_id": None, "status": "dry_run", **figures}

    def _run(
        self, agent: Any, policy: Policy, policy_name: str | None, apply: bool, show: bool
    ) -> dict[str, Any]:

        kwargs: dict[str, Any] = {}
        if policy_name is not None:
            kwargs.update(policy=policy, policy_name=policy_name)
        bar = progress_bar(4 if apply else 3, "planning", show)
        run = pass_request(
            agent=agent, trigger=Pass.Trigger.CLI, actor="cli", run_inline=True, **kwargs
        )
        run.refresh_from_db()
        if run.status == Pass.Status.QUEUED:  # inside an outer transaction on_commit has not run
            run = pass_run(run=run)
        run.refresh_from_db()
        bar.update()
        rc = run.recall or {}
        bar.update()
        if apply and run.status == Pass.Status.PROPOSED and rc.get("passed", True):
            bar.set_description("applying")
            run = pass_approve(run=run, user=None, note="approved with consolidate --apply")
            run = pass_apply(run=run)
            run.refresh_from_db()
        bar.update()
        bar.close()
        return {
            "pass_id": run.pk,
            "status": run.status,
            "entries_before": run.entries_before,
            "entries_after": run.entries_after,
            "merged": run.merged,
            "promoted": promoted_counts(pass_summary(run))[0],  # the pass page's figure
            "pruned": run.pruned,
            "reconciled": run.reconciled,
            "loss_fraction": run.loss_fraction,
            "max_loss_fraction": run.max_loss_fraction,
            "guard_passed": run.guard_passed,
            "guard_reason": run.guard_reason or run.reason or run.error,
            **self._recall_fields(rc),
            "llm": llm_brief({"llm": run.telemetry_data.llm}, settings.LLM_PRICES),
        }

    @staticmethod
    def _recall_fields(rc: dict[str, Any]) -> dict[str, Any]:
        return {
            "recall_passed": rc.get("passed"),
            "recall_reason": rc.get("reason"),
            "recall_before": rc.get("answer_recall_before"),
            "recall_after": rc.get("answer_recall_after"),
            "context_chars_before": rc.get("context_chars_before"),
            "context_chars_after": rc.get("context_chars_after"),
        }

    @staticmethod
    def _human(o: dict[str, Any]) -> str:
        def f(v: Any, fmt: str) -> str:
            return "n/a" if v is None else format(v, fmt)

        head = f"pass #{o['pass_id']}" if o["pass_id"] else "dry run"
        llm = o.get("llm") or {}
        t = llm.get("totals") or {}
        model = (
            [
                f"  model {llm.get('model')}: {t.get('requests', 0)} requests, "
                f"{t.get('tokens_in', 0):,} tokens in, {t.get('tokens_out', 0):,} out, "
                f"{t.get('seconds', 0)} s"
            ]
            + [f"  {part}: {llm[part]}" for part in ("judge", "distill") if llm.get(part)]
            if llm
            else []
        )
        return "\n".join(
            [
                f"{head} of {o['agent']}: {o['status']} ({o['seconds']:.1f} s)",
                f"  entries {o['entries_before']:,} → {o['entries_after']:,}: "
                f"merged {o['merged']}, "
                f"promoted {o['promoted']}, pruned {o['pruned']}, reconciled {o['reconciled']}",
                f"  loss {f(o['loss_fraction'], '.1%')} (max {f(o['max_loss_fraction'], '.1%')}); "
                f"guard {'passed' if o['guard_passed'] else 'failed'}: {o['guard_reason'] or ''}",
                f"  answer recall@10 {f(o['recall_before'], '.3f')} → "
                f"{f(o['recall_after'], '.3f')}; "
                f"context {f(o['context_chars_before'], ',.0f')} → "
                f"{f(o['context_chars_after'], ',.0f')} chars; "
                f"{o['recall_reason'] or ''}",
                *model,
            ]
        )
