"""Agents plan within the loss budget by default (``Policy.trim_to_guard`` now defaults to true,
issue 10): stored policies that carry the old default ``false`` get ``true``, so existing agents
converge over scheduled passes like new ones. An operator can still switch it off per agent."""

from django.db import migrations


def forwards(apps, schema_editor) -> None:
    Agent = apps.get_model("console", "Agent")
    for agent in Agent.objects.all():
        if (agent.policy or {}).get("trim_to_guard") is False:
            agent.policy = {**agent.policy, "trim_to_guard": True}
            agent.save(update_fields=["policy"])


class Migration(migrations.Migration):

    dependencies = [
        ("console", "0007_rejected_status"),
    ]

    operations = [migrations.RunPython(forwards, migrations.RunPython.noop)]
