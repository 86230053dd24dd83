"""The django-q2 task functions moved from ``memoryadmin.console.tasks`` to ``memoryadmin.tasks``
when the console became domain packages: rename the stored schedules (per-agent passes,
recovery, archive purge, notification checks, delivery retries), so an existing deployment's
schedules keep running."""

from django.db import migrations

OLD = "memoryadmin.console.tasks."
NEW = "memoryadmin.tasks."


def rename(apps, schema_editor, old=OLD, new=NEW):
    Schedule = apps.get_model("django_q", "Schedule")
    for schedule in Schedule.objects.filter(func__startswith=old):
        schedule.func = new + schedule.func[len(old) :]
        schedule.save(update_fields=["func"])


def rename_back(apps, schema_editor):
    rename(apps, schema_editor, old=NEW, new=OLD)


class Migration(migrations.Migration):
    dependencies = [
        ("console", "0021_verbose_names_plural"),
        ("django_q", "0018_task_success_index"),
    ]

    operations = [migrations.RunPython(rename, rename_back)]
