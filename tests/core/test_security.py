"""Production defaults: DEBUG off, a generated SECRET_KEY, HTTPS settings that pass
``check --deploy``, the Content-Security-Policy, login throttling, the stale-CSRF message and
password reset without a mail server.

Settings are read once per process, so the settings themselves are tested in subprocesses with
their own environment (and their own ``var/``)."""

from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from django.test import Client
from django.urls import reverse

from memoryadmin.settings import BASE_DIR, PLACEHOLDER_SECRET_KEY

pytestmark = pytest.mark.django_db

REAL_KEY = "k" * 10 + "Zq8#x!v2@Lm5^p0&Rt7*Wy3(Bn6)Cd9_Fg4+Hj1=Ks2-Qe5" + "z" * 10


def run_django(tmp_path: Path, code: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``python -c code`` after ``django.setup()`` with a clean settings environment."""
    base = {
        k: v
        for k, v in os.environ.items()
        if k not in {"DEBUG", "SECRET_KEY", "MEMORYADMIN_HTTPS", "EMAIL_HOST"}
    }
    base.update(
        {
            "MEMORYADMIN_VAR_DIR": str(tmp_path),
            "DJANGO_SETTINGS_MODULE": "memoryadmin.settings",
            **env,
        }
    )
    prog = f"import django; django.setup()\nfrom django.conf import settings\n{code}"
    return subprocess.run(
        [sys.executable, "-c", prog],
        cwd=BASE_DIR,
        env=base,
        capture_output=True,
        text=True,
        timeout=120,
    )


def manage(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    base = {
        k: v
        for k, v in os.environ.items()
        if k not in {"DEBUG", "SECRET_KEY", "MEMORYADMIN_HTTPS", "EMAIL_HOST"}
    }
    base.update({"MEMORYADMIN_VAR_DIR": str(tmp_path), **env})
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=BASE_DIR,
        env=base,
        capture_output=True,
        text=True,
        timeout=180,
    )


# ----- settings ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("env", "expected"), [({}, "False"), ({"DEBUG": "0"}, "False"), ({"DEBUG": "1"}, "True")]
)
def test_debug_is_off_unless_debug_1(tmp_path: Path, env: dict, expected: str) -> None:
    r = run_django(tmp_path, "print(settings.DEBUG)", **env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == expected


def test_a_missing_secret_key_is_generated_once_into_var_with_mode_0600(tmp_path: Path) -> None:
    first = run_django(tmp_path, "print(settings.SECRET_KEY)")
    assert first.returncode == 0, first.stderr
    key_file = tmp_path / "secret_key"
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    key = first.stdout.strip()
    assert len(key) >= 50 and key != PLACEHOLDER_SECRET_KEY and key_file.read_text().strip() == key
    again = run_django(tmp_path, "print(settings.SECRET_KEY)")
    assert again.stdout.strip() == key  # kept across restarts (sessions stay valid)


@pytest.mark.parametrize("debug", ["0", "1"])
def test_the_public_placeholder_key_is_refused(tmp_path: Path, debug: str) -> None:
    r = run_django(
        tmp_path, "print(settings.SECRET_KEY)", SECRET_KEY=PLACEHOLDER_SECRET_KEY, DEBUG=debug
    )
    assert r.returncode != 0
    assert "SECRET_KEY is the public placeholder" in r.stderr


def test_https_turns_on_secure_cookies_hsts_redirect_and_the_proxy_header(tmp_path: Path) -> None:
    code = (
        "print(settings.SESSION_COOKIE_SECURE, settings.CSRF_COOKIE_SECURE,"
        " settings.SECURE_SSL_REDIRECT,"
        " settings.SECURE_HSTS_SECONDS > 0, settings.SECURE_PROXY_SSL_HEADER)"
    )
    on = run_django(tmp_path, code, MEMORYADMIN_HTTPS="1", SECRET_KEY=REAL_KEY)
    assert on.stdout.strip() == "True True True True ('HTTP_X_FORWARDED_PROTO', 'https')", on.stderr
    off = run_django(tmp_path, code, SECRET_KEY=REAL_KEY)
    assert off.stdout.strip() == "False False False False None", off.stderr


def test_check_deploy_passes_with_debug_off_a_real_key_and_https(tmp_path: Path) -> None:
    r = manage(
        tmp_path,
        "check",
        "--deploy",
        "--fail-level",
        "WARNING",
        DEBUG="0",
        SECRET_KEY=REAL_KEY,
        MEMORYADMIN_HTTPS="1",
    )
    assert r.returncode == 0, r.stdout + r.stderr
    # …and the check has teeth: plain HTTP fails it.
    plain = manage(
        tmp_path, "check", "--deploy", "--fail-level", "WARNING", DEBUG="0", SECRET_KEY=REAL_KEY
    )
    assert plain.returncode != 0 and "security.W004" in plain.stdout + plain.stderr


# ----- Content-Security-Policy -----------------------------------------------------------------

INLINE_SCRIPT = re.compile(r"<script(?![^>]*\bsrc=)(?![^>]*type=\"application/json\")[^>]*>", re.I)
INLINE_HANDLER = re.compile(r"\son[a-z]+\s*=", re.I)
STYLE_ATTR = re.compile(r"\sstyle\s*=", re.I)


def test_every_page_sends_a_csp_without_unsafe_inline(
    client: Client, alice, agent_with_memories
) -> None:
    agent = agent_with_memories(3)
    client.force_login(alice)
    for url in (
        reverse("dashboard"),
        reverse("agent_list"),
        reverse("agent_detail", args=[agent.slug]),
        reverse("memory_list", args=[agent.slug]),
        reverse("audit"),
        reverse("audit_events"),
        reverse("memories_import", args=[agent.slug]),
        reverse("archive_list", args=[agent.slug]),
        f"{reverse('memory_detail', args=[agent.slug])}?id=mem-000",
    ):
        r = client.get(url)
        policy = r["Content-Security-Policy"]
        assert "script-src 'self'" in policy and "style-src 'self'" in policy, url
        assert "unsafe-inline" not in policy and "unsafe-eval" not in policy
        html = r.content.decode()
        # Nothing on the page that this policy would block:
        assert not INLINE_SCRIPT.search(html), (url, INLINE_SCRIPT.search(html).group(0))
        assert not INLINE_HANDLER.search(html), (url, INLINE_HANDLER.search(html).group(0))
        assert not STYLE_ATTR.search(html), (
            url,
            html[STYLE_ATTR.search(html).start() - 80 :][:200],
        )


# ----- login throttling (django-axes) ------------------------------------------------------------


def test_repeated_wrong_passwords_lock_the_login_out_even_for_the_right_one(
    client: Client, carol, settings
) -> None:
    url = reverse("login")
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        r = client.post(url, {"username": "carol", "password": "wrong"})
        assert (
            r.status_code == 200
            and "Please enter a correct username and password" in r.content.decode()
        )
    r = client.post(url, {"username": "carol", "password": "wrong"})
    assert r.status_code == 429 and "Too many failed logins" in r.content.decode()
    r = client.post(url, {"username": "carol", "password": "password"})
    assert r.status_code == 429 and "Too many failed logins" in r.content.decode()
    assert "_auth_user_id" not in client.session  # not logged in


def test_another_user_is_not_locked_out_and_success_resets_the_count(
    client: Client, carol, bob, settings
) -> None:
    url = reverse("login")
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        client.post(url, {"username": "carol", "password": "wrong"})
    assert client.post(url, {"username": "bob", "password": "password"}).status_code == 302
    client.logout()
    assert client.post(url, {"username": "carol", "password": "password"}).status_code == 302
    client.logout()
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):  # the count started again
        assert client.post(url, {"username": "carol", "password": "wrong"}).status_code == 200


# ----- a stale CSRF token ---------------------------------------------------------------------


def test_a_stale_csrf_token_in_htmx_gets_a_message_with_a_reload_link(
    alice, agent_with_memories
) -> None:
    agent = agent_with_memories(1)
    c = Client(enforce_csrf_checks=True)
    c.force_login(alice)
    page = reverse("agent_detail", args=[agent.slug])
    r = c.post(
        reverse("agent_run", args=[agent.slug]),
        {},
        HTTP_HX_REQUEST="true",
        HTTP_HX_CURRENT_URL=f"http://testserver{page}",
        HTTP_X_CSRFTOKEN="stale",
    )
    assert r.status_code == 403
    assert r["HX-Retarget"] == "#messages" and r["HX-Reswap"] == "innerHTML"
    html = r.content.decode()
    assert "<html" not in html and "out of date" in html
    assert f'href="http://testserver{page}"' in html and "Reload the page" in html


def test_a_stale_csrf_token_without_htmx_gets_a_page_with_a_reload_link(
    alice, agent_with_memories
) -> None:
    agent = agent_with_memories(1)
    c = Client(enforce_csrf_checks=True)
    c.force_login(alice)
    r = c.post(reverse("agent_run", args=[agent.slug]), {})
    assert r.status_code == 403
    html = r.content.decode()
    assert "<html" in html and "out of date" in html and "Reload the page" in html


# ----- password reset without mail ------------------------------------------------------------


def test_password_reset_without_mail_says_an_administrator_resets_it(client: Client, carol) -> None:
    login = client.get(reverse("login")).content.decode()
    assert reverse("password_reset") in login
    r = client.get(reverse("password_reset"))
    html = r.content.decode()
    assert r.status_code == 200 and "administrator must reset your password" in html
    assert "manage.py changepassword" in html
    r = client.post(reverse("password_reset"), {"email": "carol@example.org"})
    assert "administrator must reset" in r.content.decode()  # never "we've emailed you"


def test_password_reset_with_a_mail_server_sends_the_mail(
    client: Client, carol, settings, mailoutbox
) -> None:
    settings.EMAIL_HOST = "mail.example.org"
    r = client.post(reverse("password_reset"), {"email": "carol@example.org"})
    assert r.status_code == 302 and len(mailoutbox) == 1
