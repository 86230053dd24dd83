"""Agents: create, edit, delete, attach a collection; their schedules (cron, django-q2) and recall
probes (probe queries and the recall check)."""
