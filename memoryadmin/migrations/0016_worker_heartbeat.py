# The worker's heartbeat, read by /healthz.

import django.utils.timezone
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('console', '0015_decision'),
    ]

    operations = [
        migrations.CreateModel(
            name='WorkerHeartbeat',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('worker', models.CharField(help_text='"host:pid"', max_length=200, unique=True)),
                ('beat_at', models.DateTimeField(default=django.utils.timezone.now)),
            ],
        ),
    ]
