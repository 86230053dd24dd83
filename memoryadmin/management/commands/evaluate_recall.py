"""``manage.py evaluate_recall AGENT [--k 10] [--json]``: recall figures of the live store."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand

from memoryadmin.agents.selectors.probes import recall_evaluate
from memoryadmin.core.errors import ServiceError
from memoryadmin.management.commands._cli import bad_input, failed, get_agent


class Command(BaseCommand):
    help = (
        "Answer recall@k (share of probe queries whose answer's content words are mostly found in "
        "the top-k retrieved memories), context size (mean characters of those k texts) and "
        "evidence recall@k (turns and observations only) of an agent's live store."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("agent", help="agent slug")
        parser.add_argument(
            "--k", type=int, default=None, help="default: the policy's recall_k (10)"
        )
        parser.add_argument("--json", action="store_true", help="print one JSON object")

    def handle(self, *args: Any, **opts: Any) -> None:
        agent = get_agent(opts["agent"])
        if opts["k"] is not None and opts["k"] < 1:
            raise bad_input(f"--k must be at least 1, got {opts['k']}")
        try:
            report = recall_evaluate(agent=agent, k=opts["k"])
        except ValueError as exc:
            raise bad_input(str(exc)) from None
        except ServiceError as exc:
            raise failed(str(exc)) from None
        d = {"agent": agent.slug, **report.to_dict()}
        if opts["json"]:
            self.stdout.write(json.dumps(d))
            return
        if not report.probes:
            self.stdout.write(
                f"{agent.slug}: {report.entries:,} memories, no probe queries — nothing to measure."
            )
            return
        ev = "n/a" if report.evidence_recall is None else f"{report.evidence_recall:.3f}"
        self.stdout.write(
            f"{agent.slug}: {report.entries:,} memories, {report.probes:,} probes — "
            f"answer recall@{report.k} {report.answer_recall:.3f}, "
            f"context {report.context_chars:,.0f} chars, "
            f"evidence recall@{report.k} {ev} ({report.evidence_probes:,} probes with evidence)"
        )
