"""setup_demo (users, roles, demo agents; a temporary Chroma server when none runs) and the
read-only Django admin."""

from __future__ import annotations

import io

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command

from memoryadmin.agents.models import Agent
from memoryadmin.core import stores
from memoryadmin.management.commands import setup_demo
from memoryadmin.proposals.models import Pass
from tests.conftest import free_port

pytestmark = pytest.mark.django_db


@pytest.fixture
def recorded_seed(monkeypatch):
    """Record calls to the import helper's ``seed_demo_agents`` (its own tests cover seeding)."""
    from memoryadmin.ops.services import demo

    calls = []

    def fake_seed(stdout=None):
        calls.append(stores.collection_exists("probe-collection"))  # Chroma answers meanwhile
        if stdout is not None:
            stdout.write("demo agent seeded")

    monkeypatch.setattr(demo, "seed_demo_agents", fake_seed)
    return calls


def test_setup_demo_creates_users_in_roles_and_is_idempotent(recorded_seed, settings):
    settings.MEMORYADMIN_DEMO_PASSWORD = "s3cret-demo"
    out = io.StringIO()
    call_command("setup_demo", stdout=out)
    call_command("setup_demo", stdout=io.StringIO())

    assert (
        "'operator' (admin), 'reviewer' or 'viewer', each with password 's3cret-demo'"
        in out.getvalue()
    )
    groups = {u.username: [g.name for g in u.groups.all()] for u in User.objects.all()}
    assert groups == {"operator": ["admin"], "reviewer": ["reviewer"], "viewer": ["viewer"]}
    op = User.objects.get(username="operator")
    assert op.check_password("s3cret-demo") and op.is_staff and not op.is_superuser
    assert recorded_seed == [False, False]


def test_setup_demo_prints_the_logins_last_with_the_web_port(recorded_seed, settings):
    """`make run` shows these lines right before the servers' output: nothing may follow them."""
    settings.WEB_PORT = "8123"
    out = io.StringIO()
    call_command("setup_demo", stdout=out)
    lines = out.getvalue().strip().splitlines()
    assert "demo agent seeded" in lines
    assert lines[-1].startswith("log in at http://127.0.0.1:8123/ as 'operator'")
    assert lines[-2].startswith("demo users: operator (admin, created)")


def test_builtin_demo_has_a_pending_proposal_and_is_idempotent(django_capture_on_commit_callbacks):
    for _ in range(2):
        with django_capture_on_commit_callbacks(execute=True):
            setup_demo.seed_builtin_demo(io.StringIO())
    agent = Agent.objects.get(slug=setup_demo.DEMO_SLUG)
    run = Pass.objects.get(agent=agent)
    assert run.status == "proposed" and run.merged == 4 and run.pruned == 1
    assert stores.get_store(agent).count() == len(setup_demo.DEMO_MEMORIES)


@pytest.mark.slow
def test_setup_demo_starts_a_temporary_chroma_when_none_answers(recorded_seed, settings, tmp_path):
    settings.CHROMA_MODE, settings.CHROMA_HOST = "http", "127.0.0.1"
    settings.CHROMA_PORT, settings.CHROMA_PATH = free_port(), tmp_path / "chroma"
    stores.reset_client_cache()
    out = io.StringIO()
    call_command("setup_demo", stdout=out)
    assert "starting a temporary Chroma server" in out.getvalue()
    assert recorded_seed == [False]
    assert (tmp_path / "chroma").is_dir()
    with pytest.raises(stores.StoreUnavailable):  # stopped again afterwards
        stores.get_client()


def test_the_admin_lists_console_models_read_only(client):
    from django.contrib.auth.models import User

    User.objects.create_superuser("root", "r@example.org", "pw-root-123")
    # Through the login page: django-axes checks every authentication against its request.
    r = client.post("/accounts/login/", {"username": "root", "password": "pw-root-123"})
    assert r.status_code == 302
    for model in ("agent", "pass", "operation", "archivedmemory", "auditevent"):
        assert client.get(f"/admin/console/{model}/").status_code == 200
        assert client.get(f"/admin/console/{model}/add/").status_code == 403
