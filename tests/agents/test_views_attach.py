"""The agent form's presets for attached collections (auto/mem0/praisonai/plain/custom)."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from consolidation import Policy
from memoryadmin.agents.models import Agent
from memoryadmin.core import stores
from tests.agent_stores import Mem0Memory, PraisonMemory, write_mem0, write_plain, write_praisonai

pytestmark = pytest.mark.django_db


def _data(unique_name, collection: str, **over: str) -> dict:
    data = {
        "name": "Attached bot",
        "slug": unique_name("att"),
        "collection_name": collection,
        "attach": "on",
        "schedule_cron": "0 3 * * *",
        "schedule_enabled": "on",
        **{
            f"policy_{k}": ("on" if v is True else "" if v is False or v is None else v)
            for k, v in Policy().to_dict().items()
        },
    }
    data.update(over)
    return {k: v for k, v in data.items() if v != ""}


def test_it_offers_the_presets_with_detect_selected(client: Client, alice) -> None:
    client.force_login(alice)
    html = client.get(reverse("agent_create")).content.decode()
    for value in ("auto", "mem0", "praisonai", "plain", "custom"):
        assert f'<option value="{value}"' in html
    assert '<option value="auto" selected>' in html
    assert 'name="field_document"' in html and 'name="field_scope"' in html


def test_auto_detects_a_mem0_collection(client: Client, alice, unique_name) -> None:
    name = unique_name("mem0")
    write_mem0(stores.get_client(), name, [Mem0Memory("Likes tea", user_id="u1")])
    client.force_login(alice)
    r = client.post(reverse("agent_create"), _data(unique_name, name, preset="auto"))
    assert r.status_code == 302, r.context["form"].errors
    fm = Agent.objects.get(collection_name=name).get_field_map()
    assert (fm.document, fm.updated_at, fm.scope[0]) == ("data", "updated_at", "user_id")


def test_a_typed_key_overrides_the_preset(client: Client, alice, unique_name) -> None:
    name = unique_name("praison")
    write_praisonai(stores.get_client(), [PraisonMemory("Likes jazz")], collection_name=name)
    client.force_login(alice)
    r = client.post(
        reverse("agent_create"),
        _data(unique_name, name, preset="praisonai", field_scope="agent_name"),
    )
    assert r.status_code == 302
    fm = Agent.objects.get(collection_name=name).get_field_map()
    assert (fm.created_at, fm.scope) == ("timestamp", ("agent_name",))


def test_a_contradicted_preset_is_a_field_error(client: Client, alice, unique_name) -> None:
    name = unique_name("log")
    write_plain(stores.get_client(), name, ["a log line"])
    client.force_login(alice)
    data = _data(unique_name, name, preset="mem0")
    r = client.post(reverse("agent_create"), data)
    assert r.status_code == 200
    assert "does not look like mem0" in r.context["form"].errors["preset"][0]
    assert not Agent.objects.filter(slug=data["slug"]).exists()


def test_auto_on_a_missing_collection_is_a_collection_error(
    client: Client, alice, unique_name
) -> None:
    client.force_login(alice)
    r = client.post(reverse("agent_create"), _data(unique_name, unique_name("nope"), preset="auto"))
    assert r.status_code == 200
    assert "no collection named" in r.context["form"].errors["collection_name"][0]


def test_the_collections_embedder_is_saved_without_its_key(
    client: Client, alice, unique_name
) -> None:
    name = unique_name("mem0")
    write_mem0(stores.get_client(), name, [Mem0Memory("Likes tea", user_id="u1")])
    client.force_login(alice)
    r = client.post(
        reverse("agent_create"),
        _data(
            unique_name,
            name,
            preset="auto",
            field_embedder_url="http://127.0.0.1:9/v1",
            field_embedder_model="text-embedding-3-small",
            field_embedder_key_env="OPENAI_API_KEY",
        ),
    )
    assert r.status_code == 302, r.context["form"].errors
    assert Agent.objects.get(collection_name=name).embedder == {
        "base_url": "http://127.0.0.1:9/v1",
        "model": "text-embedding-3-small",
        "api_key_env": "OPENAI_API_KEY",
    }


def test_a_half_filled_embedder_is_an_error_on_its_field(
    client: Client, alice, unique_name
) -> None:
    name = unique_name("mem0")
    write_mem0(stores.get_client(), name, [Mem0Memory("Likes tea", user_id="u1")])
    client.force_login(alice)
    data = _data(unique_name, name, preset="auto", field_embedder_url="http://127.0.0.1:9/v1")
    r = client.post(reverse("agent_create"), data)
    assert r.status_code == 200
    assert "base URL and a model" in r.context["form"].errors["field_embedder_url"][0]
    assert not Agent.objects.filter(slug=data["slug"]).exists()


def test_an_attached_mem0_agents_memories_are_listed_and_searchable(
    client: Client, carol, unique_name
) -> None:
    from io import StringIO

    from django.core.management import call_command

    name = unique_name("mem0")
    write_mem0(
        stores.get_client(),
        name,
        [
            Mem0Memory("Trinkt morgens schwarzen Kaffee", user_id="a"),
            Mem0Memory("喜欢喝乌龙茶", user_id="b"),
            Mem0Memory("Prefers dark mode in the editor", user_id="a"),
        ],
    )
    call_command("attach_collection", "mem0-view", name, stdout=StringIO())
    client.force_login(carol)
    url = reverse("memory_list", args=["mem0-view"])
    html = client.get(url).content.decode()
    assert "Trinkt morgens schwarzen Kaffee" in html and "喜欢喝乌龙茶" in html
    r = client.get(url, {"q": "editor theme preference", "k": 1})
    assert r.status_code == 200
    assert [m.document for m in r.context["results"]] == ["Prefers dark mode in the editor"]
