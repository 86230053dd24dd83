# Notifications: channels, subscriptions, the admin's defaults, notifications and deliveries.

import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models

import memoryadmin.notifications.models


class Migration(migrations.Migration):

    dependencies = [
        ('console', '0018_forget_requests'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='Notification',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('key', models.CharField(max_length=200, unique=True)),
                ('event', models.CharField(choices=[('proposal_waiting', 'A proposal waits for review'), ('guard_rejected', 'A pass was rejected by a guard'), ('pass_failed', 'A pass failed'), ('stuck', 'An apply or import is stuck'), ('waiting_long', 'A proposal has waited longer than the set hours')], max_length=20)),
                ('summary', models.CharField(max_length=300)),
                ('data', models.JSONField(blank=True, default=dict)),
                ('test', models.BooleanField(default=False)),
                ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('agent', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='notifications', to='console.agent')),
                ('run', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='notifications', to='console.pass')),
            ],
            options={
                'ordering': ['-created_at', '-id'],
            },
        ),
        migrations.CreateModel(
            name='NotificationChannel',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('kind', models.CharField(choices=[('email', 'E-mail'), ('webhook', 'Webhook')], max_length=8)),
                ('target', models.CharField(help_text='The e-mail address or the webhook URL', max_length=2000)),
                ('secret', models.CharField(blank=True, help_text="The webhook's HMAC key", max_length=128)),
                ('enabled', models.BooleanField(default=True)),
                ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('user', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='notification_channels', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'ordering': ['user_id', 'kind', 'id'],
            },
        ),
        migrations.CreateModel(
            name='NotificationDefaults',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('events', models.JSONField(default=memoryadmin.notifications.models.all_events)),
                ('subscribe_new_agents', models.BooleanField(default=False)),
                ('waiting_hours', models.PositiveIntegerField(default=24)),
                ('updated_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('updated_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'verbose_name_plural': 'notification defaults',
            },
        ),
        migrations.CreateModel(
            name='Delivery',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('status', models.CharField(choices=[('pending', 'Pending'), ('sending', 'Sending'), ('retrying', 'Retrying'), ('sent', 'Sent'), ('failed', 'Failed')], default='pending', max_length=10)),
                ('attempts', models.PositiveIntegerField(default=0)),
                ('attempts_log', models.JSONField(blank=True, default=list)),
                ('last_error', models.TextField(blank=True)),
                ('next_attempt_at', models.DateTimeField(blank=True, null=True)),
                ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('sent_at', models.DateTimeField(blank=True, null=True)),
                ('notification', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='deliveries', to='console.notification')),
                ('channel', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='deliveries', to='console.notificationchannel')),
            ],
            options={
                'verbose_name_plural': 'deliveries',
                'ordering': ['-created_at', '-id'],
                'constraints': [models.UniqueConstraint(fields=('notification', 'channel'), name='one_delivery_per_channel')],
            },
        ),
        migrations.CreateModel(
            name='Subscription',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('events', models.JSONField(default=memoryadmin.notifications.models.all_events)),
                ('updated_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('agent', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='subscriptions', to='console.agent')),
                ('user', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='notification_subscriptions', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'constraints': [models.UniqueConstraint(fields=('user', 'agent'), name='one_subscription_per_agent')],
            },
        ),
    ]
