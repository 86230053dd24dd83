"""The Review list keeps what it held until the reviewer reloads.

Excluding one prune re-measured what the others lose, their risk fell below the line, and 13
similar prunes silently left a 69-operation list (69 → 56) while the reviewer worked through it.
"""

from __future__ import annotations

import re

import pytest
from django.test import Client
from django.urls import reverse

from memoryadmin.agents.models import Agent
from memoryadmin.proposals.models import Pass
from tests.proposals.make import make_proposal

pytestmark = pytest.mark.django_db


def _listed(html: str) -> set[int]:
    part = html.split('id="review-list"', 1)[1].split("</section>", 1)[0]
    return {int(pk) for pk in re.findall(r'<article id="rv-(\d+)"', part)}


@pytest.fixture
def run(unique_name) -> Pass:
    agent = Agent.objects.create(
        name="Support bot", slug=unique_name("a"), collection_name=unique_name("c")
    )
    run = make_proposal(agent, entries_before=40, merges=0, prunes=4)
    run.operations.update(risk=0.6)  # all four above the line (0.3): the list a reviewer opens
    return run


def test_operations_that_fall_below_the_line_stay_listed_until_a_reload(
    client: Client, bob, run
) -> None:
    client.force_login(bob)
    page = client.get(reverse("pass_detail", args=[run.pk])).content.decode()
    ops = list(run.operations.order_by("index"))
    assert _listed(page) == {op.pk for op in ops}
    # Excluding the first re-measures what the others lose (their risk is stored anew) …
    form = {"scope": "selected", "ops": ops[0].pk, "action": "exclude"}
    html = client.post(
        reverse("review_bulk", args=[run.pk]), form, HTTP_HX_REQUEST="true"
    ).content.decode()
    assert _listed(html) == {op.pk for op in ops}
    # … say two of them now score below the line: the next render (a page, a filter, the next
    # exclude) still lists them, marked, and says so.
    run.operations.filter(pk__in=[ops[1].pk, ops[2].pk]).update(risk=0.1)
    html = client.get(
        reverse("pass_review", args=[run.pk]), HTTP_HX_REQUEST="true"
    ).content.decode()
    assert _listed(html) == {op.pk for op in ops}
    assert "2 operations moved below the risk line since you opened this list" in html
    assert html.count('data-testid="rv-moved"') == 2
    # A reload shows the list as it stands now, and nothing moved since.
    page = client.get(reverse("pass_detail", args=[run.pk])).content.decode()
    assert _listed(page) == {ops[0].pk, ops[3].pk}
    assert 'data-testid="review-moves"' not in page
