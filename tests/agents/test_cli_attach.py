"""``manage.py attach_collection``: agents on collections written by mem0, PraisonAI, a log."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from memoryadmin.agents.models import Agent
from memoryadmin.core import stores
from tests.agent_stores import Mem0Memory, PraisonMemory, write_mem0, write_plain, write_praisonai

MEM0 = [
    Mem0Memory("Prefers dark mode in the editor", user_id="alice"),
    Mem0Memory("Wohnt seit 2019 in Hamburg", user_id="alice"),
    Mem0Memory("喜欢喝乌龙茶", user_id="bob"),
]


def attach(*args: str) -> dict:
    out = StringIO()
    call_command("attach_collection", *args, "--json", stdout=out)
    text = out.getvalue().strip()
    assert "\n" not in text
    return json.loads(text)


@pytest.mark.django_db
def test_it_attaches_a_mem0_collection_with_text_in_data(unique_name):
    name = unique_name("mem0")
    write_mem0(stores.get_client(), name, MEM0)
    out = attach("mem0-agent", name, "--name", "Mem0 agent")
    assert out["shape"] == "mem0"
    assert out["field_map"]["document"] == "data"
    assert out["field_map"]["scope"] == ["user_id", "agent_id", "run_id", "actor_id"]
    assert (out["vector_width"], out["space"], out["embedder_matches"]) == (1536, "l2", False)
    agent = Agent.objects.get(slug="mem0-agent")
    assert (agent.name, agent.attached, agent.collection_name) == ("Mem0 agent", True, name)
    assert agent.get_field_map().document == "data"


@pytest.mark.django_db
def test_it_prints_the_field_map_for_people(unique_name):
    name = unique_name("praison")
    write_praisonai(stores.get_client(), [PraisonMemory("User likes jazz")], collection_name=name)
    out = StringIO()
    call_command("attach_collection", "team-memory", name, stdout=out)
    text = out.getvalue()
    assert "praisonai shape" in text
    assert "created_at        timestamp" in text
    assert "document          (the document)" in text
    assert Agent.objects.get(slug="team-memory").get_field_map().created_at == "timestamp"


@pytest.mark.django_db
def test_a_preset_chooses_the_shape(unique_name):
    name = unique_name("log")
    write_plain(stores.get_client(), name, ["deployed v1.2", "rolled back to v1.1"])
    out = attach("log-agent", name, "--preset", "plain")
    assert (out["shape"], out["embedder_matches"]) == ("plain", True)


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("missing", "Nothing attached: There is no collection named"),
        ("taken", "Nothing attached: An agent with the slug 'taken' already exists."),
        ("wrong-preset", "Nothing attached: The collection does not look like mem0"),
        ("bad-name", "Nothing attached: Invalid collection name"),
    ],
)
def test_bad_input_exits_2_with_one_line_and_creates_nothing(
    case, message, unique_name, agent_with_memories
):
    agent_with_memories(1, slug="taken")
    name = unique_name("col")
    args = ["new-agent", name]
    if case == "missing":
        pass
    elif case == "taken":
        write_mem0(stores.get_client(), name, MEM0)
        args = ["taken", name]
    elif case == "wrong-preset":
        write_plain(stores.get_client(), name, ["just a log line"])
        args += ["--preset", "mem0"]
    else:
        args = ["new-agent", "x!"]
    before = Agent.objects.count()
    with pytest.raises(CommandError) as err:
        call_command("attach_collection", *args, stdout=StringIO())
    assert err.value.returncode == 2
    assert str(err.value).startswith(message)
    assert "\n" not in str(err.value)
    assert Agent.objects.count() == before


def test_an_unknown_preset_is_refused_by_the_parser():
    with pytest.raises(CommandError, match="invalid choice: 'chroma'"):
        call_command("attach_collection", "a", "b", "--preset", "chroma")
