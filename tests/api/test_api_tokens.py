"""API tokens: ``create_api_token`` prints one once (only its hash is stored),
``revoke_api_token`` and the user's token page revoke it; creation and revocation are audited."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client

from memoryadmin.api.models import ApiToken
from memoryadmin.api.tokens import hash_token, token_create
from memoryadmin.core.models import AuditEvent

pytestmark = pytest.mark.django_db


def create(*args: str) -> str:
    out = StringIO()
    call_command("create_api_token", *args, stdout=out)
    return out.getvalue().strip()


def test_it_prints_a_token_once_and_stores_only_its_hash(client: Client, carol) -> None:
    raw = create("carol", "--name", "ci")
    assert raw.startswith("ma_") and len(raw) > 40
    token = ApiToken.objects.get(user=carol)
    assert token.name == "ci" and token.token_hash == hash_token(raw)
    assert raw not in str(list(ApiToken.objects.values()))
    r = client.get("/api/v1/agents", HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert r.status_code == 200
    token.refresh_from_db()
    assert token.last_used_at is not None
    assert AuditEvent.objects.filter(verb="api_token_created", actor="cli").exists()


def test_an_unknown_user_exits_2_with_one_line(roles) -> None:
    with pytest.raises(CommandError) as exc:
        create("nobody")
    assert exc.value.returncode == 2 and "nobody" in str(exc.value)


def test_revoke_by_prefix_or_token_stops_it_working(client: Client, carol) -> None:
    raw1, raw2 = create("carol"), create("carol")
    out = StringIO()
    call_command("revoke_api_token", raw1[:10], stdout=out)
    assert "revoked" in out.getvalue()
    call_command("revoke_api_token", raw2, stdout=StringIO())
    for raw in (raw1, raw2):
        assert client.get("/api/v1/agents", HTTP_AUTHORIZATION=f"Bearer {raw}").status_code == 401
    assert AuditEvent.objects.filter(verb="api_token_revoked").count() == 2


def test_revoke_lists_and_revokes_all_of_a_users_tokens(carol, bob) -> None:
    for args in (("carol", "--name", "one"), ("carol", "--name", "two"), ("bob",)):
        create(*args)
    out = StringIO()
    call_command("revoke_api_token", "--user", "carol", stdout=out)
    assert "one" in out.getvalue() and "two" in out.getvalue() and "active" in out.getvalue()
    call_command("revoke_api_token", "--user", "carol", "--all", stdout=StringIO())
    assert not ApiToken.objects.filter(user=carol, revoked_at__isnull=True).exists()
    assert ApiToken.objects.filter(user=bob, revoked_at__isnull=True).count() == 1


@pytest.mark.parametrize("arg", ["ma_nothing-like-this", "ma", ""])
def test_revoke_without_a_match_exits_2(carol, arg) -> None:
    create("carol")
    with pytest.raises(CommandError) as exc:
        call_command("revoke_api_token", *([arg] if arg else []), stdout=StringIO())
    assert exc.value.returncode == 2
    assert ApiToken.objects.filter(revoked_at__isnull=True).count() == 1


# ----- the user's token page ---------------------------------------------------------------


def test_it_redirects_anonymous_to_login(client: Client) -> None:
    r = client.get("/account/api-tokens/")
    assert r.status_code == 302 and "/accounts/login/" in r["Location"]


def test_the_page_lists_only_own_tokens_and_is_linked_from_the_user_menu(
    client: Client, carol, bob
) -> None:
    mine, _ = token_create(user=carol, name="laptop")
    theirs, _ = token_create(user=bob, name="bobs-ci")
    client.force_login(carol)
    html = client.get("/account/api-tokens/").content.decode()
    assert mine.prefix in html and "laptop" in html
    assert theirs.prefix not in html and "bobs-ci" not in html
    assert 'href="/account/api-tokens/"' in client.get("/").content.decode()


def test_creating_on_the_page_shows_the_token_once(client: Client, carol) -> None:
    client.force_login(carol)
    r = client.post("/account/api-tokens/", {"name": "notebook"})
    assert r.status_code == 302 and r["Location"] == "/account/api-tokens/"  # refresh: no 2nd
    html = client.get(r["Location"]).content.decode()
    token = ApiToken.objects.get(user=carol)
    raw = html.split('<code class="token">')[1].split("</code>")[0]
    assert token.token_hash == hash_token(raw)
    assert raw not in client.get("/account/api-tokens/").content.decode()
    assert client.get("/api/v1/agents", HTTP_AUTHORIZATION=f"Bearer {raw}").status_code == 200


def test_revoking_on_the_page(client: Client, carol, bob) -> None:
    token, raw = token_create(user=carol)
    other, other_raw = token_create(user=bob)
    client.force_login(carol)
    assert client.get(f"/account/api-tokens/{token.pk}/revoke/").status_code == 405
    assert client.post(f"/account/api-tokens/{other.pk}/revoke/").status_code == 404
    r = client.post(f"/account/api-tokens/{token.pk}/revoke/", follow=True)
    assert "revoked" in r.content.decode()
    assert Client().get("/api/v1/agents", HTTP_AUTHORIZATION=f"Bearer {raw}").status_code == 401
    assert (
        Client().get("/api/v1/agents", HTTP_AUTHORIZATION=f"Bearer {other_raw}").status_code == 200
    )
    ev = AuditEvent.objects.get(verb="api_token_revoked")
    assert ev.actor == "carol" and ev.user == carol
