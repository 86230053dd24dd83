"""``manage.py sync_schedules``: make every agent's django-q2 schedule match the agent."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from memoryadmin.agents.models import Agent
from memoryadmin.agents.services.schedules import schedules_sync_all


class Command(BaseCommand):
    help = "Create, update or remove the django-q2 Schedule of every agent (idempotent)."

    def handle(self, *args: Any, **options: Any) -> None:
        enabled = schedules_sync_all()
        total = Agent.objects.count()
        self.stdout.write(
            f"schedules synced: {enabled} enabled, {total - enabled} paused, {total} agents"
        )
