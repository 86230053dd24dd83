"""Data migrations of the rejected status and the loss budget: "dismissed" becomes "rejected"
(0007) and stored policies plan within the loss budget (0008); stored django-q2 schedules follow
the tasks module (0022); an exclusion is one flag, the status (0026); a pass's figures are kept
once (0027)."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

pytestmark = pytest.mark.django_db(transaction=True)


def migrate(target: str):
    executor = MigrationExecutor(connection)
    executor.migrate([("console", target)])
    executor.loader.build_graph()
    return executor.loader.project_state([("console", target)]).apps


def test_it_renames_dismissed_to_rejected_and_turns_the_budget_on():
    old = migrate("0004_keep_archive_and_audit_on_agent_delete")
    Agent, Pass, AuditEvent = (old.get_model("console", m) for m in ("Agent", "Pass", "AuditEvent"))
    agent = Agent.objects.create(
        name="A",
        slug="a",
        collection_name="c-a",
        policy={"max_loss_fraction": 0.3, "trim_to_guard": False},
    )
    bare = Agent.objects.create(name="B", slug="b", collection_name="c-b", policy={})
    run = Pass.objects.create(agent=agent, trigger="operator", status="dismissed")
    AuditEvent.objects.create(
        agent=agent,
        run=run,
        actor="bob",
        verb="dismissed",
        from_status="proposed",
        to_status="dismissed",
    )
    try:
        new = migrate("0008_policy_within_budget")
        Agent, Pass, AuditEvent = (
            new.get_model("console", m) for m in ("Agent", "Pass", "AuditEvent")
        )
        assert Pass.objects.get(pk=run.pk).status == "rejected"
        event = AuditEvent.objects.get(run_id=run.pk)
        assert (event.verb, event.from_status, event.to_status) == (
            "rejected",
            "proposed",
            "rejected",
        )
        assert Agent.objects.get(pk=agent.pk).policy == {
            "max_loss_fraction": 0.3,
            "trim_to_guard": True,
        }
        assert Agent.objects.get(pk=bare.pk).policy == {}  # the default (on) applies

        back = migrate("0004_keep_archive_and_audit_on_agent_delete")
        assert back.get_model("console", "Pass").objects.get(pk=run.pk).status == "dismissed"
    finally:
        from django.core.management import call_command

        call_command("migrate", "console", verbosity=0)


def test_auto_apply_true_becomes_safe_and_false_off():
    old = migrate("0014_agent_archive_days")
    Agent = old.get_model("console", "Agent")
    on = Agent.objects.create(name="On", slug="on", collection_name="c-on", auto_apply=True)
    off = Agent.objects.create(name="Off", slug="off", collection_name="c-off", auto_apply=False)
    try:
        new = migrate("0015_decision")
        Agent = new.get_model("console", "Agent")
        assert Agent.objects.get(pk=on.pk).auto_apply == "safe"
        assert Agent.objects.get(pk=off.pk).auto_apply == "off"
        back = migrate("0014_agent_archive_days")
        Agent = back.get_model("console", "Agent")
        assert Agent.objects.get(pk=on.pk).auto_apply is True
        assert Agent.objects.get(pk=off.pk).auto_apply is False
    finally:
        from django.core.management import call_command

        call_command("migrate", "console", verbosity=0)


def test_stored_schedules_follow_the_tasks_to_their_new_module():
    """An existing deployment's django-q2 schedules name ``memoryadmin.console.tasks.…``; after
    the move to domain packages they must name ``memoryadmin.tasks.…`` or the worker cannot
    import them (0022). Others are left alone; going back restores the old names."""
    from django_q.models import Schedule

    migrate("0021_verbose_names_plural")
    old = Schedule.objects.create(
        name="pass agent 7", func="memoryadmin.console.tasks.scheduled_pass"
    )
    other = Schedule.objects.create(name="someone else's", func="othersite.tasks.nightly")
    try:
        migrate("0022_tasks_moved")
        assert Schedule.objects.get(pk=old.pk).func == "memoryadmin.tasks.scheduled_pass"
        assert Schedule.objects.get(pk=other.pk).func == "othersite.tasks.nightly"
        from memoryadmin import tasks

        assert callable(tasks.scheduled_pass)
        migrate("0021_verbose_names_plural")
        assert Schedule.objects.get(pk=old.pk).func == "memoryadmin.console.tasks.scheduled_pass"
    finally:
        from django.core.management import call_command

        call_command("migrate", "console", verbosity=0)


def test_an_exclusion_moves_into_the_status_and_back():
    """0026 keeps one exclusion flag, ``status="excluded"``: a row the old column marked stays
    excluded (even one whose status was not set with it); going back fills the column again."""
    old = migrate("0025_decision_held_keys")
    Agent, Pass = old.get_model("console", "Agent"), old.get_model("console", "Pass")
    Operation = old.get_model("console", "Operation")
    agent = Agent.objects.create(name="X", slug="x", collection_name="c-x")
    run = Pass.objects.create(agent=agent, trigger="operator")
    both = Operation.objects.create(
        run=run, index=0, kind="prune", excluded=True, status="excluded"
    )
    column = Operation.objects.create(run=run, index=1, kind="prune", excluded=True)
    kept = Operation.objects.create(run=run, index=2, kind="prune")
    try:
        new = migrate("0026_operation_excluded_is_a_status")
        Operation = new.get_model("console", "Operation")
        status = dict(Operation.objects.values_list("pk", "status"))
        assert [status[o.pk] for o in (both, column, kept)] == ["excluded", "excluded", "pending"]
        back = migrate("0025_decision_held_keys")
        Operation = back.get_model("console", "Operation")
        flags = dict(Operation.objects.values_list("pk", "excluded"))
        assert [flags[o.pk] for o in (both, column, kept)] == [True, True, False]
    finally:
        from django.core.management import call_command

        call_command("migrate", "console", verbosity=0)


def test_a_pass_s_figures_come_from_its_columns_and_go_back():
    """0027 keeps a pass's figures once (``Pass.figures``): a pass planned before they were kept
    gets them from its summary columns, which then go; one with figures keeps its own, less
    ``entries_before`` (its column). Going back fills the columns from the figures, the verdict
    from the status and the threshold."""
    old = migrate("0026_operation_excluded_is_a_status")
    Agent, Pass = old.get_model("console", "Agent"), old.get_model("console", "Pass")
    agent = Agent.objects.create(name="F", slug="f", collection_name="c-f")
    when = "2026-10-01T00:00:00+00:00"
    columns = {"entries_before": 20, "entries_after": 17, "merged": 4, "loss_fraction": 0.2}
    planned = {"trigger": "operator", "status": "proposed", "planned_at": when}
    bare = Pass.objects.create(agent=agent, **planned, **columns)
    kept = {"entries_before": 20, "entries_after": 19, "loss_fraction": 0.05, "removed": 1}
    stored = Pass.objects.create(agent=agent, **planned, figures=kept, **columns)
    rejected = Pass.objects.create(
        agent=agent,
        trigger="operator",
        status="rejected_by_guard",
        planned_at=when,
        reason="Loss guard tripped: too much.",
        max_loss_fraction=0.1,
        **columns,
    )
    queued = Pass.objects.create(agent=agent, trigger="operator")
    try:
        new = migrate("0027_pass_figures_stored_once")
        Pass = new.get_model("console", "Pass")
        figures = Pass.objects.get(pk=bare.pk).figures
        assert (figures["entries_after"], figures["merged"], figures["removed"]) == (17, 4, 4)
        assert figures["loss_fraction"] == 0.2 and figures["written"] == 1
        assert Pass.objects.get(pk=stored.pk).figures == {  # its own, less its input
            k: v for k, v in kept.items() if k != "entries_before"
        }
        assert Pass.objects.get(pk=queued.pk).figures == {}

        from memoryadmin.proposals.models import Pass as Current

        run = Current.objects.get(pk=bare.pk)
        assert (run.entries_after, run.loss_fraction, run.guard_passed) == (17, 0.2, True)
        assert "(4 removed)" in run.guard_reason
        rejected_now = Current.objects.get(pk=rejected.pk)
        assert rejected_now.guard_passed is False
        assert rejected_now.guard_reason == "Loss guard tripped: too much."
        assert Current.objects.get(pk=queued.pk).guard_passed is None

        back = migrate("0026_operation_excluded_is_a_status")
        Pass = back.get_model("console", "Pass")
        again = Pass.objects.get(pk=stored.pk)
        assert (again.entries_after, again.loss_fraction, again.guard_passed) == (19, 0.05, True)
        assert again.figures == kept
        again = Pass.objects.get(pk=rejected.pk)
        assert (again.guard_passed, again.guard_reason) == (False, "Loss guard tripped: too much.")
        assert Pass.objects.get(pk=queued.pk).guard_passed is None
    finally:
        from django.core.management import call_command

        call_command("migrate", "console", verbosity=0)
