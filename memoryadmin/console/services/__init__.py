"""Services: every write of the console, one module per domain (HackSoft style: services write,
selectors read).

Keyword-only ``<entity>_<verb>`` functions, typed, atomic where they write. Errors are
exceptions whose message is shown to the operator as is: :class:`~memoryadmin.console.errors.
ServiceError` and its subclasses, and ``ValueError`` for bad input (raised before anything is
written). Services import the ground (models, stores, validation, errors), the selectors and
each other, never a form or a view; :mod:`.common` (transitions, audit events, task names,
failpoints) imports no service. The grid of domains is in docs/ARCHITECTURE.md.

Lifecycle of a pass (the full list of transitions is in docs/ARCHITECTURE.md):
``queued → running → proposed | rejected_by_guard | failed``;
``proposed → approved → applying → applied | partially_applied``; ``proposed → rejected | stale``;
``applied | partially_applied → rolling_back → rolled_back``.
Every transition is a conditional ``UPDATE … WHERE status IN (…)`` plus an :class:`AuditEvent`
in one transaction, so two workers can never both move the same pass, and one active pass per
agent is the database constraint ``one_active_pass_per_agent`` (I-5).
"""
