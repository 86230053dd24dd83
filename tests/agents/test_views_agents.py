"""Agents: list, detail, create, edit (policy + cron preview), delete, "Run now"."""

from __future__ import annotations

import re
from dataclasses import fields

import pytest
from django.test import Client
from django.urls import reverse

from consolidation import Policy
from memoryadmin.agents.models import Agent
from memoryadmin.core.models import AuditEvent
from memoryadmin.proposals.models import Pass
from memoryadmin.proposals.services.review import operation_edit_text, operation_set_excluded
from tests.conftest import XSS

pytestmark = pytest.mark.django_db


def _create_data(unique_name, **over) -> dict:
    data = {
        "name": "New bot",
        "slug": unique_name("new"),
        "collection_name": unique_name("coll"),
        "schedule_cron": "0 3 * * *",
        "schedule_enabled": "on",
        **{
            f"policy_{k}": ("on" if v is True else "" if v is False or v is None else v)
            for k, v in Policy().to_dict().items()
        },
    }
    data.update(over)
    return {k: v for k, v in data.items() if v != ""}


def _edit_data(agent: Agent, **over) -> dict:
    data = {
        "name": agent.name,
        "description": "",
        "schedule_cron": agent.schedule_cron,
        "schedule_enabled": "on",
        **{
            f"policy_{k}": ("on" if v is True else "" if v is False or v is None else v)
            for k, v in agent.get_policy().to_dict().items()
        },
    }
    data.update(over)
    return {k: v for k, v in data.items() if v != ""}


# ----- reads -------------------------------------------------------------------------------


def test_it_lists_agents_for_a_viewer(bare_agent, client: Client, carol) -> None:
    agent = bare_agent(name=XSS)
    client.force_login(carol)
    r = client.get(reverse("agent_list"))
    assert r.status_code == 200
    assert agent.collection_name.encode() in r.content
    assert XSS.encode() not in r.content and b"&lt;script&gt;" in r.content
    assert b"New agent" not in r.content  # viewers are not offered writes


def test_it_shows_agent_detail_with_store_unavailable(bare_agent, client: Client, carol) -> None:
    agent = bare_agent(description=XSS)
    client.force_login(carol)
    r = client.get(reverse("agent_detail", args=[agent.slug]))
    assert r.status_code == 200
    assert b"unavailable" in r.content
    assert XSS.encode() not in r.content


def test_it_shows_the_create_form_with_every_policy_field(client: Client, alice) -> None:
    client.force_login(alice)
    r = client.get(reverse("agent_create"))
    assert r.status_code == 200
    html = r.content.decode()
    for f in fields(Policy):
        assert f'name="policy_{f.name}"' in html, f.name
    assert 'value="0.25"' in html  # max_loss_fraction default
    assert "Loss guard" in html  # help text
    for key in ("created_at", "importance", "tier", "pinned"):
        assert f'name="field_{key}"' in html


@pytest.mark.parametrize("user", ["bob", "carol"])
def test_it_forbids_the_create_form_without_manage(client: Client, user: str, request) -> None:
    client.force_login(request.getfixturevalue(user))
    assert client.get(reverse("agent_create")).status_code == 403


# ----- create ------------------------------------------------------------------------------


def test_it_creates_an_agent_and_its_collection(client: Client, alice, unique_name) -> None:
    from memoryadmin.core import stores

    client.force_login(alice)
    data = _create_data(unique_name, policy_max_loss_fraction="0.3", field_tier="layer")
    r = client.post(reverse("agent_create"), data)
    assert r.status_code == 302, r.content.decode()[:2000]
    agent = Agent.objects.get(slug=data["slug"])
    assert agent.get_policy().max_loss_fraction == 0.3
    assert agent.get_field_map().tier == "layer"
    assert stores.collection_exists(agent.collection_name)
    assert r["Location"] == reverse("agent_detail", args=[agent.slug])


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("policy_max_loss_fraction", "NaN"),
        ("policy_max_loss_fraction", "inf"),
        ("policy_max_loss_fraction", "-1"),
        ("policy_max_loss_fraction", "2"),
        ("policy_max_loss_fraction", "abc"),
        ("policy_link_threshold", "1.5"),
        ("policy_max_group_size", "1"),
        ("policy_recall_k", "abc"),
        ("schedule_cron", "61 * * * *"),
        ("schedule_cron", "every day"),
        ("collection_name", "ab"),
        ("collection_name", "-bad-start"),
        ("collection_name", "has space"),
        ("collection_name", "a..b"),
        ("collection_name", "192.168.1.1"),
        ("slug", "not a slug"),
    ],
)
def test_it_rerenders_create_errors_at_200(
    client: Client, alice, unique_name, field: str, value: str
) -> None:
    client.force_login(alice)
    data = _create_data(unique_name, **{field: value})
    r = client.post(reverse("agent_create"), data)
    assert r.status_code == 200
    assert r.context["form"].errors.get(field), r.context["form"].errors
    assert not Agent.objects.filter(slug=data["slug"]).exists()


def test_it_refuses_attaching_a_missing_collection(client: Client, alice, unique_name) -> None:
    client.force_login(alice)
    r = client.post(reverse("agent_create"), _create_data(unique_name, attach="on"))
    assert r.status_code == 200
    assert "collection_name" in r.context["form"].errors


def test_it_attaches_an_existing_collection(client: Client, alice, unique_name) -> None:
    from memoryadmin.core import stores

    name = unique_name("existing")
    stores.create_collection(name)
    client.force_login(alice)
    r = client.post(
        reverse("agent_create"),
        _create_data(
            unique_name,
            collection_name=name,
            attach="on",
            field_created_at="ts",
            field_pinned="keep",
        ),
    )
    assert r.status_code == 302
    agent = Agent.objects.get(collection_name=name)
    assert (
        agent.attached
        and agent.get_field_map().created_at == "ts"
        and agent.get_field_map().pinned == "keep"
    )


def test_it_forbids_create_post_for_a_reviewer(client: Client, bob, unique_name) -> None:
    client.force_login(bob)
    data = _create_data(unique_name)
    assert client.post(reverse("agent_create"), data).status_code == 403
    assert not Agent.objects.filter(slug=data["slug"]).exists()


# ----- edit --------------------------------------------------------------------------------


def test_it_edits_policy_and_schedule(bare_agent, client: Client, alice) -> None:
    agent = bare_agent()
    client.force_login(alice)
    r = client.get(reverse("agent_edit", args=[agent.slug]))
    assert r.status_code == 200 and b'name="policy_prune_half_life_days"' in r.content
    data = _edit_data(
        agent,
        name="Renamed",
        policy_max_loss_fraction="0.1",
        auto_apply="safe",
        schedule_cron="15 2 * * 1",
    )
    data.pop("schedule_enabled")
    r = client.post(reverse("agent_edit", args=[agent.slug]), data)
    assert r.status_code == 302
    agent.refresh_from_db()
    assert (agent.name, agent.auto_apply, agent.schedule_cron, agent.schedule_enabled) == (
        "Renamed",
        "safe",
        "15 2 * * 1",
        False,
    )
    assert agent.get_policy().max_loss_fraction == 0.1


@pytest.mark.parametrize("value", ["NaN", "inf", "-inf", "-1", "2", "abc", ""])
def test_it_rerenders_edit_errors_at_200(bare_agent, client: Client, alice, value: str) -> None:
    agent = bare_agent()
    client.force_login(alice)
    r = client.post(
        reverse("agent_edit", args=[agent.slug]), _edit_data(agent, policy_max_loss_fraction=value)
    )
    assert r.status_code == 200
    assert r.context["form"].errors.get("policy_max_loss_fraction")
    agent.refresh_from_db()
    assert agent.policy == {}


def test_it_rerenders_a_bad_cron_with_the_preview_error(bare_agent, client: Client, alice) -> None:
    agent = bare_agent()
    client.force_login(alice)
    r = client.post(
        reverse("agent_edit", args=[agent.slug]), _edit_data(agent, schedule_cron="0 25 * * *")
    )
    assert r.status_code == 200
    assert r.context["form"].errors.get("schedule_cron")
    html = r.content.decode()
    body = html[html.index("<legend>Agent</legend>") :]  # the form, after the error summary
    assert "Schedule (cron)</a>: Invalid cron expression" in html[: len(html) - len(body)]
    assert body.count("Invalid cron expression") == 1  # once: by the field, not in the preview


def test_it_forbids_edit_for_viewer_and_reviewer(bare_agent, client: Client, bob, carol) -> None:
    agent = bare_agent()
    for user in (bob, carol):
        client.force_login(user)
        assert (
            client.post(
                reverse("agent_edit", args=[agent.slug]), _edit_data(agent, name="x")
            ).status_code
            == 403
        )
    agent.refresh_from_db()
    assert agent.name == "Bare agent"


# ----- cron preview -------------------------------------------------------------------------


def test_it_previews_the_next_five_runs_in_the_operators_zone(client: Client, carol) -> None:
    client.force_login(carol)
    r = client.get(
        reverse("schedule_preview"),
        {"schedule_cron": "0 3 * * *", "tz": "Asia/Tokyo"},
        HTTP_HX_REQUEST="true",
    )
    assert r.status_code == 200
    html = r.content.decode()
    assert html.lstrip().startswith('<div id="cron-preview"')
    assert html.count('<li class="mono">') == 5
    assert html.count(" 03:00 ") == 0  # 03:00 UTC is 12:00 in Tokyo
    assert html.count(" 12:00 JST") == 5 and "Asia/Tokyo" in html


def test_it_previews_a_bad_cron_as_an_error(client: Client, carol) -> None:
    client.force_login(carol)
    r = client.get(reverse("schedule_preview"), {"schedule_cron": "nope"}, HTTP_HX_REQUEST="true")
    assert r.status_code == 200 and b"5-field cron expression" in r.content


@pytest.mark.parametrize(
    ("cron", "said"),
    [
        ("61 * * * *", "Invalid cron expression: &#x27;61 * * * *&#x27;."),
        ("0 3 30 2 *", "The schedule &#x27;0 3 30 2 *&#x27; never runs (no such date)."),
    ],
)
def test_a_bad_schedule_is_explained_once_in_words(
    bare_agent, client: Client, alice, cron: str, said: str
) -> None:
    agent = bare_agent()
    client.force_login(alice)
    r = client.post(reverse("agent_edit", args=[agent.slug]), _edit_data(agent, schedule_cron=cron))
    html = r.content.decode()
    body = html[html.index("<legend>Agent</legend>") :]  # the form, after the error summary
    assert r.status_code == 200 and body.count(said) == 1, body[body.find("cron") :][:2000]
    assert "failed to find" not in html and "Invalid cron expression: Invalid" not in html
    r = client.get(reverse("schedule_preview"), {"schedule_cron": cron}, HTTP_HX_REQUEST="true")
    assert said in r.content.decode()


def test_a_valid_preview_clears_the_fields_old_invalid_cron_error(
    bare_agent, client: Client, alice
) -> None:
    """Before: after a refused "0 25 * * *", typing a valid cron showed its next runs
    beside the field's stale "Invalid cron expression"."""
    agent = bare_agent()
    client.force_login(alice)
    page = client.post(
        reverse("agent_edit", args=[agent.slug]), _edit_data(agent, schedule_cron="0 25 * * *")
    ).content.decode()
    assert re.search(r'<ul class="errorlist" id="cron-errors"><li>Invalid cron', page)
    live = {"schedule_cron": "0 3 * * *", "schedule_form": "1", "schedule_enabled": "on"}
    html = client.get(reverse("schedule_preview"), live, HTTP_HX_REQUEST="true").content.decode()
    assert '<ul class="errorlist" id="cron-errors" hx-swap-oob="true"></ul>' in html
    assert html.count('<li class="mono">') == 5


def test_a_disabled_schedule_previews_no_runs(bare_agent, client: Client, alice) -> None:
    """Before: the form listed the next runs of a disabled schedule."""
    agent = bare_agent(schedule_cron="0 3 * * *", schedule_enabled=False)
    client.force_login(alice)
    page = client.get(reverse("agent_edit", args=[agent.slug])).content.decode()
    assert 'data-testid="cron-paused"' in page and '<li class="mono">' not in page
    # Unticking the box asks again: the form sends schedule_form=1 and no schedule_enabled.
    live = {"schedule_cron": "0 3 * * *", "schedule_form": "1"}
    html = client.get(reverse("schedule_preview"), live, HTTP_HX_REQUEST="true").content.decode()
    assert "The schedule is disabled: no runs until it is enabled again." in html
    assert '<li class="mono">' not in html
    field = re.search(r'<input type="checkbox" name="schedule_enabled"[^>]*>', page).group(0)
    assert 'hx-get="/agents/schedule-preview/"' in field and 'hx-trigger="change"' in field


def test_the_policy_form_asks_for_the_minimum_the_server_accepts(client: Client, alice) -> None:
    client.force_login(alice)
    html = client.get(reverse("agent_create")).content.decode()
    field = re.search(r'<input[^>]*name="policy_max_group_size"[^>]*>', html).group(0)
    assert 'min="2"' in field


def test_it_serves_the_preview_as_a_page_without_htmx(client: Client, carol) -> None:
    client.force_login(carol)
    r = client.get(reverse("schedule_preview"), {"schedule_cron": "*/5 * * * *"})
    assert r.status_code == 200 and b"<html" in r.content and b"Next runs" in r.content


# ----- delete and run now -----------------------------------------------------------------


def test_it_confirms_then_deletes(bare_agent, client: Client, alice) -> None:
    agent = bare_agent()
    client.force_login(alice)
    assert client.get(reverse("agent_delete", args=[agent.slug])).status_code == 200
    r = client.post(reverse("agent_delete", args=[agent.slug]))
    assert r.status_code == 302 and not Agent.objects.filter(pk=agent.pk).exists()


def test_it_forbids_delete_for_a_viewer(bare_agent, client: Client, carol) -> None:
    agent = bare_agent()
    client.force_login(carol)
    assert client.post(reverse("agent_delete", args=[agent.slug])).status_code == 403
    assert Agent.objects.filter(pk=agent.pk).exists()


def test_it_runs_now(
    client: Client, alice, agent_with_memories, django_capture_on_commit_callbacks
) -> None:
    agent = agent_with_memories(3)
    client.force_login(alice)
    with django_capture_on_commit_callbacks(execute=True):
        r = client.post(reverse("agent_run", args=[agent.slug]))
    run = Pass.objects.get(agent=agent)
    assert r.status_code == 302 and r["Location"] == reverse("pass_detail", args=[run.pk])
    assert run.trigger == "operator"


def test_run_now_with_a_pending_proposal_asks_first_and_carries_the_review_over(
    client: Client, alice, bob, agent_with_memories, django_capture_on_commit_callbacks
) -> None:
    from tests.conftest import DISTINCT_FACTS

    agent = agent_with_memories(DISTINCT_FACTS[:16] + DISTINCT_FACTS[:2])
    client.force_login(alice)
    with django_capture_on_commit_callbacks(execute=True):
        client.post(reverse("agent_run", args=[agent.slug]))
    pending = Pass.objects.get(agent=agent, status="proposed")
    first, second = pending.operations.order_by("index")
    operation_set_excluded(operation=first, excluded=True, user=bob)
    operation_edit_text(operation=second, document="Edited by the reviewer.", user=bob)

    r = client.post(reverse("agent_run", args=[agent.slug]))  # no confirmation yet
    html = r.content.decode()
    assert r.status_code == 200 and 'id="run-confirm"' in html
    assert f"{pending.pk}</a> is waiting for its reviewer" in html and "carried over" in html
    assert Pass.objects.filter(agent=agent).count() == 1

    with django_capture_on_commit_callbacks(execute=True):
        r = client.post(reverse("agent_run", args=[agent.slug]), {"confirm": "1"})
    new = Pass.objects.get(agent=agent, status="proposed")
    pending.refresh_from_db()
    assert pending.status == "stale" and new.pk != pending.pk
    assert r["Location"] == reverse("pass_detail", args=[new.pk])
    ops = {tuple(sorted(op.source_ids)): op for op in new.operations.all()}
    # the exclusion is a standing keep-apart decision: the new pass does not plan that merge
    # and says so, instead of carrying an excluded copy over
    assert tuple(sorted(first.source_ids)) not in ops
    (held,) = new.telemetry["held_back"]
    assert held["kind"] == "keep_apart" and held["memory_ids"] == sorted(first.source_ids)
    carried = ops[tuple(sorted(second.source_ids))]
    assert carried.edited and carried.result_document == "Edited by the reviewer."
    event = new.events.get(verb="carried_over")
    assert event.data == {"from_pass": pending.pk, "excluded": 0, "edited": 1}
    new.refresh_from_db()
    assert new.merged == 2  # the summary counts what is included after the carry-over


def test_it_refuses_run_now_while_a_pass_is_active(bare_agent, client: Client, alice) -> None:
    agent = bare_agent()
    active = Pass.objects.create(agent=agent, trigger="schedule", status="running")
    client.force_login(alice)
    r = client.post(reverse("agent_run", args=[agent.slug]), follow=True)
    assert r.status_code == 200
    assert f"pass #{active.pk} is running".encode() in r.content
    assert Pass.objects.filter(agent=agent).count() == 1
    assert AuditEvent.objects.filter(agent=agent, verb="refused").exists()


def test_it_forbids_run_now_for_a_viewer(bare_agent, client: Client, carol) -> None:
    agent = bare_agent()
    client.force_login(carol)
    assert client.post(reverse("agent_run", args=[agent.slug])).status_code == 403
    assert not Pass.objects.filter(agent=agent).exists()


def test_it_shows_policy_lists_and_booleans_in_words(bare_agent, client: Client, carol) -> None:
    agent = bare_agent(
        policy={
            "rules": ["exact_duplicate", "near_duplicate"],
            "promote": False,
            "merge_near": True,
            "promote_rules": [],
        }
    )
    client.force_login(carol)
    html = client.get(reverse("agent_detail", args=[agent.slug])).content.decode()
    assert "<dd>exact duplicate, near duplicate</dd>" in html
    assert "<dt>promote</dt><dd>no</dd>" in html and "<dt>merge near</dt><dd>yes</dd>" in html
    assert "[&#x27;" not in html and ">False<" not in html and ">True<" not in html


def test_the_max_merged_chars_help_states_the_policy_default(client: Client, alice) -> None:
    client.force_login(alice)
    html = client.get(reverse("agent_create")).content.decode()
    default = Policy().max_merged_chars
    said = re.findall(r"Longest merged text[^<]*?default (\d+)", html)
    assert said == [str(default)], said  # the help quotes the engine's default, not a copy


def test_clearing_min_recall_retention_says_the_recall_guard_is_off(
    bare_agent, client: Client, alice
) -> None:
    agent = bare_agent()
    client.force_login(alice)
    form = client.get(reverse("agent_edit", args=[agent.slug])).content
    assert b'data-testid="policy-off"' not in form
    data = _edit_data(agent, policy_min_recall_retention="")
    r = client.post(reverse("agent_edit", args=[agent.slug]), data, follow=True)
    assert r.status_code == 200 and "the recall guard is off" in r.content.decode()
    agent.refresh_from_db()
    assert agent.get_policy().min_recall_retention is None
    form = client.get(reverse("agent_edit", args=[agent.slug])).content.decode()
    assert 'data-testid="policy-off">Min recall retention is empty: the recall guard is off' in form


def test_a_policy_error_names_the_field_as_the_form_labels_it(
    bare_agent, client: Client, alice
) -> None:
    agent = bare_agent()
    client.force_login(alice)
    r = client.post(
        reverse("agent_edit", args=[agent.slug]), _edit_data(agent, policy_max_loss_fraction="2")
    )
    html = r.content.decode()
    assert r.status_code == 200 and "Max loss fraction must be" in html
    assert "max_loss_fraction must" not in html


def test_every_wrong_policy_field_is_named_in_one_submission(
    bare_agent, client: Client, alice
) -> None:
    """A value the form cannot read (not a number) on one field, and values the policy refuses
    (out of range) on two others: the page names all three at once, and nothing is saved."""
    agent = bare_agent()
    before = agent.policy
    client.force_login(alice)
    data = _edit_data(
        agent,
        policy_link_threshold="high",
        policy_max_loss_fraction="2",
        policy_prune_coverage="-1",
    )
    r = client.post(reverse("agent_edit", args=[agent.slug]), data)
    html = r.content.decode()
    assert r.status_code == 200 and "Enter a number." in html
    assert "Max loss fraction must be in [0, 1], got 2" in html
    assert "Prune coverage must be in [0, 1], got -1" in html
    # one summary at the top of the long form names each field, linked to it
    top = html[html.index('id="form-error-summary"') : html.index("<legend>Agent</legend>")]
    assert '<a href="#id_policy_link_threshold">Link threshold</a>: Enter a number.' in top
    assert "Max loss fraction</a>: Max loss fraction must be in [0, 1]" in top
    assert "Prune coverage</a>: Prune coverage must be in [0, 1]" in top
    agent.refresh_from_db()
    assert agent.policy == before
