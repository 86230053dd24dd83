"""Deciding a conflict on the proposal page: keep A, keep B or keep both, with
htmx (both cards, the summary and the approve line swapped out of band) and without (a plain
form post back to the page); only reviewers may decide."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from django.urls import reverse

from memoryadmin.proposals.models import Operation, Pass
from memoryadmin.proposals.services.passes import pass_request, pass_run
from memoryadmin.proposals.services.review import pass_reject
from tests.conftest import DISTINCT_FACTS

pytestmark = pytest.mark.django_db

CONTRADICTION = ["Is allergic to penicillin", "Is not allergic to penicillin"]
SAME_TIME = [{"created_at": "2025-03-01T00:00:00+00:00"}] * 2


@pytest.fixture
def conflict(agent_with_memories) -> Operation:
    """The conflict of a proposed pass over 8 memories (one removed stays under the guard)."""
    agent = agent_with_memories(CONTRADICTION + DISTINCT_FACTS[:6], SAME_TIME + [{}] * 6)
    run = pass_run(run=pass_request(agent=agent, trigger="operator"))
    assert run.status == Pass.Status.PROPOSED
    return run.operations.get(kind=Operation.Kind.CONFLICT)


def _url(op: Operation) -> str:
    return reverse("conflict_resolve", args=[op.run_id, op.pk])


def test_keep_a_with_htmx_updates_both_cards_and_the_figures(client: Client, bob, conflict) -> None:
    client.force_login(bob)
    r = client.post(_url(conflict), {"keep": "a"}, HTTP_HX_REQUEST="true")
    assert r.status_code == 200
    html = r.content.decode()
    for part in (
        f'id="op-{conflict.pk}"',
        f'id="rv-{conflict.pk}"',
        'id="pass-summary"',
        'id="approve-line"',
        'id="review-totals"',
    ):
        assert part in html and html.count('hx-swap-oob="true"') >= 5
    assert 'data-decided="a"' in html and "Decided by bob" in html
    assert re.search(r"Decided by bob at \d{4}-\d\d-\d\d \d\d:\d\d:\d\d", html)
    assert "removed on apply" in html and "12.5%" in html  # 1 of 8 memories now counts
    conflict.refresh_from_db()
    assert conflict.kind == "reconcile" and conflict.rule == "reviewer_pick"
    # the Lost content tab's badge and the totals' sentence count the same sentences
    badge = re.search(r'id="lost-badge"[^>]*hx-swap-oob="true">(\d+)<', html)
    lost = re.search(r'data-testid="lost-sentences">(\d+) sentence', html)
    assert badge and lost and badge.group(1) == lost.group(1)


def test_keep_a_from_the_review_tab_swaps_no_row_the_page_does_not_hold(
    client: Client, bob, conflict
) -> None:
    """review.js sends ``shown`` (the "All operations" rows on the page): a group never opened
    holds none, so the answer must carry no out-of-band row for it (htmx:oobErrorNoTarget)."""
    client.force_login(bob)
    url = _url(conflict)
    html = client.post(url, {"keep": "a", "shown": ""}, HTTP_HX_REQUEST="true").content.decode()
    assert f'id="op-{conflict.pk}"' not in html and f'id="rv-{conflict.pk}"' in html
    assert 'id="pass-summary"' in html
    client.post(url, {"keep": "both"}, HTTP_HX_REQUEST="true")
    shown = {"keep": "b", "shown": f"1,{conflict.pk}"}
    html = client.post(url, shown, HTTP_HX_REQUEST="true").content.decode()
    assert f'id="op-{conflict.pk}"' in html


def test_keep_both_without_htmx_redirects_to_the_page(client: Client, bob, conflict) -> None:
    client.force_login(bob)
    r = client.post(_url(conflict), {"keep": "both"})
    assert r.status_code == 302
    assert r["Location"] == f"{reverse('pass_detail', args=[conflict.run_id])}#op-{conflict.pk}"
    html = client.get(r["Location"]).content.decode()
    assert "Conflict #0: kept both." in html and 'data-decided="both"' in html
    assert "both kept, nothing is removed" in html and "undecided conflict" not in html


def test_a_bad_choice_shows_the_error_and_changes_nothing(client: Client, bob, conflict) -> None:
    client.force_login(bob)
    html = client.post(_url(conflict), {"keep": "c"}, HTTP_HX_REQUEST="true").content.decode()
    assert "Choose which memory to keep: a, b or both." in html
    r = client.post(_url(conflict), {"keep": "c"}, follow=True)
    assert "Choose which memory to keep: a, b or both." in r.content.decode()
    conflict.refresh_from_db()
    assert conflict.kind == "conflict" and "decision" not in conflict.scores


def test_a_decided_pass_refuses_with_the_reason(client: Client, bob, conflict) -> None:
    pass_reject(run=conflict.run, user=bob, note="later")
    client.force_login(bob)
    html = client.post(_url(conflict), {"keep": "a"}, HTTP_HX_REQUEST="true").content.decode()
    assert "only a proposed pass can be reviewed" in html
    page = client.get(reverse("pass_detail", args=[conflict.run_id])).content.decode()
    assert "data-conflict-keep" not in page  # no choices on a settled pass


def test_a_viewer_sees_the_conflict_but_cannot_decide(client: Client, carol, conflict) -> None:
    client.force_login(carol)
    page = client.get(reverse("pass_detail", args=[conflict.run_id])).content.decode()
    assert 'data-testid="conflict"' in page and "data-conflict-keep" not in page
    assert client.post(_url(conflict), {"keep": "a"}).status_code == 403
    conflict.refresh_from_db()
    assert conflict.kind == "conflict"


def test_get_is_not_allowed(client: Client, bob, conflict) -> None:
    client.force_login(bob)
    assert client.get(_url(conflict)).status_code == 405


def test_anonymous_is_sent_to_login(client: Client, conflict) -> None:
    r = client.post(_url(conflict), {"keep": "a"})
    assert r.status_code == 302 and r["Location"].startswith(reverse("login"))
    conflict.refresh_from_db()
    assert conflict.kind == "conflict"


def test_an_operation_of_another_pass_is_404(client: Client, bob, conflict) -> None:
    client.force_login(bob)
    url = reverse("conflict_resolve", args=[conflict.run_id + 1, conflict.pk])
    assert client.post(url, {"keep": "a"}).status_code == 404


def test_a_missing_pass_is_a_404_page_in_the_console_layout(client: Client, bob) -> None:
    client.force_login(bob)
    r = client.get("/passes/999999/")
    html = r.content.decode()
    assert r.status_code == 404
    assert "Not found" in html and "/passes/999999/" in html and "Back to the dashboard" in html
    assert "<nav" in html  # the console's navigation, not Django's bare page


def test_a_conflict_decided_keep_both_stays_in_the_review_list_shown_decided(
    client: Client, bob, conflict
) -> None:
    """Before: "keep both" scored the conflict 0 and it left the Review list for a
    collapsed group at the bottom of the page."""
    client.force_login(bob)
    client.post(_url(conflict), {"keep": "both"}, HTTP_HX_REQUEST="true")
    page = client.get(reverse("pass_detail", args=[conflict.run_id])).content.decode()
    review_list = page.split('id="review-list"', 1)[1].split('id="review-rest"', 1)[0]
    assert f'id="rv-{conflict.pk}"' in review_list
    assert 'data-decided="both"' in review_list and 'data-testid="rv-moved"' not in review_list


def test_a_decided_conflict_is_still_decided_after_a_forget(bob, conflict) -> None:
    """Before: a forget emptied the operation's scores, the decision with them, and
    the (now stale) pass said "Conflicts: 1 undecided"."""
    from memoryadmin.memories.selectors.forget import ForgetSelection
    from memoryadmin.memories.services.forget import forget_approve, forget_request_create
    from memoryadmin.proposals.selectors.review import conflict_counts
    from memoryadmin.proposals.services.review import conflict_resolve

    conflict_resolve(operation=conflict, keep="both", user=bob)
    req, _ = forget_request_create(
        agent=conflict.run.agent, selection=ForgetSelection("contains", text="penicillin"), user=bob
    )
    forget_approve(request=req, user=bob)
    conflict.refresh_from_db()
    assert "penicillin" not in str(conflict.scores)
    assert conflict_counts(conflict.run) == {"total": 1, "picked": 0, "both": 1, "undecided": 0}


def test_an_answer_swaps_no_review_card_the_page_does_not_hold(
    client: Client, bob, conflict
) -> None:
    """Before: deciding from "All operations" while the Review list shows another
    page sent ``#rv-N`` out of band with no target (htmx: oobErrorNoTarget). review.js now
    says which cards the page holds (``rv_shown``)."""
    client.force_login(bob)
    post = {"keep": "both", "rv_shown": ""}
    html = client.post(_url(conflict), post, HTTP_HX_REQUEST="true").content.decode()
    assert f'id="rv-{conflict.pk}"' not in html and 'id="pass-summary"' in html
    post = {"keep": "a", "rv_shown": f"1,{conflict.pk}"}
    html = client.post(_url(conflict), post, HTTP_HX_REQUEST="true").content.decode()
    assert f'id="rv-{conflict.pk}"' in html


def test_a_decided_conflict_no_longer_says_it_waits(client: Client, bob, agent_with_memories):
    """Auto-apply ``safe`` leaves the conflict for a person ("Waits for a person: …" on its
    card); once a reviewer kept A, the card says who decided, not that it still waits."""
    texts = CONTRADICTION + [DISTINCT_FACTS[0]] * 2 + DISTINCT_FACTS[1:6]
    agent = agent_with_memories(texts, SAME_TIME + [{}] * 7, auto_apply="safe")
    pass_run(run=pass_request(agent=agent, trigger="operator"))
    op = Operation.objects.get(run__agent=agent, kind=Operation.Kind.CONFLICT)
    assert op.run.status == Pass.Status.PROPOSED and op.scores.get("waiting")
    client.force_login(bob)
    page = reverse("pass_detail", args=[op.run_id])
    before = client.get(page, {"tab": "review"}).content.decode()
    assert 'data-testid="rv-waiting"' in before
    html = client.post(_url(op), {"keep": "a"}, HTTP_HX_REQUEST="true").content.decode()
    assert "Decided by bob" in html and 'data-testid="rv-waiting"' not in html
    for tab in ("review", "operations"):
        after = client.get(page, {"tab": tab}).content.decode()
        assert "Decided by bob" in after
        assert 'data-testid="rv-waiting"' not in after
        assert 'data-testid="waiting-reasons"' not in after


def test_the_conflicts_of_a_long_pass_are_open_in_all_operations(
    client: Client, bob, agent_with_memories
) -> None:
    """A pass of more than ten operations shows its groups collapsed, but not its conflicts:
    a conflict decided "keep both" stays in view with its decision, not in a closed group."""
    dupes = [t for t in DISTINCT_FACTS[:12] for _ in range(2)]
    agent = agent_with_memories(
        CONTRADICTION + dupes, SAME_TIME + [{}] * 24, policy={"max_loss_fraction": 1.0}
    )
    run = pass_run(run=pass_request(agent=agent, trigger="operator"))
    op = run.operations.get(kind=Operation.Kind.CONFLICT)
    assert run.operations.count() > 10
    client.force_login(bob)
    client.post(_url(op), {"keep": "both"})
    html = client.get(reverse("pass_detail", args=[run.pk])).content.decode()
    assert '<details id="ops-conflict" class="opgroup" open>' in html
    assert '<details id="ops-merge" class="opgroup" hx-get=' in html  # the rest collapsed
    assert f'id="op-{op.pk}"' in html and "both kept, nothing is removed" in html
