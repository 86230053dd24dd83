"""Field reports of other memory systems (mem0, Graphiti, Letta, mnemon, crewly, memoria …)
turned into pairs: a status that changed, a fact that another text only narrows or cancels, an
older text that states more than its update, a sale that ends owning, two people of one role.
Each is settled by the dates when the rules are sure, else asked — never merged into one text,
never superseded whole when that loses a fact, never kept silently."""

from __future__ import annotations

import pytest

from consolidation import OpKind
from consolidation.judgment import CONFLICT, DISTINCT, SAME, SUPERSEDES
from consolidation.states import STATUS_GROUPS, status_change
from consolidation.text import parse

from .test_judgment_kinds import SCOPES, _judge, _plan

STATUS = [  # mnemon-dev/mnemon#133, devops-thiago/ThrillhouseBot#596, crewly#219, CodeMemory#21
    ("Dark mode is off", "Dark mode is on"),
    ("The staging server is down", "The staging server is up"),
    ("User is married", "User is divorced"),
    ("Task ENG-42 is done", "Task ENG-42 is pending"),
    ("The PR is open", "The PR is closed"),
    ("The build is passing", "The build is failing"),
    ("Der Dunkelmodus ist aus", "Der Dunkelmodus ist an"),
    ("El modo oscuro está activado", "El modo oscuro está desactivado"),
]


@pytest.mark.parametrize(("a", "b"), STATUS)
def test_a_changed_status_is_never_one_fact(a, b):
    v = _judge(a, b)
    assert (v.kind, v.newer) == (SUPERSEDES, 1), v.reasons  # the newer status holds
    assert _judge(a, b, dated=False).kind == CONFLICT
    assert status_change(parse(a).folded, parse(b).folded) is not None


def test_every_changed_status_is_reconciled_in_both_scopes_of_a_plan():
    p = _plan(STATUS)
    settled = {frozenset(op.source_ids): op.removes for op in p.by_kind(OpKind.RECONCILE)}
    for s in SCOPES:
        for k in range(len(STATUS)):
            assert settled.get(frozenset({f"{s}-{k}-a", f"{s}-{k}-b"})) == [f"{s}-{k}-a"]
    assert not p.by_kind(OpKind.MERGE)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("Dark mode is on", "Dark mode is on in the editor"),  # no other value
        ("The store is open on Sundays", "The store is open on Mondays"),  # not a status word
        ("Alice is tall", "Alice is kind"),  # two adjectives of no one status
    ],
)
def test_words_outside_one_status_group_are_no_status_change(a, b):
    assert status_change(parse(a).folded, parse(b).folded) is None


@pytest.mark.parametrize(
    ("a", "b"),
    [
        # mem0ai/mem0#2709: a cancelled appointment is not a copy of the booked one
        (
            "User cancelled the dentist appointment on May 3",
            "User has a dentist appointment on May 3",
        ),
        # WingedGuardian/GENesis-AGI#1806: a limit narrows the unrestricted fact
        ("The API is free to use", "The API is free to use for the first 1000 calls"),
    ],
)
def test_a_text_that_only_cancels_or_limits_the_other_is_never_merged(a, b):
    for dated in (True, False):
        assert _judge(a, b, dated=dated).kind != SAME


@pytest.mark.parametrize(
    ("a", "b", "kept"),
    [
        # matrixorigin/memoria#88: the older memory holds several facts, the update one of them
        ("User is vegetarian and allergic to nuts", "User is no longer vegetarian", "allergic"),
        (
            "User works at Google as a data scientist and lives in Paris",
            "User now works at Meta as a data scientist",
            "Paris",
        ),
    ],
)
def test_an_update_of_one_fact_never_supersedes_an_older_text_that_states_more(a, b, kept):
    v = _judge(a, b)
    assert v.kind == CONFLICT and "states more" in " ".join(v.reasons), v.reasons
    p = _plan([(a, b)])
    assert not p.by_kind(OpKind.RECONCILE)  # the older text, with its other facts, stays


def test_a_list_the_update_replaces_whole_is_still_superseded():
    a = "Use SQLAlchemy ORM and Alembic for migrations"
    b = "Switched to Tortoise ORM and Aerich for migrations"
    assert (_judge(a, b).kind, _judge(a, b).newer) == (SUPERSEDES, 1)


def test_a_sale_ends_owning_and_is_asked():
    """getzep/graphiti#1666: "User sold the Tesla" names no new value: asked, both kept."""
    v = _judge("User owns a Tesla", "User sold the Tesla")
    assert (v.kind, v.cue) == (CONFLICT, "event"), v.reasons


def test_two_people_of_one_role_are_two_facts_not_a_move():
    """Graphify-Labs/graphify#878: "sister Anna lives in Rome" / "sister Maria lives in Rome"
    used to supersede Anna; the name before "lives in" is who lives there."""
    v = _judge("User's sister Anna lives in Rome", "User's sister Maria lives in Rome")
    assert v.kind == DISTINCT, v.reasons
    v = _judge("User lives in Paris", "User lives in Berlin")  # the value after "lives in"
    assert (v.kind, v.newer) == (SUPERSEDES, 1), v.reasons


def test_every_status_group_has_a_source_and_two_values():
    for g in STATUS_GROUPS:
        assert g.source.startswith("wiktionary:") and len(g.words) >= 2


@pytest.mark.parametrize(
    ("a", "b"),
    [
        # gitmoot/gitmoot#854: a status memory is never retired once the state ends
        ("User is sick with the flu", "User has recovered from the flu"),
        # CodeMemory#21, claude-code#21502: a plan fulfilled resurfaces as current
        ("User plans to buy a Tesla Model 3", "User bought a Tesla Model 3"),
    ],
)
def test_an_event_that_ends_a_plan_or_an_illness_is_asked(a, b):
    for dated in (True, False):
        v = _judge(a, b, dated=dated)
        assert (v.kind, v.cue) == (CONFLICT, "event"), v.reasons


@pytest.mark.parametrize(
    ("a", "b"),
    [
        (
            "Der Nutzer ist Vegetarier und allergisch gegen Nüsse",
            "Der Nutzer ist kein Vegetarier mehr",
        ),
        ("Bob besitzt einen Tesla", "Bob hat den Tesla verkauft"),
    ],
)
def test_the_same_in_german_is_asked(a, b):
    v = _judge(a, b)
    assert v.kind == CONFLICT, v.reasons
