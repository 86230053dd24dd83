"""Standing decisions; the operation's signature; auto_apply becomes off | safe | all.

A former ``auto_apply = true`` becomes ``"safe"`` (the safer reading: only the operations that
pass every gate apply on their own), ``false`` becomes ``"off"``.
"""

import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models

TRUE = {"1", "true", "t", "True", "TRUE", "yes", "on"}


def modes_from_booleans(apps, schema_editor):
    """The boolean as text after the column changed type ("1"/"0" on SQLite, "true"/"false" on
    PostgreSQL) → ``safe`` / ``off``."""
    Agent = apps.get_model("console", "Agent")
    for pk, value in Agent.objects.values_list("pk", "auto_apply"):
        mode = "safe" if str(value).strip() in TRUE else "off"
        Agent.objects.filter(pk=pk).update(auto_apply=mode)


def booleans_from_modes(apps, schema_editor):
    """Reverse: ``safe`` / ``all`` → "1", ``off`` → "0" (cast back to a boolean next)."""
    Agent = apps.get_model("console", "Agent")
    for pk, value in Agent.objects.values_list("pk", "auto_apply"):
        Agent.objects.filter(pk=pk).update(auto_apply="1" if value in ("safe", "all") else "0")


class Migration(migrations.Migration):

    dependencies = [
        ('console', '0014_agent_archive_days'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name='operation',
            name='signature',
            field=models.CharField(blank=True, help_text='consolidation.decisions.operation_signature as planned (before edits): the same operation in a later pass has the same one', max_length=64),
        ),
        migrations.AlterField(
            model_name='agent',
            name='auto_apply',
            field=models.CharField(choices=[('off', 'Off'), ('safe', 'Safe'), ('all', 'All')], default='off', max_length=8),
        ),
        migrations.RunPython(modes_from_booleans, booleans_from_modes),
        migrations.CreateModel(
            name='Decision',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('kind', models.CharField(choices=[('keep_apart', 'Keep Apart'), ('keep', 'Keep'), ('rejected_plan', 'Rejected Plan'), ('conflict_pick', 'Conflict Pick')], max_length=16)),
                ('memories', models.JSONField(blank=True, default=list)),
                ('payload', models.JSONField(blank=True, default=dict)),
                ('note', models.TextField(blank=True)),
                ('created_actor', models.CharField(blank=True, max_length=150)),
                ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('revoked_at', models.DateTimeField(blank=True, null=True)),
                ('revoked_actor', models.CharField(blank=True, max_length=150)),
                ('revoke_note', models.TextField(blank=True)),
                ('held_back', models.PositiveIntegerField(default=0)),
                ('agent', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='decisions', to='console.agent')),
                ('created_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('operation', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='decisions', to='console.operation')),
                ('revoked_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('run', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='decisions', to='console.pass')),
            ],
            options={
                'ordering': ['-created_at', '-id'],
                'indexes': [models.Index(fields=['agent', 'revoked_at'], name='console_dec_agent_i_b9c6e4_idx')],
            },
        ),
    ]
