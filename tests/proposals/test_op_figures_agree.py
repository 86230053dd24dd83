"""Each operation's lost content uses the pass's definition and adds up to the pass's figure,
wherever it shows (the Review tab, the API, the stored figures): a word counts as lost only
when no memory keeps it after the pass as it stands, once, under the first operation that
loses it; excluding an operation whose memory then stays changes its neighbours' figures."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from django.urls import reverse

from consolidation.review import OperationLoss
from memoryadmin.proposals.models import Pass
from memoryadmin.proposals.selectors.scoring import pass_loss_figures, pass_loss_totals
from memoryadmin.proposals.services.review import operation_edit_text, operation_set_excluded
from tests.api.api_helpers import api_factory
from tests.proposals.test_pass_counts import run_pass

pytestmark = pytest.mark.django_db

OLD = {"importance": 0.01, "created_at": "2020-01-01T00:00:00+00:00"}
TEXTS = [
    "Dana Lee said the weather in Boston was lovely today.",
    "Omar Shah said the weather in Denver was lovely today.",
    "Priya Berg said the weather in Lisbon was lovely today.",
    "Dana Lee works at Globex in Boston as a compliance manager.",
    "Omar Shah moved to Denver and runs the Initech support desk.",
    "Priya Berg leads the Lisbon office of Acme Corp.",
    "The quarterly audit is scheduled for the first week of March.",
    "Invoices are sent on the 5th of each month by the billing team.",
]
META = [OLD, OLD, OLD] + [{}] * 5
_EXCLUDED = 'class="rv-op excluded"'
WORD = re.compile(r"loses (\d+) content words?:")


def _ops_words(run: Pass) -> tuple[int, set[str]]:
    """Sum of the included operations' counted words, and the words they lose (casefolded)."""
    total, words = 0, set()
    for op in run.operations.exclude(status="excluded"):
        loss = OperationLoss.from_dict(op.lost)
        total += len(loss.counted_words)
        words |= {w.casefold() for w in loss.content_words}
    return total, words


def _page_words(client: Client, run: Pass) -> tuple[int, int]:
    """(sum of "loses N content words" over the Review tab's cards of included operations, the
    tab's total; 0 when it says nothing is lost)."""
    html = client.get(reverse("pass_detail", args=[run.pk]), {"risk": "all"}).content.decode()
    cards = [c for c in html.split('<article id="rv-')[1:] if _EXCLUDED not in c.split(">", 1)[0]]
    found = sum(int(n) for c in cards for n in WORD.findall(c.split("</article>")[0]))
    m = re.search(r"\((\d+) content words?", html)
    return found, int(m.group(1)) if m else 0


def test_the_operations_lost_words_add_up_to_the_pass_figure_on_every_page(
    client: Client, alice, agent_with_memories, django_capture_on_commit_callbacks
):
    agent = agent_with_memories(
        TEXTS, META, policy={"max_loss_fraction": 0.5, "max_lost_content_words": None}
    )
    run = run_pass(agent, django_capture_on_commit_callbacks)
    prunes = list(run.operations.filter(kind="prune").order_by("index"))
    assert len(prunes) == 3, [(o.kind, o.rule, o.source_ids) for o in run.operations.all()]
    losses = [OperationLoss.from_dict(op.lost) for op in prunes]
    # the names and cities stay in the facts: no prune loses them
    for loss in losses:
        lost = {w.casefold() for w in loss.content_words}
        assert not lost & {"dana", "lee", "omar", "shah", "priya", "berg", "boston", "denver"}
        assert {"weather", "lovely", "today"} <= lost
    # the shared words counted under the first prune only
    assert {"weather", "lovely", "today"} <= {w.casefold() for w in losses[0].counted_words}
    for loss in losses[1:]:
        assert {w for w, n in loss.shared} >= {"weather", "lovely", "today"}
        assert {n for _, n in loss.shared} == {prunes[0].index}

    totals = pass_loss_figures(run)
    n_ops, words = _ops_words(run)
    assert n_ops == totals.content_words == len(words) == pass_loss_totals(run).content_words
    assert sum(op.lost_sentences for op in run.operations.all()) == totals.sentences

    client.force_login(alice)
    cards, tab_total = _page_words(client, run)
    assert cards == tab_total == totals.content_words
    html = client.get(reverse("pass_detail", args=[run.pk]), {"risk": "all"}).content.decode()
    assert f"counted under #{prunes[0].index}, which loses them too" in html

    # each memory page says what its operation loses, in the same figures
    on_pages = 0
    for op in run.operations.filter(lost_sentences__gt=0).exclude(status="excluded"):
        url = reverse("memory_detail", args=[agent.slug])
        page = client.get(url, {"id": op.removes[0]}).content.decode()
        m = re.search(r'data-testid="op-loses">(\d+) sentences?, (\d+) content words?<', page)
        assert m, page[-3000:]
        assert int(m.group(1)) == op.lost_sentences
        on_pages += int(m.group(2))
    assert on_pages == totals.content_words

    api = api_factory(alice, alice, alice)("viewer")
    detail = api.get(f"/passes/{run.pk}").json()
    assert detail["content_guard"]["lost_content_words"] == totals.content_words
    items = detail["items"]
    assert sum(len(i["lost_content_words"]) for i in items) == totals.content_words
    first = next(i for i in items if i["index"] == prunes[1].index)
    assert first["shared_content_words"]["weather"] == prunes[0].index

    # excluding the first prune keeps its memory, which keeps the shared words: the others
    # no longer lose them, and the figures still add up
    operation_set_excluded(operation=prunes[0], excluded=True, user=alice)
    run.refresh_from_db()
    after = pass_loss_figures(run)
    n_ops, words = _ops_words(run)
    assert n_ops == after.content_words == len(words)
    assert not words & {"weather", "lovely", "today"}
    assert after.content_words < totals.content_words
    cards, tab_total = _page_words(client, run)
    assert cards == tab_total == after.content_words
    assert (
        "counted under"
        not in client.get(reverse("pass_detail", args=[run.pk]), {"risk": "all"}).content.decode()
    )


def test_an_edit_that_drops_words_changes_the_figures_that_still_add_up(
    alice, agent_with_memories, django_capture_on_commit_callbacks
):
    jon = "Jon's favourite board game is Settlers of Catan."
    texts = [*TEXTS, jon, jon]  # an exact duplicate pair: one merge
    agent = agent_with_memories(
        texts, [*META, {}, {}], policy={"max_loss_fraction": 0.5, "max_lost_content_words": None}
    )
    run = run_pass(agent, django_capture_on_commit_callbacks)
    merge = run.operations.filter(kind="merge").first()
    assert merge is not None, [(o.kind, o.rule) for o in run.operations.all()]
    before = pass_loss_figures(run)
    operation_edit_text(operation=merge, document="Jon's favourite game is Catan.", user=alice)
    run.refresh_from_db()
    merge.refresh_from_db()
    after = pass_loss_figures(run)
    assert {"board", "settlers"} <= {
        w.casefold() for w in OperationLoss.from_dict(merge.lost).counted_words
    }
    assert after.content_words > before.content_words
    n_ops, words = _ops_words(run)
    assert n_ops == after.content_words == len(words) == pass_loss_totals(run).content_words
