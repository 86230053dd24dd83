"""Demo agents for a first look at the console: ``seed_demo_agents()``.

Three agents — a support assistant, a coding assistant and a personal assistant — with stores of
500–2,000 memories written for the demo (generated deterministically from the templates below;
nothing is copied from LoCoMo). Each store shows every operation:

- exact duplicates (the same fact written twice) and paraphrased duplicates (cosine ≥ 0.90 with
  MiniLM, e.g. "is on the Enterprise plan" / "uses the Enterprise plan") → merge;
- contradictions and updates ("lives in Boston" → later "lives in Denver"; "works at X" →
  "no longer works at X") → reconcile;
- stale small talk (a year old, importance 0.1) → prune;
- durable facts (seen in 3+ sessions, importance 0.9, accessed often) → promote;
- pinned memories (never pruned or merged, I-6);
- probe queries whose answers live in the durable facts (the recall check).

After seeding, every demo agent has a pending proposal, and the personal assistant also has an
earlier pass rejected by the loss guard (run once with ``max_loss_fraction`` 0.02 and the
budget option off). Texts and ids
are deterministic; ``created_at`` is relative to the seeding time so ages look natural.
Idempotent: an existing demo agent is left as it is (no rewrite, no second proposal).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from consolidation import MemoryRecord
from memoryadmin.agents.models import Agent, ProbeQuery
from memoryadmin.agents.services.agents import agent_create, agent_update
from memoryadmin.core import stores
from memoryadmin.core.services import store_sampled
from memoryadmin.ops.services.demo_texts import (
    CITIES,
    COMPANIES,
    FIRST,
    FRIENDS,
    LANGS,
    LAST,
    PLANS,
    PROJECTS,
    SMALLTALK,
)
from memoryadmin.proposals.models import Pass
from memoryadmin.proposals.services.passes import pass_request, pass_run

__all__ = ["DEMO_AGENTS", "seed_demo_agents"]


@dataclass
class _Spec:
    slug: str
    name: str
    description: str
    facts: Callable[[random.Random], list[tuple[str, str, dict[str, Any]]]]
    probes: list[tuple[str, str]] = field(default_factory=list)
    auto_apply: str = "off"  # the coding assistant shows auto-apply "safe"


def _person(i: int) -> str:
    return f"{FIRST[i % len(FIRST)]} {LAST[(i // len(FIRST)) % len(LAST)]}"


def _support(rng: random.Random) -> list[tuple[str, str, dict[str, Any]]]:
    out: list[tuple[str, str, dict[str, Any]]] = []
    for i, co in enumerate(COMPANIES):
        who = _person(i)
        plan = PLANS[i % len(PLANS)]
        city = CITIES[i % len(CITIES)]
        k = f"c{i:02d}"
        out += [
            (f"{k}-plan", f"{co} is on the {plan} plan.", {}),
            (f"{k}-contact", f"{who} is the main contact at {co}.", {}),
            (f"{k}-channel", f"{who} at {co} prefers to be contacted by email.", {}),
            (f"{k}-tz", f"{co}'s team works from {city}.", {}),
            (f"{k}-seats", f"{co} has {10 + 7 * i} licensed seats.", {}),
            (
                f"{k}-sso",
                f"{co} signs in with single sign-on through Okta."
                if i % 2
                else f"{co} signs in with passwords and two-factor codes.",
                {},
            ),
            (f"{k}-ticket", f"{co} reported slow CSV exports in ticket #{4100 + i}.", {}),
            (
                f"{k}-renewal",
                f"{co}'s contract renews in {['January', 'April', 'July', 'October'][i % 4]}.",
                {},
            ),
            (
                f"{k}-billing",
                f"{co} pays by {'invoice' if i % 3 else 'credit card'} every month.",
                {},
            ),
            (f"{k}-region", f"{co}'s data is hosted in the {'EU' if i % 2 else 'US'} region.", {}),
            (f"{k}-api", f"{co} calls the reporting API about {200 * (i + 1)} times a day.", {}),
            (f"{k}-feature", f"{co} asked for a dark mode in the dashboard.", {}),
            (
                f"{k}-integration",
                f"{co} connects the product to {['Slack', 'Teams', 'Jira', 'Zendesk'][i % 4]}.",
                {},
            ),
        ]
        if i % 3 == 0:  # paraphrased duplicate
            out.append((f"{k}-plan-p", f"{co} uses the {plan} plan.", {}))
        if i % 4 == 0:  # exact duplicate
            out.append((f"{k}-contact-dup", f"{who} is the main contact at {co}.", {}))
        if i % 5 == 0:  # update: the contact moved city (changed value)
            out.append((f"{k}-lives-old", f"{who} lives in {city}.", {"age": 40}))
            out.append(
                (f"{k}-lives-new", f"{who} lives in {CITIES[(i + 3) % len(CITIES)]}.", {"age": 2})
            )
        if i % 6 == 0:  # durable fact worth promoting
            out.append(
                (
                    f"{k}-sla",
                    f"{co} has a 99.9% uptime SLA with a four-hour response time.",
                    {"durable": True},
                )
            )
        for j in range(2 if i % 2 == 0 else 1):
            text = SMALLTALK[(i + j) % len(SMALLTALK)].format(who=who, city=city)
            out.append((f"{k}-small-{j}", text, {"stale": True}))
    out += [
        (
            "pin-keys",
            "Never ask customers to paste API keys into chat; send them to the security portal.",
            {"pinned": True},
        ),
        (
            "pin-refunds",
            "Refunds above 500 euros need approval from a team lead.",
            {"pinned": True},
        ),
        (
            "pin-outage",
            "During an outage, link customers to status.example.com instead of guessing.",
            {"pinned": True},
        ),
    ]
    return out


def _coding(rng: random.Random) -> list[tuple[str, str, dict[str, Any]]]:
    out: list[tuple[str, str, dict[str, Any]]] = []
    projects = PROJECTS
    for i, proj in enumerate(projects):
        lang = LANGS[i % len(LANGS)]
        k = f"p{i:02d}"
        runner = "pytest" if lang == "Python" else "the standard test runner"
        db = ["PostgreSQL", "SQLite", "Redis", "DynamoDB"][i % 4]
        width = [88, 100, 120][i % 3]
        out += [
            (f"{k}-lang", f"The {proj} project is written in {lang}.", {}),
            (f"{k}-test", f"The {proj} tests run with {runner}.", {}),
            (
                f"{k}-ci",
                f"The {proj} project deploys from the main branch through GitHub Actions.",
                {},
            ),
            (f"{k}-db", f"The {proj} service stores its data in {db}.", {}),
            (f"{k}-owner", f"{_person(i)} reviews pull requests for {proj}.", {}),
            (
                f"{k}-lint",
                f"The {proj} repository enforces a line length of {width} characters.",
                {},
            ),
            (f"{k}-port", f"The {proj} dev server listens on port {3000 + i}.", {}),
            (f"{k}-bug", f"A flaky test in {proj} fails when the clock crosses midnight.", {}),
            (f"{k}-env", f"The {proj} project reads its secrets from environment variables.", {}),
            (f"{k}-node", f"The {proj} build needs version {16 + i % 5} of the toolchain.", {}),
            (f"{k}-dep", f"The {proj} project pins its dependencies in a lock file.", {}),
        ]
        if i % 3 == 0:
            out.append((f"{k}-lang-p", f"The {proj} project uses {lang}.", {}))
        if i % 4 == 1:
            out.append(
                (
                    f"{k}-ci-dup",
                    f"The {proj} project deploys from the main branch through GitHub Actions.",
                    {},
                )
            )
        if i % 5 == 0:
            out.append(
                (f"{k}-uses-old", f"The {proj} project uses Black for formatting.", {"age": 45})
            )
            out.append(
                (
                    f"{k}-uses-new",
                    f"The {proj} project no longer uses Black for formatting.",
                    {"age": 3},
                )
            )
        if i % 8 == 0:
            out.append(
                (
                    f"{k}-arch",
                    f"The {proj} service follows a hexagonal architecture with ports and adapters.",
                    {"durable": True},
                )
            )
        out.append(
            (f"{k}-small", f"The user said the {proj} standup ran long today.", {"stale": True})
        )
    out += [
        (
            "pref-tabs",
            "The user prefers spaces over tabs and four-space indentation.",
            {"durable": True},
        ),
        ("pref-tabs-p", "The user likes four-space indentation with spaces rather than tabs.", {}),
        (
            "pref-commits",
            "The user writes commit messages in the imperative mood.",
            {"durable": True},
        ),
        ("pin-prod", "Never run migrations against production without a backup.", {"pinned": True}),
        ("pin-secrets", "Never commit secrets; use the vault CLI to read them.", {"pinned": True}),
    ]
    return out


def _personal(rng: random.Random) -> list[tuple[str, str, dict[str, Any]]]:
    out: list[tuple[str, str, dict[str, Any]]] = []
    for i in range(45):
        who = FRIENDS[i]
        city = CITIES[i % len(CITIES)]
        k = f"f{i:02d}"
        rel = ["college friend", "cousin", "colleague", "neighbour", "climbing partner"][i % 5]
        month = ["March", "June", "September", "December"][i % 4]
        food = (
            "vegetarian"
            if i % 3 == 0
            else "allergic to shellfish"
            if i % 3 == 1
            else "fond of spicy food"
        )
        gift = ["book", "plant", "scarf", "board game"][i % 4]
        hobby = ["bouldering", "sailing", "pottery", "chess", "running"][i % 5]
        out += [
            (f"{k}-rel", f"{who} is a {rel} of the user.", {}),
            (f"{k}-bday", f"{who}'s birthday is on {1 + i % 28} {month}.", {}),
            (f"{k}-city", f"{who} is based in {city}.", {}),
            (f"{k}-food", f"{who} is {food}.", {}),
            (f"{k}-gift", f"Last year the user gave {who} a {gift}.", {}),
            (f"{k}-kids", f"{who} has {i % 4} children.", {}),
            (f"{k}-hobby", f"{who} enjoys {hobby} on weekends.", {}),
            (f"{k}-phone", f"{who} prefers voice messages to long texts.", {}),
            (f"{k}-met", f"The user met {who} in {2010 + i % 12}.", {}),
        ]
        if i % 3 == 0:
            out.append(
                (f"{k}-bday-p", f"{who} celebrates their birthday on {1 + i % 28} {month}.", {})
            )
        if i % 4 == 0:
            out.append((f"{k}-city-dup", f"{who} is based in {city}.", {}))
        if i % 5 == 2:
            place = COMPANIES[i % len(COMPANIES)]
            out.append((f"{k}-work-old", f"{who} works at {place}.", {"age": 60}))
            out.append((f"{k}-work-new", f"{who} no longer works at {place}.", {"age": 5}))
        out.append(
            (
                f"{k}-small-0",
                SMALLTALK[i % len(SMALLTALK)].format(who=who, city=city),
                {"stale": True},
            )
        )
    out += [
        (
            "me-dentist",
            "The user's dentist appointments are with Dr. Okafor at the Elm Street clinic.",
            {"durable": True},
        ),
        (
            "me-gym",
            "The user goes to the gym on Tuesdays and Thursdays before work.",
            {"durable": True},
        ),
        (
            "me-flights",
            "The user prefers aisle seats and avoids red-eye flights.",
            {"durable": True},
        ),
        (
            "me-flights-p",
            "On flights the user prefers an aisle seat and avoids overnight red-eyes.",
            {},
        ),
        ("pin-allergy", "The user is allergic to penicillin.", {"pinned": True}),
        (
            "pin-emergency",
            "The user's emergency contact is their sister Mira, reachable on the home number.",
            {"pinned": True},
        ),
    ]
    return out


DEMO_AGENTS: list[_Spec] = [
    _Spec(
        "demo-support",
        "Support assistant",
        "Customer-support agent: accounts, plans, contacts and tickets of about forty customers.",
        _support,
        [
            ("Which plan is Acme Corp on?", "Starter"),
            ("Who is the main contact at Globex?", "Omar Lee"),
            ("What uptime does Acme Corp's SLA promise?", "99.9% uptime four-hour response"),
            ("What should customers do with API keys?", "security portal"),
            ("Who must approve large refunds?", "team lead"),
        ],
    ),
    _Spec(
        "demo-coding",
        "Coding assistant",
        (
            "Pair-programming agent: forty projects, their stacks, conventions and the user's "
            "preferences."
        ),
        _coding,
        [
            ("Which language is atlas-api written in?", "Python"),
            ("How does the user like indentation?", "four-space spaces"),
            ("What architecture does atlas-api follow?", "hexagonal ports adapters"),
            ("What port does the beacon-api dev server use?", "3001"),
            ("How should commit messages be written?", "imperative mood"),
        ],
        auto_apply="safe",
    ),
    _Spec(
        "demo-personal",
        "Personal assistant",
        "Personal assistant: friends and family, birthdays, preferences and routines.",
        _personal,
        [
            ("Which days does the user go to the gym?", "Tuesdays Thursdays"),
            ("What is the user allergic to?", "penicillin"),
            ("Which seat does the user prefer on flights?", "aisle"),
            ("Who is the user's dentist?", "Dr. Okafor"),
            ("Who is the user's emergency contact?", "sister Mira"),
        ],
    ),
]


def _records(spec: _Spec, now: datetime) -> list[MemoryRecord]:
    rng = random.Random(spec.slug)  # deterministic per agent
    rows = spec.facts(rng)
    texts = [t for _, t, _ in rows]
    from consolidation.adapters.embedder import get_default_embedder

    vecs = get_default_embedder().embed(texts)
    out = []
    for (key, text, flags), vec in zip(rows, vecs, strict=True):
        age = flags.get("age", rng.randint(1, 40))
        meta: dict[str, Any] = {
            "importance": round(rng.uniform(0.4, 0.7), 2),
            "session": rng.randint(1, 30),
            "access_count": rng.randint(0, 3),
        }
        if flags.get("stale"):
            age, meta["importance"], meta["layer"] = rng.randint(300, 420), 0.1, "episodic"
        else:
            meta["layer"] = "semantic"
        if flags.get("durable"):
            meta.update(
                importance=0.9,
                access_count=rng.randint(8, 30),
                session=sorted(rng.sample(range(1, 30), 4)),
            )
        if flags.get("pinned"):
            meta.update(pinned=True, importance=1.0)
        meta["created_at"] = (now - timedelta(days=age, hours=rng.randint(0, 23))).isoformat()
        meta["last_accessed_at"] = (
            now - timedelta(days=max(0, age - rng.randint(0, age)))
        ).isoformat()
        out.append(MemoryRecord(f"{spec.slug}:{key}", text, vec, meta))
    return out


def _run_pass(agent: Agent) -> Pass:

    run = pass_request(agent=agent, trigger=Pass.Trigger.OPERATOR, actor="demo", run_inline=True)
    run.refresh_from_db()
    if run.status == Pass.Status.QUEUED:
        run = pass_run(run=run)
    run.refresh_from_db()
    return run


def seed_demo_agents(stdout: Any = None, *, collection_prefix: str = "") -> list[Agent]:
    """Create the three demo agents with their stores, probes and passes; returns them.

    Idempotent: an agent whose slug exists is left untouched. ``stdout`` (optional, with
    ``write``) receives one line per agent. Raises ``StoreUnavailable`` when Chroma is down.
    """

    def say(line: str) -> None:
        if stdout is not None:
            stdout.write(line)

    now = timezone.now()
    agents = []
    for spec in DEMO_AGENTS:
        agent = Agent.objects.filter(slug=spec.slug).first()
        if agent is not None:
            say(f"{spec.name}: already seeded ({agent.slug})")
            agents.append(agent)
            continue
        collection = f"{collection_prefix}{spec.slug}"
        agent = agent_create(
            name=spec.name,
            slug=spec.slug,
            collection_name=collection,
            attach=stores.collection_exists(collection),
            description=spec.description,
            auto_apply=spec.auto_apply,
        )
        records = _records(spec, now)
        store = stores.get_store(agent)
        store.upsert(records)
        store_sampled(agent, store)
        with transaction.atomic():
            for n, (question, answer) in enumerate(spec.probes):
                ProbeQuery.objects.update_or_create(
                    agent=agent,
                    external_key=f"demo:{spec.slug}:{n}",
                    defaults={"question": question, "answer": answer},
                )
        if spec.slug == "demo-personal":
            # A pass under a strict loss guard without the budget option, rejected; then the
            # normal policy's proposal (within the budget).
            normal = dict(agent.policy or {})
            strict = {**normal, "max_loss_fraction": 0.02, "trim_to_guard": False}
            agent_update(agent=agent, policy=strict)
            rejected = _run_pass(agent)
            say(f"{spec.name}: pass #{rejected.pk} {rejected.status} (max_loss_fraction 0.02)")
            agent.refresh_from_db()
            agent_update(agent=agent, policy=normal)
            agent.refresh_from_db()
        run = _run_pass(agent)
        say(
            f"{spec.name}: {len(records):,} memories, {len(spec.probes)} probes; "
            f"pass #{run.pk} {run.status} "
            f"({run.entries_before:,} → {run.entries_after:,})"
        )
        auto = run.telemetry_data.auto_apply or {}
        if auto.get("waiting_pass"):  # auto-apply "safe" split the plan: name the waiting part
            say(
                f"{spec.name}: pass #{auto['waiting_pass']} proposed "
                f"({auto.get('waiting', 0):,} operations auto-apply left for a reviewer)"
            )
        agents.append(agent)
    return agents
