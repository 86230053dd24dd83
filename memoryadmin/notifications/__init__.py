"""Notifications: channels, per-agent subscriptions, the admin's defaults, the events a pass
emits and the periodic checks, e-mail and signed-webhook deliveries retried by django-q2."""
