"""The pass / proposal page: summary, operations, live exclude/edit, approve/reject, progress."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from django.urls import reverse

from consolidation import Policy
from memoryadmin.agents.models import Agent
from memoryadmin.core.models import AuditEvent
from memoryadmin.core.validation import MAX_NOTE_CHARS
from memoryadmin.proposals.models import Pass
from memoryadmin.proposals.services.review import (
    operation_set_excluded,
    operations_set_excluded,
    pass_approve,
    pass_reject,
)
from tests.conftest import XSS
from tests.proposals.make import make_proposal

pytestmark = pytest.mark.django_db


@pytest.fixture
def agent(bare_agent) -> Agent:
    return bare_agent(name="Support bot")


def _merge_ops(run: Pass):
    return list(run.operations.filter(kind="merge").order_by("index"))


# ----- page --------------------------------------------------------------------------------


def test_it_shows_summary_and_operations_by_kind(client: Client, carol, agent) -> None:
    run = make_proposal(agent, merges=2, prunes=1, reconciles=1)
    client.force_login(carol)
    r = client.get(reverse("pass_detail", args=[run.pk]))
    assert r.status_code == 200
    html = r.content.decode()
    assert "20 → 16" in html  # 4 merged sources + 1 prune + 1 superseded removed, 2 merged added
    assert 'id="loss-fraction">30.0%' in html and "25.0%" in html
    assert "guard fails" in html and "Loss guard tripped" in html
    for kind in ("merge", "prune", "reconcile"):
        assert f'id="ops-{kind}"' in html
    assert "0.931" in html  # pairwise cosine
    assert "<dt>decayed importance</dt><dd class=\"memtext\">0.012</dd>" in html and "decay" in html
    assert "wins" in html and "superseded" in html and "newer statement wins" in html
    # viewers see no review controls
    assert "Approve" not in html and 'data-action="toggle-exclude"' not in html


def test_it_shows_review_controls_to_a_reviewer(client: Client, bob, agent) -> None:
    run = make_proposal(agent)
    client.force_login(bob)
    html = client.get(reverse("pass_detail", args=[run.pk])).content.decode()
    assert "Approve and apply" in html and "Reject" in html
    assert html.count('data-action="toggle-exclude"') == 2
    assert "Edit merged text" in html


def test_it_pages_operations_per_kind(client: Client, carol, agent) -> None:
    run = make_proposal(agent, entries_before=200, merges=25)
    client.force_login(carol)
    r = client.get(reverse("pass_detail", args=[run.pk]), {"merge_page": 1})
    assert r.content.decode().count('data-kind="merge"') == 20
    r = client.get(
        reverse("pass_detail", args=[run.pk]),
        {"kind": "merge", "merge_page": 2},
        HTTP_HX_REQUEST="true",
    )
    html = r.content.decode()
    assert r.status_code == 200 and "<html" not in html
    assert html.lstrip().startswith('<details id="ops-merge"')
    assert html.count('data-kind="merge"') == 5
    assert r["Vary"] and "HX-Request" in r["Vary"]


def test_it_escapes_memory_text_everywhere_on_the_page(client: Client, bob, agent) -> None:
    run = make_proposal(agent, text=XSS, merges=1, reconciles=1)
    run.note = XSS
    run.save()
    client.force_login(bob)
    r = client.get(reverse("pass_detail", args=[run.pk]))
    assert XSS.encode() not in r.content
    assert b"&lt;script&gt;alert(1)&lt;/script&gt;" in r.content


def test_it_shows_recall_figures(client: Client, carol, agent) -> None:
    run = make_proposal(agent)
    run.recall = {"k": 10, "probes": 5, "answer_recall_before": 0.9, "answer_recall_after": 0.88}
    run.save()
    client.force_login(carol)
    html = client.get(reverse("pass_detail", args=[run.pk])).content.decode()
    assert (
        "Answer recall@10" in html and "90.0%" in html and "88.0%" in html
    )  # more in test_views_probes


def test_it_404s_for_a_missing_pass(client: Client, carol) -> None:
    client.force_login(carol)
    assert client.get(reverse("pass_detail", args=[999999])).status_code == 404


# ----- exclude / include --------------------------------------------------------------------


def test_it_excludes_a_merge_and_swaps_the_summary_out_of_band(client: Client, bob, agent) -> None:
    run = make_proposal(agent, merges=2, prunes=1)  # 5/20 = 25%: passes
    op = _merge_ops(run)[0]
    client.force_login(bob)
    r = client.post(
        reverse("operation_exclude", args=[run.pk, op.pk]),
        {"excluded": "1"},
        HTTP_HX_REQUEST="true",
    )
    assert r.status_code == 200
    html = r.content.decode()
    assert html.lstrip().startswith(f'<div id="op-{op.pk}" class="op excluded"')
    assert 'id="pass-summary" class="card" hx-swap-oob="true"' in html
    assert 'id="loss-fraction">15.0%' in html
    assert "Include" in html
    op.refresh_from_db()
    assert op.excluded
    run.refresh_from_db()
    assert run.loss_fraction == pytest.approx(0.15)


def test_it_includes_again_and_the_guard_verdict_flips(client: Client, bob, agent) -> None:
    run = make_proposal(agent, merges=2, prunes=2)  # 6/20 = 30%: fails
    op = _merge_ops(run)[0]
    client.force_login(bob)
    url = reverse("operation_exclude", args=[run.pk, op.pk])
    html = client.post(url, {"excluded": "1"}, HTTP_HX_REQUEST="true").content.decode()
    assert "guard passes" in html and 'id="loss-fraction">20.0%' in html
    html = client.post(url, {"excluded": "0"}, HTTP_HX_REQUEST="true").content.decode()
    assert "guard fails" in html and 'id="loss-fraction">30.0%' in html


def test_it_redirects_back_without_htmx(client: Client, bob, agent) -> None:
    run = make_proposal(agent)
    op = _merge_ops(run)[0]
    client.force_login(bob)
    r = client.post(reverse("operation_exclude", args=[run.pk, op.pk]), {"excluded": "1"})
    assert (
        r.status_code == 302
        and r["Location"] == f"{reverse('pass_detail', args=[run.pk])}#op-{op.pk}"
    )


def test_it_reports_exclude_on_a_decided_pass(client: Client, bob, agent) -> None:
    run = make_proposal(agent, status="rejected")
    op = _merge_ops(run)[0]
    client.force_login(bob)
    r = client.post(
        reverse("operation_exclude", args=[run.pk, op.pk]),
        {"excluded": "1"},
        HTTP_HX_REQUEST="true",
    )
    assert r.status_code == 200 and b"only a proposed pass can be reviewed" in r.content
    op.refresh_from_db()
    assert not op.excluded


# ----- edit merged text ------------------------------------------------------------------------


def test_it_edits_a_merged_text(client: Client, bob, agent) -> None:
    run = make_proposal(agent)
    op = _merge_ops(run)[0]
    client.force_login(bob)
    r = client.post(
        reverse("operation_edit", args=[run.pk, op.pk]), {"document": XSS}, HTTP_HX_REQUEST="true"
    )
    assert r.status_code == 200
    html = r.content.decode()
    assert ">edited<" in html and 'hx-swap-oob="true"' in html
    assert XSS not in html and "&lt;script&gt;" in html
    op.refresh_from_db()
    assert op.result_document == XSS and op.edited


_LIMIT = Policy().max_merged_chars  # the edit limit is the pass policy's max_merged_chars


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ("   ", "This field is required"),
        ("x\x00y", "Null characters are not allowed"),
        ("x" * (_LIMIT + 1), f"the limit is {_LIMIT:,}"),
    ],
)
def test_it_refuses_a_bad_merged_text(
    client: Client, bob, agent, document: str, message: str
) -> None:
    run = make_proposal(agent)
    op = _merge_ops(run)[0]
    client.force_login(bob)
    r = client.post(
        reverse("operation_edit", args=[run.pk, op.pk]),
        {"document": document},
        HTTP_HX_REQUEST="true",
    )
    assert r.status_code == 200 and message in r.content.decode()
    op.refresh_from_db()
    assert not op.edited


# ----- approve / reject ---------------------------------------------------------------------


def test_it_approves_with_a_note(client: Client, bob, agent) -> None:
    run = make_proposal(agent)
    client.force_login(bob)
    r = client.post(reverse("pass_approve", args=[run.pk]), {"note": "looks right"})
    assert r.status_code == 302 and r["Location"] == reverse("pass_detail", args=[run.pk])
    run.refresh_from_db()
    assert run.status == "approved" and run.decided_by == bob and run.note == "looks right"


def test_it_refuses_to_approve_when_the_guard_fails_now(client: Client, bob, agent) -> None:
    run = make_proposal(agent, merges=2, prunes=2)  # 30% > 25%
    client.force_login(bob)
    r = client.post(reverse("pass_approve", args=[run.pk]), {"note": ""})
    assert r.status_code == 302  # post/redirect/get, the refusal on the page it leads to
    r = client.get(r["Location"])
    assert b'id="approve-errors"' in r.content and b"Loss guard tripped" in r.content
    again = client.get(reverse("pass_detail", args=[run.pk]))
    assert b'id="approve-errors"' not in again.content  # said once
    run.refresh_from_db()
    assert run.status == "proposed"


def test_it_requires_a_note_to_reject(client: Client, bob, agent) -> None:
    run = make_proposal(agent)
    client.force_login(bob)
    r = client.post(reverse("pass_reject", args=[run.pk]), {"note": "  "})
    assert r.status_code == 200 and b"A note is required" in r.content
    run.refresh_from_db()
    assert run.status == "proposed"


def _revision(html: str) -> str:
    return re.search(r'name="revision" value="([0-9a-f]+)"', html).group(1)


def test_it_refuses_to_approve_a_plan_changed_since_the_page_was_read(
    client: Client, bob, alice, agent
) -> None:
    """Tab A shows "2 operations"; another reviewer excludes both; A's approve is
    refused with the current figures on the page, nothing approved; approving again works."""
    run = make_proposal(agent, merges=2)
    client.force_login(bob)
    html = client.get(reverse("pass_detail", args=[run.pk])).content.decode()
    assert "Approving applies: <strong>2 operations, loses" in html
    seen = _revision(html)
    operations_set_excluded(
        run=run,
        operation_ids=run.operations.values_list("pk", flat=True),
        excluded=True,
        user=alice,
    )
    r = client.post(reverse("pass_approve", args=[run.pk]), {"note": "ok", "revision": seen})
    # post/redirect/get: the browser ends on the pass page, a reload posts nothing again
    assert r.status_code == 302, r.content
    assert r["Location"] == reverse("pass_detail", args=[run.pk]) + "#review-forms"
    html = client.get(r["Location"]).content.decode()
    assert 'id="approve-errors"' in html and re.search(r">\s*ok</textarea>", html)
    assert "changed since you opened it" in html and "nothing was applied" in html
    # the refusal and the approve line beside it count the same operations, in the same words
    applies = "0 of 2 operations (2 excluded)"
    assert f"Approving applies: <strong>{applies}, loses" in html
    assert f"Approving now applies {applies}; check the figures" in html
    run.refresh_from_db()
    assert run.status == "proposed"
    assert run.events.filter(verb="approve_refused").count() == 1
    now = _revision(html)
    assert now != seen
    r = client.post(reverse("pass_approve", args=[run.pk]), {"note": "ok", "revision": now})
    assert r.status_code == 302
    run.refresh_from_db()
    assert run.status == "approved"


def test_the_note_fields_carry_their_limits_and_errors_show_at_the_form(
    client: Client, bob, agent
) -> None:
    run = make_proposal(agent)
    client.force_login(bob)
    html = client.get(reverse("pass_detail", args=[run.pk])).content.decode()
    reject = re.search(r"<textarea[^>]*id=\"reject-note\"[^>]*>", html).group(0)
    approve = re.search(r"<textarea[^>]*id=\"approve-note\"[^>]*>", html).group(0)
    assert "required" in reject and f'maxlength="{MAX_NOTE_CHARS}"' in reject
    assert "required" not in approve and f'maxlength="{MAX_NOTE_CHARS}"' in approve
    # a refused post lands at the forms (#review-forms), not 3,700 px above them
    assert f'action="{reverse("pass_reject", args=[run.pk])}#review-forms"' in html
    assert f'action="{reverse("pass_approve", args=[run.pk])}#review-forms"' in html
    r = client.post(reverse("pass_reject", args=[run.pk]), {"note": "x" * (MAX_NOTE_CHARS + 1)})
    html = r.content.decode()
    forms = html[html.index('id="review-forms"') :]
    assert f"at most {MAX_NOTE_CHARS:,}" in forms or f"at most {MAX_NOTE_CHARS}" in forms
    run.refresh_from_db()
    assert run.status == "proposed"


def test_it_rejects_with_a_note(client: Client, bob, agent) -> None:
    run = make_proposal(agent)
    client.force_login(bob)
    r = client.post(reverse("pass_reject", args=[run.pk]), {"note": XSS}, follow=True)
    assert r.status_code == 200
    run.refresh_from_db()
    assert run.status == "rejected" and run.note == XSS
    assert (
        XSS.encode() not in r.content and b"rejected" in r.content and b"dismissed" not in r.content
    )


@pytest.mark.parametrize("name", ["pass_approve", "pass_reject"])
def test_it_forbids_review_posts_for_a_viewer(client: Client, carol, agent, name: str) -> None:
    run = make_proposal(agent)
    client.force_login(carol)
    assert client.post(reverse(name, args=[run.pk]), {"note": "x"}).status_code == 403
    run.refresh_from_db()
    assert run.status == "proposed"


@pytest.mark.parametrize(
    ("name", "data"),
    [("operation_exclude", {"excluded": "1"}), ("operation_edit", {"document": "x y z"})],
)
def test_it_forbids_operation_posts_for_a_viewer(
    client: Client, carol, agent, name: str, data: dict
) -> None:
    run = make_proposal(agent)
    op = _merge_ops(run)[0]
    client.force_login(carol)
    assert (
        client.post(reverse(name, args=[run.pk, op.pk]), data, HTTP_HX_REQUEST="true").status_code
        == 403
    )
    op.refresh_from_db()
    assert not op.excluded and not op.edited


@pytest.mark.parametrize("name", ["pass_approve", "pass_reject", "operation_exclude"])
def test_it_enforces_csrf(bob, agent, name: str) -> None:
    run = make_proposal(agent)
    args = [run.pk] if name.startswith("pass") else [run.pk, _merge_ops(run)[0].pk]
    c = Client(enforce_csrf_checks=True)
    c.force_login(bob)
    assert c.post(reverse(name, args=args), {"note": "n", "excluded": "1"}).status_code == 403
    run.refresh_from_db()
    assert run.status == "proposed"


# ----- progress -----------------------------------------------------------------------------


@pytest.mark.parametrize("status", ["queued", "running", "approved", "applying"])
def test_it_polls_progress_while_active(client: Client, carol, agent, status: str) -> None:
    run = make_proposal(agent, status=status)
    Pass.objects.filter(pk=run.pk).update(progress=0.4, progress_label="Writing merged memories")
    client.force_login(carol)
    html = client.get(reverse("pass_detail", args=[run.pk])).content.decode()
    assert 'hx-trigger="every 1s"' in html
    r = client.get(reverse("pass_progress", args=[run.pk]), HTTP_HX_REQUEST="true")
    assert r.status_code == 200
    body = r.content.decode()
    assert (
        body.lstrip().startswith('<div id="pass-progress"')
        and "40%" in body
        and "Writing merged memories" in body
    )


def test_it_stops_polling_when_done(client: Client, carol, agent) -> None:
    run = make_proposal(agent, status="applied")
    client.force_login(carol)
    assert (
        'hx-trigger="every 1s"'
        not in client.get(reverse("pass_detail", args=[run.pk])).content.decode()
    )
    r = client.get(reverse("pass_progress", args=[run.pk]), HTTP_HX_REQUEST="true")
    assert r.status_code == 286 and r["HX-Refresh"] == "true"


def test_it_redirects_progress_without_htmx(client: Client, carol, agent) -> None:
    run = make_proposal(agent, status="running")
    client.force_login(carol)
    r = client.get(reverse("pass_progress", args=[run.pk]))
    assert r.status_code == 302 and r["Location"] == reverse("pass_detail", args=[run.pk])


# ----- fresh-user findings ----------------------------------------------------------------------


@pytest.mark.parametrize("htmx", [False, True], ids=["page", "htmx"])
def test_it_says_a_stale_reject_was_not_recorded_and_gives_the_note_back(
    client: Client, bob, alice, agent, htmx
) -> None:
    run = make_proposal(agent)
    pass_approve(run=run, user=alice, note="fine")  # tab A
    client.force_login(bob)
    extra = {"HTTP_HX_REQUEST": "true"} if htmx else {}
    r = client.post(
        reverse("pass_reject", args=[run.pk]), {"note": "too aggressive"}, follow=not htmx, **extra
    )
    assert r.status_code == 200
    html = r.content.decode()
    assert f"Pass #{run.pk} was already approved" in html and "by alice at" in html
    assert "your rejection was not recorded" in html and "too aggressive" in html
    run.refresh_from_db()
    assert run.note == "fine" and run.decided_by == alice


def test_it_says_a_stale_approve_was_not_recorded(client: Client, bob, alice, agent) -> None:
    run = make_proposal(agent)
    pass_reject(run=run, user=alice, note="no")
    client.force_login(bob)
    r = client.post(reverse("pass_approve", args=[run.pk]), {"note": "ship it"})
    assert r.status_code == 302 and r["Location"] == reverse("pass_detail", args=[run.pk])
    html = client.get(r["Location"]).content.decode()
    assert (
        "was already rejected by alice" in html
        and "(now rejected)" in html
        and "your approval was not recorded" in html
        and "ship it" in html
    )
    run.refresh_from_db()
    assert run.status == "rejected"


def test_it_lists_the_pass_history_with_who_did_what(client: Client, bob, carol, agent) -> None:
    run = make_proposal(agent)
    op = _merge_ops(run)[0]
    operation_set_excluded(operation=op, excluded=True, user=bob)
    pass_reject(run=run, user=bob, note="not now <b>")
    client.force_login(carol)
    html = client.get(reverse("pass_detail", args=[run.pk])).content.decode()
    section = html[html.index('id="pass-history"') : html.index("<h2>Operations</h2>")]
    assert 'data-verb="excluded"' in section and 'data-verb="rejected"' in section
    assert "bob" in section and "proposed → rejected" in section and "not now &lt;b&gt;" in section


def test_it_shows_who_rolled_back_in_the_history(client: Client, carol, bob, agent) -> None:
    run = make_proposal(agent, status="rolled_back")
    AuditEvent.objects.create(
        agent=agent,
        run=run,
        user=bob,
        actor="bob",
        verb="rollback_requested",
        from_status="applied",
        to_status="rolling_back",
        note="wrong merge",
    )
    client.force_login(carol)
    html = client.get(reverse("pass_detail", args=[run.pk])).content.decode()
    assert (
        'data-verb="rollback_requested"' in html
        and "applied → rolling back" in html
        and "wrong merge" in html
    )
    assert 'data-status="rolled_back">rolled back<' in html
    # The figures are the plan's: the page and the agent's pass list say none of it remains.
    assert 'data-testid="rolled-back-entries"' in html and "none of this change remains" in html
    listing = client.get(reverse("agent_detail", args=[agent.slug])).content.decode()
    assert 'data-testid="undone"' in listing


def test_it_explains_a_pass_that_failed_before_planning(client: Client, carol, agent) -> None:
    err = "Chroma unavailable: connection refused"
    run = Pass.objects.create(
        agent=agent, trigger="operator", status="failed", error=err, reason=err
    )
    client.force_login(carol)
    html = client.get(reverse("pass_detail", args=[run.pk])).content.decode()
    assert 'id="failed-unplanned"' in html and "nothing was written" in html
    assert html.count(err) == 1
    assert (
        "0 → 0" not in html
        and 'id="loss-fraction"' not in html
        and "proposed no operations" not in html
    )


def test_it_marks_recall_figures_as_computed_for_the_plan_as_proposed(
    client: Client, bob, agent
) -> None:
    run = make_proposal(agent)
    run.recall = {"probes": 0, "reason": "No probe queries: recall not measured."}
    run.save()
    client.force_login(bob)
    assert (
        'id="recall-as-proposed"'
        not in client.get(reverse("pass_detail", args=[run.pk])).content.decode()
    )
    op = _merge_ops(run)[0]
    r = client.post(
        reverse("operation_exclude", args=[run.pk, op.pk]),
        {"excluded": "1"},
        HTTP_HX_REQUEST="true",
    )
    assert (
        'id="recall-as-proposed"' in r.content.decode()
    )  # the out-of-band summary carries the note
    html = client.get(reverse("pass_detail", args=[run.pk])).content.decode()
    assert "computed for the plan as proposed (before your exclusions/edits)" in html


def test_it_collapses_operation_kinds_of_a_long_proposal(client: Client, bob, agent) -> None:
    client.force_login(bob)
    short = client.get(reverse("pass_detail", args=[make_proposal(agent).pk])).content.decode()
    assert '<details id="ops-merge" class="opgroup" open>' in short
    long_run = make_proposal(agent, entries_before=400, merges=60, prunes=30, reconciles=10)
    html = client.get(reverse("pass_detail", args=[long_run.pk])).content.decode()
    for kind, label in (
        ("merge", "60 merge operations · 120 memories merged into 60"),
        ("prune", "30 prune operations · 30 memories pruned"),
        ("reconcile", "10 reconcile operations · 10 memories superseded (older side)"),
    ):
        # collapsed, counted, and its rows loaded when opened (htmx), or by a link without it
        lazy = f'hx-get="?kind={kind}&{kind}_page=1" hx-trigger="toggle once"'
        assert f'<details id="ops-{kind}" class="opgroup" {lazy} hx-swap="outerHTML">' in html
        assert f'data-testid="group-{kind}">{label}</span>' in html
        assert f'href="?{kind}_page=1#ops-{kind}">show them</a>' in html
    assert 'data-kind="' not in html  # no operation row: a long proposal's page stays small
    named = client.get(reverse("pass_detail", args=[long_run.pk]), {"prune_page": 1})
    named = named.content.decode()
    assert '<details id="ops-prune" class="opgroup" open>' in named
    assert named.count('data-kind="prune"') == 20 and 'data-kind="merge"' not in named
    page2 = client.get(
        reverse("pass_detail", args=[long_run.pk]),
        {"kind": "merge", "merge_page": 2},
        HTTP_HX_REQUEST="true",
    )
    assert (
        page2.content.decode().lstrip().startswith('<details id="ops-merge" class="opgroup" open>')
    )


def test_it_highlights_agents_not_audit_on_a_pass_page(client: Client, carol, agent) -> None:
    run = make_proposal(agent)
    client.force_login(carol)
    html = client.get(reverse("pass_detail", args=[run.pk])).content.decode()
    assert (
        'href="/agents/" aria-current="page"' in html
        and 'href="/audit/" aria-current="page"' not in html
    )


def test_it_shows_a_friendly_403_with_navigation(client: Client, carol, agent) -> None:
    run = make_proposal(agent)
    client.force_login(carol)
    r = client.post(reverse("pass_approve", args=[run.pk]), {"note": "x"})
    html = r.content.decode()
    assert (
        r.status_code == 403
        and 'id="forbidden"' in html
        and 'class="mainnav"' in html
        and "carol" in html
    )


def test_it_serves_a_favicon(client: Client) -> None:
    r = client.get("/favicon.ico")  # no login needed
    assert r.status_code == 301 and r["Location"].endswith("favicon.svg")
    html = Client().get(reverse("login")).content.decode()
    assert 'rel="icon"' in html and "favicon.svg" in html


@pytest.mark.parametrize("status", ["queued", "running"])
def test_a_queued_or_running_pass_shows_one_state(client: Client, carol, agent, status) -> None:
    run = Pass.objects.create(agent=agent, trigger="operator", status=status)
    client.force_login(carol)
    html = client.get(reverse("pass_detail", args=[run.pk])).content.decode()
    assert 'id="pass-progress"' in html and 'id="planning-note"' in html
    assert "not evaluated" not in html and "0 → 0" not in html


def test_a_pass_run_with_another_policy_says_so(client: Client, carol, agent) -> None:
    named = make_proposal(agent)
    named.telemetry = {"policy_override": "aggressive"}
    named.max_loss_fraction = 0.9
    named.save()
    client.force_login(carol)
    html = client.get(reverse("pass_detail", args=[named.pk])).content.decode()
    assert "This pass ran with the “aggressive” policy, not the agent&#x27;s own" in html

    changed = make_proposal(agent, status="applied")
    changed.policy = {"link_threshold": 0.8}
    changed.save()
    html = client.get(reverse("pass_detail", args=[changed.pk])).content.decode()
    assert "The agent&#x27;s policy changed after this pass ran (link threshold)" in html
    plain = make_proposal(agent)
    assert (
        'data-testid="policy-note"'
        not in client.get(reverse("pass_detail", args=[plain.pk])).content.decode()
    )


def test_approve_is_disabled_with_what_would_make_the_loss_guard_pass(
    client: Client, bob, agent
) -> None:
    run = make_proposal(agent, merges=3, entries_before=20, max_loss_fraction=0.1)
    client.force_login(bob)
    html = client.get(reverse("pass_detail", args=[run.pk])).content.decode()
    assert re.search(r'id="approve-btn"[^>]*disabled', html)
    blocked = re.search(r'data-testid="approve-blocked">([^<]+)<', html).group(1)
    # 6 originals removed, the threshold allows 2: two merges of two must go
    assert blocked.startswith("Loss guard tripped")
    assert "Exclude at least 2 operations to approve (they remove 4 more originals than the 2" in (
        blocked
    )
    for op in run.operations.order_by("index")[:2]:
        r = client.post(
            reverse("operation_exclude", args=[run.pk, op.pk]),
            {"excluded": "1"},
            HTTP_HX_REQUEST="true",
        )
    html = r.content.decode()
    assert 'id="approve-btn"' in html and not re.search(r'id="approve-btn"[^>]*disabled', html)
    assert 'data-testid="approve-blocked"' not in html


def test_one_of_a_kind_is_said_in_the_singular_and_the_header_says_who_asked(
    client: Client, bob, agent
) -> None:
    from memoryadmin.proposals.selectors.review import group_words

    run = make_proposal(agent, merges=0, prunes=1)
    Pass.objects.filter(pk=run.pk).update(requested_by=bob)
    client.force_login(bob)
    html = client.get(reverse("pass_detail", args=[run.pk])).content.decode()
    assert 'data-testid="loss-arithmetic">= 1 original removed ÷ 20 originals before<' in html
    assert "(1 original removed, 0 memories written: 1 fewer)" in html
    assert 'data-testid="pass-origin">requested by bob ·' in html
    assert group_words("merge", "near_duplicate", count=1) == "near-duplicate merge"
    assert group_words("merge", "x_rule", count=1) == "merge (x rule)"


def test_who_requested_a_pass_is_one_answer_on_the_header_history_audit_and_api(
    client: Client, alice, bob, carol, agent
) -> None:
    """The demo asks for its passes as "demo" (no user): the header, the History's first row,
    the audit CSV and the API's requested_by all say "demo"."""
    from memoryadmin.proposals.services.passes import pass_request
    from tests.api.api_helpers import api_factory

    run = pass_request(agent=agent, trigger=Pass.Trigger.OPERATOR, actor="demo")
    client.force_login(bob)
    html = client.get(reverse("pass_detail", args=[run.pk])).content.decode()
    assert 'data-testid="pass-origin">requested by demo ·' in html
    first = re.search(r'<tr data-verb="requested">.*?</tr>', html, re.S)
    assert first and "<td>demo</td>" in first.group(0)
    api = api_factory(alice, bob, carol)("viewer").get(f"/passes/{run.pk}").json()
    assert api["requested_by"] == "demo"
    scheduled = pass_request(
        agent=Agent.objects.create(name="Other", slug="other"),
        trigger=Pass.Trigger.SCHEDULE,
        actor="schedule",
    )
    page = client.get(reverse("pass_detail", args=[scheduled.pk])).content.decode()
    assert 'data-testid="pass-origin">scheduled run ·' in page
    assert (
        api_factory(alice, bob, carol)("viewer")
        .get(f"/passes/{scheduled.pk}")
        .json()["requested_by"]
        is None
    )


@pytest.mark.parametrize("status", ["rejected_by_guard", "stale"])
def test_approving_a_pass_nobody_decided_says_what_it_is(
    client: Client, alice, agent, status
) -> None:
    """A fresh operator approving a pass the loss guard rejected read "was already approved":
    nobody had approved it. The refusal names the pass's state instead."""
    run = make_proposal(agent, status=status)
    client.force_login(alice)
    r = client.post(reverse("pass_approve", args=[run.pk]), {"note": ""}, follow=True)
    html = r.content.decode()
    assert "already approved" not in html
    assert f"Pass #{run.pk} is " in html and "your approval was not recorded" in html
    run.refresh_from_db()
    assert run.status == status
