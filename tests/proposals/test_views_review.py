"""The Review tab: riskiest first, lost content, filters and paging in the DB, bulk actions."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from django.urls import reverse

from memoryadmin.agents.models import Agent
from memoryadmin.core.models import AuditEvent
from memoryadmin.proposals.models import Operation, Pass
from memoryadmin.proposals.services.passes import pass_request, pass_run
from tests.proposals.make import make_proposal

pytestmark = pytest.mark.django_db


@pytest.fixture
def agent(unique_name) -> Agent:
    return Agent.objects.create(
        name="Support bot", slug=unique_name("a"), collection_name=unique_name("c")
    )


def _rows(html: str) -> list[str]:
    """Operation labels of the Review list, in page order."""
    return re.findall(r'<article id="rv-\d+" class="rv-op[^"]*"[^>]*aria-label="([^"]+)"', html)


def _proposal(agent: Agent) -> Pass:
    # 2 merges (they lose their source sentences), 3 uncovered prunes, 1 reconcile: 20 originals
    return make_proposal(agent, entries_before=40, merges=2, prunes=3, reconciles=1)


def test_it_opens_on_the_review_tab_riskiest_first(client: Client, bob, agent) -> None:
    run = _proposal(agent)
    client.force_login(bob)
    html = client.get(reverse("pass_detail", args=[run.pk])).content.decode()
    assert 'id="review-panel"' in html and 'data-testid="tab-review"' in html
    rows = _rows(html)
    risks = [float(r.rsplit(" ", 1)[1]) for r in rows]
    assert rows and risks == sorted(risks, reverse=True)
    assert rows[0].startswith("prune")  # an uncovered prune of a never-accessed memory loses it all
    assert "pruned though never accessed" in html
    assert '<del class="lost">' in html  # the loss is highlighted in place
    # the approve button says what is approved, in one line
    line = re.search(
        r'data-testid="approve-line">Approving applies: <strong>([^<]+)</strong>', html
    )
    assert line and line.group(1).startswith("6 operations, loses ")
    assert line.group(1) == "6 operations, loses 8 sentences in 8 memories; loss 20.0% of 25.0%"


def test_a_viewer_sees_the_review_but_no_controls(client: Client, carol, agent) -> None:
    run = _proposal(agent)
    client.force_login(carol)
    html = client.get(reverse("pass_detail", args=[run.pk])).content.decode()
    assert _rows(html) and 'id="bulk-form"' not in html and "data-review-action" not in html


def test_the_panel_filters_searches_and_pages_in_the_database(client: Client, carol, agent) -> None:
    run = make_proposal(agent, entries_before=400, merges=30, prunes=2)
    client.force_login(carol)
    url = reverse("pass_review", args=[run.pk])
    r = client.get(url, {"risk": "all"}, HTTP_HX_REQUEST="true")
    html = r.content.decode()
    assert (
        r.status_code == 200
        and "<html" not in html
        and html.lstrip().startswith('<section id="review-panel"')
    )
    assert (
        len(_rows(html)) == 25
        and "page 1 of 2" in html
        and "Vary" in r
        and "HX-Request" in r["Vary"]
    )
    page2 = client.get(url, {"risk": "all", "page": 2}, HTTP_HX_REQUEST="true").content.decode()
    assert len(_rows(page2)) == 7
    prunes = client.get(
        url, {"risk": "all", "kind": "prune"}, HTTP_HX_REQUEST="true"
    ).content.decode()
    assert [r.split(",")[0] for r in _rows(prunes)] == ["prune #30", "prune #31"]
    found = client.get(url, {"risk": "all", "q": "(17b)"}, HTTP_HX_REQUEST="true").content.decode()
    assert [r.split(",")[0] for r in _rows(found)] == ["merge #17"]
    op = run.operations.get(index=5)
    one = client.get(url, {"op": op.pk}, HTTP_HX_REQUEST="true").content.decode()
    assert [r.split(",")[0] for r in _rows(one)] == ["merge #5"]
    bad = client.get(url, {"risk": "bogus"}, HTTP_HX_REQUEST="true").content.decode()
    assert "risk:" in bad and "Select a valid choice" in bad


def test_without_htmx_the_panel_url_goes_back_to_the_page(client: Client, carol, agent) -> None:
    run = _proposal(agent)
    client.force_login(carol)
    r = client.get(reverse("pass_review", args=[run.pk]), {"tab": "lost"})
    assert r.status_code == 302 and r["Location"].endswith(
        f"/passes/{run.pk}/?tab=lost#review-panel"
    )
    html = client.get(r["Location"]).content.decode()
    assert 'id="lost-list"' in html


def test_the_lost_content_view_lists_only_lost_sentences_riskiest_first(
    client: Client, carol, agent
) -> None:
    run = _proposal(agent)
    client.force_login(carol)
    html = client.get(
        reverse("pass_review", args=[run.pk]), {"tab": "lost"}, HTTP_HX_REQUEST="true"
    ).content.decode()
    items = re.findall(r'<li class="lost-item" data-op="(\d+)"', html)
    ops = {op.pk: op for op in run.operations.all()}
    assert items and all(ops[int(i)].lost_sentences for i in items)
    assert [ops[int(i)].risk for i in items] == sorted(
        (ops[int(i)].risk for i in items), reverse=True
    )
    assert '<span class="changed">Jon lives in</span> <del class="lost">Rome</del>' in html
    assert f"?op={items[0]}#rv-{items[0]}" in html  # each line links to its operation


def test_a_bulk_exclude_of_all_prunes_is_one_event_and_updates_the_figures_once(
    client: Client, bob, agent
) -> None:
    run = _proposal(agent)
    client.force_login(bob)
    r = client.post(
        reverse("review_bulk", args=[run.pk]),
        {"action": "exclude", "scope": "rule", "group": "prune:"},
        HTTP_HX_REQUEST="true",
    )
    html = r.content.decode()
    assert r.status_code == 200
    assert (
        html.lstrip().startswith('<section id="review-panel"') and "3 operations excluded." in html
    )
    assert html.count('id="pass-summary" class="card" hx-swap-oob="true"') == 1
    assert html.count('id="approve-line" class="approve-line" hx-swap-oob="true"') == 1
    assert 'id="loss-fraction">12.5%' in html
    assert "3 of 6 operations (3 excluded)" in html
    assert run.operations.filter(kind="prune", status="excluded").count() == 3
    [event] = AuditEvent.objects.filter(run=run, verb="bulk_excluded")
    assert (
        event.data["operations"] == [2, 3, 4] and "all prunes" in event.note and event.user == bob
    )
    # the changed rows of "All operations" are refreshed out of band too
    for op in run.operations.filter(kind="prune"):
        assert (
            f'<div id="op-{op.pk}" class="op excluded" data-kind="prune" hx-swap-oob="true">'
            in html
        )


def test_bulk_by_rule_below_a_confidence_and_by_selection(client: Client, bob, agent) -> None:
    run = _proposal(agent)
    Operation.objects.filter(run=run, index=0).update(scores={"confidence": 0.91})
    Operation.objects.filter(run=run, index=1).update(scores={"confidence": 0.99})
    client.force_login(bob)
    url = reverse("review_bulk", args=[run.pk])
    client.post(
        url,
        {"action": "exclude", "scope": "rule", "group": "merge:near_duplicate", "below": "0.95"},
    )
    assert list(run.operations.filter(status="excluded").values_list("index", flat=True)) == [0]
    reconcile = run.operations.get(kind="reconcile")
    r = client.post(url, {"action": "exclude", "scope": "selected", "ops": [reconcile.pk]})
    assert r.status_code == 302 and r["Location"].endswith("#review-panel")
    # one operation is audited like a single toggle
    assert AuditEvent.objects.filter(
        run=run, verb="excluded", data__operation=reconcile.index
    ).exists()
    client.post(url, {"action": "include", "scope": "filter", "risk": "all"})
    assert not run.operations.filter(status="excluded").exists()
    assert AuditEvent.objects.filter(run=run, verb="bulk_included").count() == 1


def test_a_bulk_action_without_a_selection_says_so(client: Client, bob, agent) -> None:
    run = _proposal(agent)
    client.force_login(bob)
    r = client.post(
        reverse("review_bulk", args=[run.pk]),
        {"action": "exclude", "scope": "selected"},
        HTTP_HX_REQUEST="true",
    )
    assert r.status_code == 200 and "Select at least one operation" in r.content.decode()
    assert not run.operations.filter(status="excluded").exists()


@pytest.mark.parametrize(("who", "status"), [("carol", 403), (None, 302)])
def test_bulk_needs_a_reviewer(client: Client, request, agent, who, status) -> None:
    run = _proposal(agent)
    if who:
        client.force_login(request.getfixturevalue(who))
    r = client.post(
        reverse("review_bulk", args=[run.pk]),
        {"action": "exclude", "scope": "rule", "group": "prune:"},
    )
    assert r.status_code == status and not run.operations.filter(status="excluded").exists()


def test_bulk_is_post_only_and_refused_once_decided(client: Client, bob, agent) -> None:
    run = _proposal(agent)
    client.force_login(bob)
    url = reverse("review_bulk", args=[run.pk])
    assert client.get(url).status_code == 405
    Pass.objects.filter(pk=run.pk).update(status=Pass.Status.REJECTED)
    r = client.post(
        url, {"action": "exclude", "scope": "rule", "group": "prune:"}, HTTP_HX_REQUEST="true"
    )
    assert "only a proposed pass can be reviewed" in r.content.decode()
    assert not run.operations.filter(status="excluded").exists()


def test_editing_a_merge_rescores_its_loss_and_updates_the_review_row(
    client: Client, bob, agent
) -> None:
    run = make_proposal(agent, merges=1, text="Tim pays 40 dollars a month")
    op = run.operations.get()
    client.force_login(bob)
    r = client.post(
        reverse("operation_edit", args=[run.pk, op.pk]),
        {"document": "Tim pays 40 dollars a month (0a). Tim pays 40 dollars a month (0b)."},
        HTTP_HX_REQUEST="true",
    )
    op.refresh_from_db()
    assert op.lost_sentences == 0 and not any("loses" in why for why in op.risk_reasons)
    assert f'<article id="rv-{op.pk}"' in r.content.decode()  # the review row, out of band
    client.post(
        reverse("operation_edit", args=[run.pk, op.pk]),
        {"document": "Tim pays dollars."},
        HTTP_HX_REQUEST="true",
    )
    op.refresh_from_db()
    assert op.lost_sentences == 2 and "loses the numbers 40, 0a, 0b" in op.risk_reasons


def test_a_real_pass_stores_risk_and_lost_content(alice, agent_with_memories) -> None:
    from tests.conftest import DISTINCT_FACTS

    dup = "The printer on floor three needs new toner."
    agent = agent_with_memories(
        [*DISTINCT_FACTS[:16], dup, dup.upper()], policy={"prune": False, "promote": False}
    )
    run = pass_request(agent=agent, trigger="operator", user=alice)
    run = pass_run(run=run)
    assert run.status == Pass.Status.PROPOSED, (run.status, run.error, run.guard_reason)
    [op] = run.operations.all()
    assert op.rule == "exact_duplicate" and op.lost_sentences == 0 and op.risk == 0.0
    assert run.telemetry["review"]["scored"] is True


@pytest.mark.django_db(transaction=True)
def test_the_migration_scores_proposals_planned_before_it() -> None:
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    before, after = (
        [("console", "0004_keep_archive_and_audit_on_agent_delete")],
        [("console", "0009_operation_risk")],
    )
    executor = MigrationExecutor(connection)
    executor.migrate(before)
    apps = executor.loader.project_state(before).apps
    agent = apps.get_model("console", "Agent").objects.create(
        name="Old", slug="old", collection_name="old-c"
    )
    run = apps.get_model("console", "Pass").objects.create(
        agent=agent, trigger="cli", status="proposed", entries_before=10
    )
    op = apps.get_model("console", "Operation").objects.create(
        run=run, index=0, kind="prune", rule="decay", source_ids=["p0"], removes=["p0"]
    )
    apps.get_model("console", "OperationSource").objects.create(
        operation=op,
        position=0,
        memory_id="p0",
        document="The gym opens at 6.",
        metadata={},
        content_hash="x",
        removed=True,
    )
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    try:
        executor.migrate(after)
        apps = executor.loader.project_state(after).apps
        scored = apps.get_model("console", "Operation").objects.get(pk=op.pk)
        assert scored.lost_sentences == 1 and "loses the number 6" in scored.risk_reasons
        assert (
            apps.get_model("console", "Pass").objects.get(pk=run.pk).telemetry["review"]["scored"]
        )
    finally:  # leave the database as every other test expects it
        executor = MigrationExecutor(connection)
        executor.loader.build_graph()
        executor.migrate(executor.loader.graph.leaf_nodes())


def test_the_panel_reads_one_page_whatever_the_size_of_the_pass(
    client: Client, carol, agent
) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    small = make_proposal(agent, entries_before=400, merges=30)
    big = make_proposal(agent, entries_before=900, merges=90)
    client.force_login(carol)
    counts = []
    for run in (small, big):
        with CaptureQueriesContext(connection) as ctx:
            r = client.get(
                reverse("pass_review", args=[run.pk]),
                {"risk": "all", "sort": "loss"},
                HTTP_HX_REQUEST="true",
            )
        assert len(_rows(r.content.decode())) == 25
        counts.append(len(ctx.captured_queries))
    assert counts[0] == counts[1]


def test_the_panel_needs_a_login_and_a_get(client: Client, carol, agent) -> None:
    run = _proposal(agent)
    url = reverse("pass_review", args=[run.pk])
    r = client.get(url, HTTP_HX_REQUEST="true")
    assert r.status_code == 302 and r["Location"].startswith(reverse("login"))
    client.force_login(carol)
    assert client.post(url).status_code == 405
    assert (
        client.get(reverse("pass_review", args=[999999]), HTTP_HX_REQUEST="true").status_code == 404
    )


def test_excluding_on_page_three_of_the_review_tab_stays_on_page_three(
    client: Client, bob, agent
) -> None:
    from tests.proposals.make import make_proposal

    run = make_proposal(agent, merges=60, entries_before=400, max_loss_fraction=0.5)
    client.force_login(bob)
    params = {"tab": "review", "risk": "all", "page": "3"}
    html = client.get(reverse("pass_review", args=[run.pk]), params, HTTP_HX_REQUEST="true")
    html = html.content.decode()
    assert "page 3 of 3" in html
    row = re.search(r'<form class="actions" method="post".*?</form>', html, re.S).group(0)
    posted = dict(re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)"', row))
    assert posted["page"] == "3"  # the row's form says which page it is on
    posted.update(action="exclude", risk="all", tab="review")
    r = client.post(reverse("review_bulk", args=[run.pk]), posted, HTTP_HX_REQUEST="true")
    assert r.status_code == 200 and "page 3 of 3" in r.content.decode()
    r = client.post(reverse("review_bulk", args=[run.pk]), posted)  # without htmx
    assert r.status_code == 302 and "page=3" in r["Location"]


def test_a_bulk_action_swaps_only_the_rows_the_page_holds(client: Client, bob, agent) -> None:
    run = _proposal(agent)
    prunes = list(run.operations.filter(kind="prune").order_by("index"))
    client.force_login(bob)
    data = {"action": "exclude", "scope": "rule", "group": "prune:", "shown": str(prunes[0].pk)}
    html = client.post(reverse("review_bulk", args=[run.pk]), data, HTTP_HX_REQUEST="true")
    html = html.content.decode()
    oob_rows = re.findall(r'<div id="op-(\d+)" class="op[^"]*" data-kind="\w+" hx-swap-oob', html)
    assert oob_rows == [str(prunes[0].pk)]  # the groups never opened get no out-of-band row
    data.update(action="include", shown="")
    html = client.post(reverse("review_bulk", args=[run.pk]), data, HTTP_HX_REQUEST="true")
    assert 'hx-swap-oob="true"' in html.content.decode()
    assert not re.findall(r'<div id="op-\d+" [^>]*hx-swap-oob', html.content.decode())


def test_what_waits_for_a_person_is_listed_one_by_one_whatever_its_risk(
    client: Client, bob, agent_with_memories, django_capture_on_commit_callbacks
) -> None:
    """Auto-apply's line (``auto_apply_max_risk``) sits below the review line (0.3): an
    operation that waits for its risk alone scores under 0.3. The Review tab lists it one by
    one with why it waits, not summed up under "below the risk line"."""
    from tests.conftest import DISTINCT_FACTS

    texts = DISTINCT_FACTS[:8] + ["Gina adopted a grey rescue cat called Pixel."]
    agent = agent_with_memories(texts, policy={"auto_apply_max_risk": 0.0})
    Agent.objects.filter(pk=agent.pk).update(auto_apply="safe")
    with django_capture_on_commit_callbacks(execute=True):
        pass_request(agent=agent, trigger=Pass.Trigger.SCHEDULE, actor="schedule")
    (op,) = Operation.objects.filter(run__agent=agent, run__status=Pass.Status.PROPOSED)
    assert 0 < op.risk < 0.3 and op.scores["waiting"]["codes"] == ["risk"]
    client.force_login(bob)
    url = reverse("pass_review", args=[op.run_id])
    html = client.get(url, HTTP_HX_REQUEST="true").content.decode()
    assert 'data-testid="rv-waiting"' in html and "risk 0.04 &gt; 0.00" in html
    assert 'id="review-rest"' not in html  # nothing left summed up below the line
    below = client.get(url, {"risk": "below"}, HTTP_HX_REQUEST="true")
    assert 'data-testid="rv-waiting"' not in below.content.decode()
