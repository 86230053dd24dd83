"""A reviewer's "Reject" leads to the status "rejected" (was "dismissed"): status, audit
transitions and the audit verb use one word (issue 10)."""

from django.db import migrations, models


def rename(apps, old: str, new: str) -> None:
    Pass = apps.get_model("console", "Pass")
    AuditEvent = apps.get_model("console", "AuditEvent")
    Pass.objects.filter(status=old).update(status=new)
    AuditEvent.objects.filter(from_status=old).update(from_status=new)
    AuditEvent.objects.filter(to_status=old).update(to_status=new)
    AuditEvent.objects.filter(verb=old).update(verb=new)


def forwards(apps, schema_editor) -> None:
    rename(apps, "dismissed", "rejected")


def backwards(apps, schema_editor) -> None:
    rename(apps, "rejected", "dismissed")


class Migration(migrations.Migration):

    dependencies = [
        ("console", "0006_operation_kind_conflict"),
    ]

    operations = [
        migrations.AlterField(
            model_name="pass",
            name="status",
            field=models.CharField(
                choices=[
                    ("queued", "Queued"), ("running", "Running"), ("proposed", "Proposed"),
                    ("rejected_by_guard", "Rejected By Guard"), ("failed", "Failed"),
                    ("approved", "Approved"), ("applying", "Applying"), ("applied", "Applied"),
                    ("partially_applied", "Partially Applied"), ("rejected", "Rejected"),
                    ("stale", "Stale"), ("rolling_back", "Rolling Back"),
                    ("rolled_back", "Rolled Back"),
                ],
                default="queued",
                max_length=24,
            ),
        ),
        migrations.RunPython(forwards, backwards),
    ]
