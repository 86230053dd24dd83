"""Audit page: every pass with its decision, filters, paging and CSV export."""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime

import pytest
from django.test import Client
from django.urls import reverse

from memoryadmin.agents.models import Agent
from memoryadmin.core.models import AuditEvent
from memoryadmin.proposals.models import Pass
from memoryadmin.proposals.services.review import operation_set_excluded
from tests.conftest import XSS

pytestmark = pytest.mark.django_db


@pytest.fixture
def passes(unique_name, bob) -> dict[str, Pass]:
    a = Agent.objects.create(
        name="Alpha", slug=unique_name("alpha"), collection_name=unique_name("c")
    )
    b = Agent.objects.create(
        name="Beta", slug=unique_name("beta"), collection_name=unique_name("c")
    )
    when = datetime(2026, 10, 5, 12, tzinfo=UTC)
    out = {
        "guard": Pass.objects.create(
            agent=a,
            trigger="schedule",
            status="rejected_by_guard",
            created_at=when,
            reason="Loss guard tripped: loss 40.0%",
            decided_actor="policy",
        ),
        "rejected": Pass.objects.create(
            agent=a,
            trigger="operator",
            status="rejected",
            decided_by=bob,
            decided_at=when,
            note=XSS,
            created_at=datetime(2026, 10, 6, tzinfo=UTC),
        ),
        "failed": Pass.objects.create(
            agent=b,
            trigger="cli",
            status="failed",
            error="Chroma down",
            created_at=datetime(2026, 10, 7, tzinfo=UTC),
        ),
        "stale": Pass.objects.create(
            agent=b,
            trigger="schedule",
            status="stale",
            reason="store changed",
            created_at=datetime(2026, 10, 8, tzinfo=UTC),
        ),
        "applied": Pass.objects.create(
            agent=b,
            trigger="policy",
            status="applied",
            decided_actor="policy",
            note="=HYPERLINK(1)",
            created_at=datetime(2026, 10, 9, tzinfo=UTC),
        ),
    }
    return out


def test_it_lists_every_pass_with_its_decision(client: Client, carol, passes) -> None:
    client.force_login(carol)
    r = client.get(reverse("audit"))
    assert r.status_code == 200
    html = r.content.decode()
    assert r.context["page"].paginator.count == 5
    assert (
        "Loss guard tripped" in html
        and "bob" in html
        and "Chroma down" in html
        and "store changed" in html
    )
    assert "schedule" in html and "policy" in html and "cli" in html
    assert XSS not in html and "&lt;script&gt;" in html


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        ("rejected_by_guard", {"guard"}),
        ("rejected", {"rejected"}),
        ("dismissed", {"rejected"}),
        ("failed", {"failed"}),
        ("stale", {"stale"}),
        ("applied", {"applied"}),
        ("all", {"guard", "rejected", "failed", "stale", "applied"}),
    ],
)
def test_it_filters_by_status(
    client: Client, carol, passes, status: str, expected: set[str]
) -> None:
    client.force_login(carol)
    r = client.get(reverse("audit"), {"status": status})
    got = {p.pk for p in r.context["page"]}
    assert got == {passes[k].pk for k in expected}


def test_it_filters_by_agent_and_date_range(client: Client, carol, passes) -> None:
    client.force_login(carol)
    slug = passes["failed"].agent.slug
    r = client.get(reverse("audit"), {"agent": slug, "since": "2026-10-07", "until": "2026-10-08"})
    assert {p.pk for p in r.context["page"]} == {passes["failed"].pk, passes["stale"].pk}


def test_it_reports_a_bad_date_range(client: Client, carol, passes) -> None:
    client.force_login(carol)
    r = client.get(reverse("audit"), {"since": "2026-10-09", "until": "2026-10-01"})
    assert r.status_code == 200 and b"The end date is before the start date" in r.content
    assert r.context["page"].paginator.count == 0


def test_it_returns_the_results_fragment_for_htmx(client: Client, carol, passes) -> None:
    client.force_login(carol)
    r = client.get(reverse("audit"), {"status": "failed"}, HTTP_HX_REQUEST="true")
    html = r.content.decode()
    assert r.status_code == 200 and html.lstrip().startswith('<section id="audit-results"')
    assert "<html" not in html and "Chroma down" in html and "store changed" not in html


def test_it_paginates(client: Client, carol, unique_name) -> None:
    a = Agent.objects.create(name="Many", slug=unique_name("m"), collection_name=unique_name("c"))
    Pass.objects.bulk_create(
        [Pass(agent=a, trigger="schedule", status="rejected") for _ in range(55)]
    )
    client.force_login(carol)
    assert len(client.get(reverse("audit")).context["page"].object_list) == 50
    r = client.get(reverse("audit"), {"page": 2})
    assert len(r.context["page"].object_list) == 5


def test_it_exports_the_filtered_list_as_csv(client: Client, carol, passes) -> None:
    client.force_login(carol)
    r = client.get(reverse("audit_csv"), {"status": "applied"})
    assert r.status_code == 200 and r["Content-Type"].startswith("text/csv")
    assert "attachment" in r["Content-Disposition"]
    rows = list(csv.DictReader(io.StringIO(r.content.decode())))
    assert [int(row["pass"]) for row in rows] == [passes["applied"].pk]
    assert rows[0]["decided_by"] == "policy" and rows[0]["trigger"] == "policy"
    assert rows[0]["note"] == "'=HYPERLINK(1)"  # no spreadsheet formula injection


def test_it_exports_everything_without_filters(client: Client, carol, passes) -> None:
    client.force_login(carol)
    rows = list(csv.DictReader(io.StringIO(client.get(reverse("audit_csv")).content.decode())))
    assert len(rows) == 5
    rejected = next(row for row in rows if int(row["pass"]) == passes["rejected"].pk)
    assert rejected["decided_by"] == "bob" and rejected["note"] == XSS  # CSV is data, not HTML


def test_it_links_the_csv_with_the_current_filters(client: Client, carol, passes) -> None:
    client.force_login(carol)
    html = client.get(reverse("audit"), {"status": "failed"}).content.decode()
    assert f'{reverse("audit_csv")}?status=failed' in html


def test_it_shows_times_in_the_operators_zone(client: Client, carol, passes) -> None:
    client.force_login(carol)
    client.cookies["tz"] = "Asia/Tokyo"
    html = client.get(reverse("audit"), {"status": "rejected_by_guard"}).content.decode()
    assert "2026-10-05 21:00" in html  # 12:00 UTC
    html = client.get(
        reverse("audit"), {"status": "rejected_by_guard"}, HTTP_HX_REQUEST="true"
    ).content.decode()
    assert "2026-10-05 21:00" in html


def test_it_falls_back_to_the_server_zone_for_a_bogus_cookie(client: Client, carol, passes) -> None:
    client.force_login(carol)
    client.cookies["tz"] = "Not/AZone"
    html = client.get(reverse("audit"), {"status": "rejected_by_guard"}).content.decode()
    assert "2026-10-05 12:00" in html


# ----- events tab and rollbacks -----------------------------------------------------------------


@pytest.fixture
def events(passes, bob) -> dict[str, AuditEvent]:
    a, b = passes["rejected"].agent, passes["applied"].agent
    when = datetime(2026, 10, 10, 9, tzinfo=UTC)
    return {
        "rejected": AuditEvent.objects.create(
            agent=a,
            run=passes["rejected"],
            user=bob,
            actor="bob",
            verb="rejected",
            from_status="proposed",
            to_status="rejected",
            note=XSS,
            created_at=when,
        ),
        "rollback": AuditEvent.objects.create(
            agent=b,
            run=passes["applied"],
            user=bob,
            actor="bob",
            verb="rollback_requested",
            from_status="applied",
            to_status="rolling_back",
            note="=undo",
            created_at=when,
        ),
        "pin": AuditEvent.objects.create(
            agent=b, actor="alice", verb="memory_pinned", created_at=when
        ),
    }


def test_it_lists_every_event_on_the_events_tab(client: Client, carol, events) -> None:
    client.force_login(carol)
    html = client.get(reverse("audit")).content.decode()
    assert reverse("audit_events") in html  # the tab is linked from the passes list
    r = client.get(reverse("audit_events"))
    html = r.content.decode()
    assert r.status_code == 200 and "3 events" in html
    assert 'data-verb="rollback_requested"' in html and "applied → rolling back" in html
    assert XSS not in html and "&lt;script&gt;" in html


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({"verb": "rollback_requested"}, {"rollback"}),
        ({"agent": "beta"}, {"rollback", "pin"}),
        ({"agent": "beta", "verb": "memory_pinned"}, {"pin"}),
        ({"verb": "no_such_verb"}, set()),
    ],
)
def test_it_filters_events_by_agent_and_verb(
    client: Client, carol, events, params, expected
) -> None:
    if "agent" in params:
        params = {**params, "agent": events["pin"].agent.slug}
    client.force_login(carol)
    r = client.get(reverse("audit_events"), params, HTTP_HX_REQUEST="true")
    html = r.content.decode()
    assert html.lstrip().startswith('<section id="event-results"')
    assert {k for k, e in events.items() if f'data-verb="{e.verb}"' in html} == expected


def test_it_exports_the_filtered_events_as_csv(client: Client, carol, events) -> None:
    client.force_login(carol)
    r = client.get(reverse("audit_events_csv"), {"verb": "rollback_requested"})
    assert r.status_code == 200 and r["Content-Type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(r.content.decode())))
    assert (
        len(rows) == 1
        and rows[0]["actor"] == "bob"
        and rows[0]["pass"] == str(events["rollback"].run_id)
    )
    assert rows[0]["to_status"] == "rolling_back" and rows[0]["note"] == "'=undo"


def test_it_filters_rolled_back_passes_and_says_who_rolled_back(
    client: Client, carol, passes, events
) -> None:
    Pass.objects.filter(pk=passes["applied"].pk).update(status="rolled_back")
    client.force_login(carol)
    html = client.get(reverse("audit"), {"status": "rolled_back"}).content.decode()
    assert f"#{passes['applied'].pk}<" in html and f"#{passes['failed'].pk}<" not in html
    assert 'data-testid="rolled-back-by">by bob at 2026-10-10' in html and ">rolled back<" in html


def test_an_exclusion_event_names_its_operation_with_a_link_and_in_the_csv(
    client: Client, carol, bob, agent_with_memories
) -> None:
    """ "operator excluded" said nothing of which operation: now "operation #N (kind)"."""
    from tests.proposals.make import make_proposal

    run = make_proposal(agent_with_memories(3), merges=1, prunes=2)
    op = run.operations.get(index=2)
    operation_set_excluded(operation=op, excluded=True, user=bob)
    client.force_login(carol)
    html = client.get(reverse("audit_events"), {"verb": "excluded"}).content.decode()
    link = f'<a href="{reverse("pass_detail", args=[run.pk])}?op={op.pk}#review-panel">'
    assert f"{link}operation #2 (prune)</a>" in html
    r = client.get(reverse("audit_events_csv"), {"verb": "excluded"})
    (row,) = csv.DictReader(io.StringIO(r.content.decode()))
    assert row["operation"] == "operation #2 (prune)" and row["verb"] == "excluded"


def test_a_memory_edit_shows_which_memory_and_what_changed_on_the_page_and_in_the_csv(
    client: Client, carol, agent_with_memories
) -> None:
    from memoryadmin.memories.services.memories import memory_delete, memory_edit

    agent = agent_with_memories(3)
    long_text = "Caroline moved to Lisbon, " + "and later to Porto, " * 20 + XSS
    memory_edit(agent=agent, memory_id="mem-001", document=long_text, user=carol)
    memory_delete(agent=agent, memory_id="mem-002", user=carol)
    client.force_login(carol)
    html = client.get(reverse("audit_events"), {"agent": agent.slug}).content.decode()
    assert html.count('data-testid="event-memory"') == 2
    assert f'{reverse("memory_detail", args=[agent.slug])}?id=mem-001' in html
    assert "Caroline moved to Lisbon" in html and "<summary>full text</summary>" in html
    assert XSS not in html  # escaped
    rows = list(
        csv.DictReader(io.StringIO(client.get(reverse("audit_events_csv")).content.decode()))
    )
    edited = next(r for r in rows if r["verb"] == "memory_edited")
    assert edited["memory"] == "mem-001" and edited["after"] == long_text
    assert edited["before"].startswith("Melanie")  # mem-001 was the second fact
    assert next(r for r in rows if r["verb"] == "memory_deleted")["memory"] == "mem-002"


def test_an_agent_update_records_each_changed_setting_with_its_old_and_new_value(
    client: Client, alice, carol, bare_agent
) -> None:
    """Before: switching auto-apply to ``all`` or changing a schedule was recorded as
    "agent updated" with nothing to show what changed."""
    from memoryadmin.agents.services.agents import agent_update
    from memoryadmin.core.validation import validate_policy

    agent = bare_agent(policy=validate_policy({}))
    policy = {**agent.policy, "max_loss_fraction": 0.2}
    agent_update(
        agent=agent, user=alice, auto_apply="all", schedule_cron="0 4 * * *", policy=policy
    )
    event = AuditEvent.objects.filter(agent=agent, verb="agent_updated").latest("pk")
    assert event.data["fields"]["auto_apply"] == ["off", "all"]
    assert event.data["fields"]["schedule_cron"][1] == "0 4 * * *"
    # One threshold edited: that key, not the whole policy twice.
    assert [k for k in event.data["fields"] if k.startswith("policy.")] == [
        "policy.max_loss_fraction"
    ]
    client.force_login(carol)
    html = client.get(reverse("audit_events"), {"agent": agent.slug}).content.decode()
    assert 'data-testid="event-settings"' in html
    change = "<del>&quot;off&quot;</del> → <ins>&quot;all&quot;</ins>"
    assert f'<span class="mono">auto_apply</span>: {change}' in html
    rows = list(
        csv.DictReader(
            io.StringIO(
                client.get(reverse("audit_events_csv"), {"agent": agent.slug}).content.decode()
            )
        )
    )
    updated = next(r for r in rows if r["verb"] == "agent_updated")
    assert 'auto_apply="off"' in updated["before"] and 'auto_apply="all"' in updated["after"]


def test_it_exports_the_operations_of_a_pass_with_their_memories(
    client: Client, carol, bare_agent
) -> None:
    """Before: the passes CSV had no operations or memories."""
    from tests.proposals.make import make_proposal

    run = make_proposal(bare_agent(), merges=1, prunes=1)
    other = make_proposal(bare_agent(), merges=1)
    client.force_login(carol)
    page = client.get(reverse("audit")).content.decode()
    assert f'{reverse("audit_operations_csv")}?pass={run.pk}' in page
    r = client.get(reverse("audit_operations_csv"), {"pass": run.pk})
    assert r.status_code == 200 and r["Content-Type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(r.content.decode())))
    assert [(int(x["pass"]), x["kind"]) for x in rows] == [(run.pk, "merge"), (run.pk, "prune")]
    assert rows[0]["source_ids"] == "m0-a | m0-b"
    assert rows[0]["source_texts"].startswith("Caroline moved to Boston (0a) | ")
    assert rows[0]["result_text"] == "Caroline moved to Boston (merged 0)"
    assert rows[1]["source_texts"] == "old note 0"
    every = list(
        csv.DictReader(io.StringIO(client.get(reverse("audit_operations_csv")).content.decode()))
    )
    assert {int(x["pass"]) for x in every} == {run.pk, other.pk}


def test_the_csv_gives_the_reason_the_page_shows(client: Client, carol, passes) -> None:
    """The Reason column of the page and of the CSV are one answer (``Pass.outcome_reason``):
    a pass the guard stopped says why in both, not only on the page."""
    client.force_login(carol)
    page = client.get(reverse("audit")).content.decode()
    rows = list(csv.DictReader(io.StringIO(client.get(reverse("audit_csv")).content.decode())))
    by_pk = {int(row["pass"]): row for row in rows}
    assert by_pk[passes["guard"].pk]["reason"] == "Loss guard tripped: loss 40.0%"
    assert "Loss guard tripped: loss 40.0%" in page
    assert by_pk[passes["stale"].pk]["reason"] == "store changed"
    assert by_pk[passes["failed"].pk]["reason"] == "Chroma down"
    assert by_pk[passes["rejected"].pk]["reason"] == ""
