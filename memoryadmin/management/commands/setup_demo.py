"""``manage.py setup_demo``: roles, demo users and demo agents, so ``make run`` shows something.

Idempotent: users keep their passwords once created (the printed password is the one set at
creation), agents are created once, and a demo proposal is requested only for an agent that has
no pass yet.

Chroma: ``make run`` runs this *before* honcho starts the Chroma server, so when no server answers
on ``CHROMA_HOST:CHROMA_PORT`` (and the host is local) the command starts a temporary
``chroma run --path $CHROMA_PATH`` on that port, seeds through the same ``HttpClient`` code path
the web and the worker use, and stops it. (A ``PersistentClient`` on the directory would also do
for a single process, but going through the server keeps one client factory and one on-disk
format writer.)
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth.models import Group, User
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from memoryadmin.agents.models import Agent
from memoryadmin.agents.services.agents import agent_create
from memoryadmin.core import stores
from memoryadmin.ops.services import demo
from memoryadmin.proposals.models import Pass
from memoryadmin.proposals.services.passes import pass_request

DEMO_USERS = (("operator", "admin"), ("reviewer", "reviewer"), ("viewer", "viewer"))

DEMO_SLUG = "demo-assistant"
DEMO_MEMORIES = [
    "The user prefers answers in British English.",
    "The user prefers answers in British English.",
    "The user's daughter Mia starts primary school in September.",
    "The user's daughter Mia starts primary school in September.",
    "The user is training for the Berlin marathon in late September.",
    "The user is vegetarian and avoids fish.",
    "The user works as a data engineer at a logistics company.",
    "The user's favourite author is Ursula K. Le Guin.",
    "The user drives a 2019 Toyota Corolla hybrid.",
    "The user is learning Portuguese on weekday mornings.",
    "The user's partner is called Sam and is a nurse.",
    "The user asked for a reminder to renew their passport.",
    "The user keeps sourdough starter in the fridge.",
    "The user plays five-a-side football on Wednesdays.",
    "The user's laptop is a ThinkPad X1 running Debian.",
    "The user booked a dentist appointment for a Tuesday in May.",
    "The user dislikes phone calls and prefers email.",
    "The user grew up in Leeds.",
    "The user's bicycle is a folding Brompton.",
    "The user is saving for a trip to Japan next year.",
    "The user had a cold last week.",
]


def _chroma_binary() -> str:
    local = Path(sys.executable).with_name("chroma")
    return str(local) if local.exists() else (shutil.which("chroma") or "chroma")


@contextlib.contextmanager
def chroma_available(stdout: Any) -> Iterator[None]:
    """Yield with a Chroma server answering; start a temporary local one when none does."""
    if settings.CHROMA_MODE == "ephemeral":
        yield
        return
    try:
        stores.get_client()
        yield
        return
    except stores.StoreUnavailable:
        if settings.CHROMA_HOST not in ("127.0.0.1", "localhost", "::1"):
            raise
    path = Path(settings.CHROMA_PATH)
    path.mkdir(parents=True, exist_ok=True)
    cmd = [
        _chroma_binary(),
        "run",
        "--path",
        str(path),
        "--host",
        settings.CHROMA_HOST,
        "--port",
        str(settings.CHROMA_PORT),
    ]
    stdout.write(f"starting a temporary Chroma server: {' '.join(cmd)}")
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while True:
            stores.reset_client_cache()
            try:
                stores.get_client()
                break
            except stores.StoreUnavailable:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise CommandError("The temporary Chroma server did not start.") from None
                time.sleep(0.5)
        yield
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        stores.reset_client_cache()


def seed_builtin_demo(stdout: Any) -> None:
    """One small demo agent with duplicates and a stale memory, and a pending proposal.

    21 memories: two exact duplicate pairs (2 merges) and one year-old note of importance 0.1
    (1 prune): 5 of 21 originals leave, loss 0.238, under the default threshold 0.25.
    """
    from consolidation import MemoryRecord
    from consolidation.adapters.embedder import get_default_embedder

    agent = Agent.objects.filter(slug=DEMO_SLUG).first()
    if agent is None:
        collection = "memoryadmin-demo-assistant"
        agent = agent_create(
            name="Demo assistant",
            slug=DEMO_SLUG,
            collection_name=collection,
            attach=stores.collection_exists(collection),
            schedule_enabled=False,
            description="A personal assistant's memory with a few duplicates and a stale note.",
        )
        store = stores.get_store(agent)
        if store.count() == 0:
            now = timezone.now()
            vectors = get_default_embedder().embed(DEMO_MEMORIES)
            records = []
            for i, (text, vec) in enumerate(zip(DEMO_MEMORIES, vectors, strict=True)):
                stale = text.endswith("had a cold last week.")
                created = now - timedelta(days=400 if stale else 3 + i)
                meta = {"created_at": created.isoformat(), "importance": 0.1 if stale else 0.6}
                records.append(MemoryRecord(f"demo-{i:03d}", text, vec, meta))
            store.upsert(records)
        stdout.write(f"demo agent {agent.slug}: {store.count()} memories")
    if not agent.passes.exists():
        run = pass_request(agent=agent, trigger=Pass.Trigger.CLI, actor="cli", run_inline=True)
        run.refresh_from_db()
        stdout.write(f"demo pass #{run.pk}: {run.status} ({run.progress_label})")


class Command(BaseCommand):
    help = (
        "Create the roles, the demo users (operator/reviewer/viewer) and demo agents (idempotent)."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        call_command("setup_roles", stdout=self.stdout)
        password = settings.MEMORYADMIN_DEMO_PASSWORD
        users = []
        for username, role in DEMO_USERS:
            user = User.objects.filter(username=username).first()
            if user is None:
                user = User.objects.create_user(username, f"{username}@example.org", password)
                created = "created"
            else:
                created = "exists"
            user.groups.add(Group.objects.get(name=role))
            if username == "operator" and not user.is_staff:
                user.is_staff = True  # may open the read-only Django admin
                user.save(update_fields=["is_staff"])
            users.append(f"{username} ({role}, {created})")
        with chroma_available(self.stdout):
            demo.seed_demo_agents(stdout=self.stdout)
        # The logins come last: `make run` prints them just before the servers' own output, so
        # they are on screen when the console is ready, not scrolled away by the seeding lines.
        port = settings.WEB_PORT
        self.stdout.write(f"demo users: {', '.join(users)}")
        self.stdout.write(
            f"log in at http://127.0.0.1:{port}/ as 'operator' (admin), 'reviewer' or 'viewer', "
            f"each with password {password!r} (unless you changed it; set "
            "MEMORYADMIN_DEMO_PASSWORD before the first run)"
        )
