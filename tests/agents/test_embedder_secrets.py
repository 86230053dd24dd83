"""An attached collection's embedder never reads a service secret nor calls a host not allowed.

The embedder setting names an environment variable whose value the worker sends as a bearer
token; every way of storing the setting (the agent form, the services the JSON API and the
commands share, ``manage.py attach_collection``) refuses a secret's name, and the worker checks
again when it uses a setting stored before (or around) those checks.
"""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client
from django.urls import reverse

from consolidation.adapters.endpoints import check_endpoint_url, check_key_env
from consolidation.adapters.llm import llm_from_env
from memoryadmin.agents.models import Agent
from memoryadmin.agents.services.agents import agent_create, agent_update
from memoryadmin.core import stores
from tests.agent_stores import Mem0Memory, write_mem0
from tests.agents.test_views_attach import _data

pytestmark = pytest.mark.django_db
pytest_plugins = ["tests.llm_stub"]

SECRETS = [
    "SECRET_KEY",
    "DATABASE_URL",
    "CHROMA_TOKEN",
    "EMAIL_HOST_PASSWORD",
    "EMAIL_HOST_USER",
    "Q_REDIS_URL",
    "DJANGO_SECRET_KEY",
    "AWS_SECRET_ACCESS_KEY",
    "secret_key",
    "MEMORYADMIN_EMBEDDER_KEY_DATABASE_URL",  # allowed by its prefix, denied by its kind
]
ENDPOINT = {"base_url": "http://127.0.0.1:9/v1", "model": "text-embedding-3-small"}


def _mem0(unique_name) -> str:
    name = unique_name("mem0")
    write_mem0(stores.get_client(), name, [Mem0Memory("Likes tea", user_id="u1")])
    return name


@pytest.mark.parametrize("secret", SECRETS)
def test_the_agent_form_refuses_a_secret_as_the_key_variable(
    client: Client, alice, unique_name, secret
) -> None:
    name = _mem0(unique_name)
    client.force_login(alice)
    data = _data(
        unique_name,
        name,
        preset="auto",
        field_embedder_url=ENDPOINT["base_url"],
        field_embedder_model=ENDPOINT["model"],
        field_embedder_key_env=secret,
    )
    r = client.post(reverse("agent_create"), data)
    assert r.status_code == 200
    assert "secrets" in r.context["form"].errors["field_embedder_key_env"][0]
    assert not Agent.objects.filter(slug=data["slug"]).exists()


@pytest.mark.parametrize("secret", SECRETS)
def test_the_services_refuse_a_secret_as_the_key_variable(unique_name, secret) -> None:
    name = _mem0(unique_name)
    with pytest.raises(ValueError, match="secrets"):
        agent_create(
            name="x",
            slug=unique_name("x"),
            collection_name=name,
            attach=True,
            embedder={**ENDPOINT, "api_key_env": secret},
        )
    assert not Agent.objects.filter(collection_name=name).exists()
    agent = agent_create(name="x", slug=unique_name("x"), collection_name=name, attach=True)
    with pytest.raises(ValueError, match="secrets"):
        agent_update(agent=agent, embedder={**ENDPOINT, "api_key_env": secret})
    agent.refresh_from_db()
    assert agent.embedder == {}


@pytest.mark.parametrize("secret", SECRETS)
def test_attach_collection_refuses_a_secret_as_the_key_variable(unique_name, secret) -> None:
    name = _mem0(unique_name)
    slug = unique_name("x")
    with pytest.raises(CommandError, match="secrets") as info:
        call_command(
            "attach_collection",
            slug,
            name,
            "--embedder-url",
            ENDPOINT["base_url"],
            "--embedder-model",
            ENDPOINT["model"],
            "--embedder-key-env",
            secret,
        )
    assert info.value.returncode == 2
    assert not Agent.objects.filter(slug=slug).exists()


def test_a_variable_the_deployment_did_not_allow_is_refused(unique_name, settings) -> None:
    name = _mem0(unique_name)
    with pytest.raises(ValueError, match="not one this deployment allows"):
        agent_create(
            name="x",
            slug=unique_name("x"),
            collection_name=name,
            attach=True,
            embedder={**ENDPOINT, "api_key_env": "HOME"},
        )
    settings.EMBEDDER_KEY_ENV_ALLOWED = ["VLLM_KEY"]
    agent = agent_create(
        name="x",
        slug=unique_name("x"),
        collection_name=name,
        attach=True,
        embedder={**ENDPOINT, "api_key_env": "VLLM_KEY"},
    )
    assert agent.embedder["api_key_env"] == "VLLM_KEY"


def test_the_allowed_names_are_taken(unique_name) -> None:
    name = _mem0(unique_name)
    for key_env in ("OPENAI_API_KEY", "MEMORYADMIN_EMBEDDER_KEY_MEM0"):
        agent = agent_create(
            name="x",
            slug=unique_name("x"),
            collection_name=name,
            attach=True,
            embedder={**ENDPOINT, "api_key_env": key_env},
        )
        assert agent.embedder["api_key_env"] == key_env
        agent.delete()


@pytest.mark.parametrize("secret", ["SECRET_KEY", "DATABASE_URL", "CHROMA_TOKEN"])
def test_the_worker_refuses_a_stored_secret_name_at_use(unique_name, settings, secret) -> None:
    """A setting written around the checks (an old row, the ORM) reads no secret at apply, even
    when the deployment's key table held one."""
    settings.EMBEDDER_KEYS = {**settings.EMBEDDER_KEYS, secret: "do-not-send"}
    name = _mem0(unique_name)
    agent = Agent.objects.create(
        name="x",
        slug=unique_name("x"),
        collection_name=name,
        attached=True,
        embedder={**ENDPOINT, "api_key_env": secret},
    )
    with pytest.raises(ValueError, match="secrets"):
        stores.store_layout(agent)
    with pytest.raises(ValueError, match="secrets"):
        stores.get_store(agent)


def test_the_worker_sends_the_key_the_settings_hold_for_the_variable_named(
    unique_name, settings, llm_stub
) -> None:
    """The key comes from ``settings.EMBEDDER_KEYS`` (the allowed variables, read at start):
    a test or a deployment sets it there, and a variable it does not hold sends no key."""
    settings.EMBEDDER_KEYS = {"MEMORYADMIN_EMBEDDER_KEY_MEM0": "k-mem0"}
    agent = Agent.objects.create(
        name="x",
        slug=unique_name("x"),
        collection_name=_mem0(unique_name),
        attached=True,
        embedder={"base_url": llm_stub.base_url, "model": ENDPOINT["model"]},
    )
    settings.EMBEDDER_KEY_ENV_ALLOWED = ["MEMORYADMIN_EMBEDDER_KEY*", "VLLM_KEY"]
    sent = []
    for key_env in ("MEMORYADMIN_EMBEDDER_KEY_MEM0", "VLLM_KEY"):
        agent.embedder = {**agent.embedder, "api_key_env": key_env}
        stores.store_layout(agent).native_embed(["Likes tea"])
        sent.append(llm_stub.requests[-1].headers.get("authorization", ""))
    assert sent[0] == "Bearer k-mem0"
    assert "k-mem0" not in sent[1]


def test_the_worker_refuses_a_host_the_deployment_no_longer_allows(unique_name, settings) -> None:
    name = _mem0(unique_name)
    agent = agent_create(
        name="x",
        slug=unique_name("x"),
        collection_name=name,
        attach=True,
        embedder={**ENDPOINT, "api_key_env": "OPENAI_API_KEY"},
    )
    settings.ENDPOINT_HOSTS_ALLOWED = ["api.openai.com"]
    with pytest.raises(ValueError, match="not one this deployment allows"):
        stores.store_layout(agent)


@pytest.mark.parametrize(
    "url",
    [
        "ftp://127.0.0.1/v1",
        "file:///etc/passwd",
        "http://user:pass@127.0.0.1:9/v1",
        "http:///v1",
    ],
)
def test_the_form_refuses_a_url_that_is_not_plain_http(
    client: Client, alice, unique_name, url
) -> None:
    name = _mem0(unique_name)
    client.force_login(alice)
    data = _data(
        unique_name,
        name,
        preset="auto",
        field_embedder_url=url,
        field_embedder_model=ENDPOINT["model"],
    )
    r = client.post(reverse("agent_create"), data)
    assert r.status_code == 200
    assert r.context["form"].errors["field_embedder_url"]
    assert not Agent.objects.filter(slug=data["slug"]).exists()


def test_a_host_allow_list_limits_the_embedder_url(
    client: Client, alice, unique_name, settings
) -> None:
    settings.ENDPOINT_HOSTS_ALLOWED = ["*.internal", "api.openai.com"]
    name = _mem0(unique_name)
    client.force_login(alice)
    data = _data(
        unique_name,
        name,
        preset="auto",
        field_embedder_url="https://attacker.example/v1",
        field_embedder_model=ENDPOINT["model"],
    )
    r = client.post(reverse("agent_create"), data)
    assert r.status_code == 200
    assert "not one this deployment allows" in r.context["form"].errors["field_embedder_url"][0]
    data["field_embedder_url"] = "http://embed.internal:8000/v1"
    r = client.post(reverse("agent_create"), data)
    assert r.status_code == 302, r.context["form"].errors
    assert Agent.objects.get(slug=data["slug"]).embedder["base_url"] == (
        "http://embed.internal:8000/v1"
    )


def test_the_llm_url_obeys_the_same_host_list() -> None:
    env = {"MEMORYADMIN_LLM_MODEL": "m", "OPENAI_BASE_URL": "http://evil.example/v1"}
    assert llm_from_env(env) is not None
    with pytest.raises(ValueError, match="ENDPOINT_HOSTS_ALLOWED"):
        llm_from_env({**env, "ENDPOINT_HOSTS_ALLOWED": "127.0.0.1,localhost"})
    with pytest.raises(ValueError, match="user name or password"):
        llm_from_env({**env, "OPENAI_BASE_URL": "http://u:p@127.0.0.1/v1"})
    assert llm_from_env({**env, "OPENAI_BASE_URL": "http://127.0.0.1:8080/v1"}) is not None


def test_the_checks_keep_a_good_value_and_name_the_bad_one() -> None:
    assert check_key_env(" OPENAI_API_KEY ") == "OPENAI_API_KEY"
    assert check_endpoint_url("https://API.openai.com/v1", ["api.openai.com"]) == (
        "https://API.openai.com/v1"
    )
    with pytest.raises(ValueError, match="environment variable name"):
        check_key_env("OPENAI_API_KEY; rm -rf /")
    with pytest.raises(ValueError, match="secrets"):
        check_key_env("CHROMA_TOKEN", ["*"])
