"""Checks for the outbound endpoints a deployment lets a pass call: URL, host and key variable.

An attached collection's embedder is configured in the console by an admin: a URL and the *name*
of the environment variable that holds its key, whose value the worker sends as a bearer token.
Both are checked here, when the setting is stored and again when the worker uses it, so that no
console user can make the worker send one of its own secrets (``SECRET_KEY``, ``DATABASE_URL``,
``CHROMA_TOKEN``, ``EMAIL_HOST_PASSWORD`` …) or send a key to a host the deployment did not allow.

- **Key variable**: a name (``[A-Za-z_][A-Za-z0-9_]*``) that matches one of the allowed
  patterns (:data:`DEFAULT_KEY_ENV_ALLOWED`, or the deployment's ``EMBEDDER_KEY_ENV_ALLOWED``)
  and none of :data:`DENIED_KEY_ENV_PATTERNS`; the denial wins over any allow pattern, so even
  ``EMBEDDER_KEY_ENV_ALLOWED=*`` never lets a service secret out.
- **URL**: ``http`` or ``https`` with a host and no ``user:password@``; when the deployment lists
  hosts (``ENDPOINT_HOSTS_ALLOWED``, glob patterns such as ``api.openai.com`` or
  ``*.internal``), the host must match one. An empty list allows any host (local vLLM/Ollama
  work without configuration).
- **Webhook URL** (the console's notifications, :func:`check_webhook_url`): any console
  reviewer may add one, so the rule is stricter: a host the deployment lists
  (``WEBHOOK_HOSTS_ALLOWED``, else ``ENDPOINT_HOSTS_ALLOWED``) is trusted; with no list, the
  host must resolve only to public addresses (no loopback, private, link-local, reserved or
  multicast address), checked when the webhook is saved and again before every delivery.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Callable, Iterable, Mapping
from fnmatch import fnmatchcase
from urllib.parse import urlsplit

__all__ = [
    "DEFAULT_KEY_ENV_ALLOWED",
    "DENIED_KEY_ENV_PATTERNS",
    "HOSTS_ENV",
    "check_endpoint_url",
    "check_key_env",
    "check_webhook_url",
    "hosts_from_env",
    "non_public_addresses",
    "patterns_from",
]

DEFAULT_KEY_ENV_ALLOWED: tuple[str, ...] = ("OPENAI_API_KEY", "MEMORYADMIN_EMBEDDER_KEY*")
"""Key variables an embedder setting may name when the deployment sets no list of its own."""

DENIED_KEY_ENV_PATTERNS: tuple[str, ...] = (
    "SECRET_KEY",
    "DATABASE_URL",
    "CHROMA_TOKEN",
    "EMAIL_HOST_PASSWORD",
    "EMAIL_HOST_USER",
    "Q_REDIS_URL",
    "DJANGO_*",
    "*SECRET*",
    "*PASSWORD*",
    "*PASSWD*",
    "*TOKEN*",
    "*DATABASE*",
    "*_URL",
    "*_DSN",
)
"""Never a key variable, whatever the allow list says (matched case-insensitively): the service's
own secrets (memoryadmin/settings.py reads them) and names of the kinds that hold credentials."""

HOSTS_ENV = "ENDPOINT_HOSTS_ALLOWED"
"""The environment variable (and Django setting) listing the hosts an endpoint may be on."""

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,119}")


def patterns_from(value: str | Iterable[str] | None) -> tuple[str, ...]:
    """Comma-separated text (or an iterable) → the non-blank, stripped patterns, in order."""
    items = value.split(",") if isinstance(value, str) else list(value or ())
    return tuple(p.strip() for p in items if str(p).strip())


def check_key_env(name: str, allowed: Iterable[str] | None = None) -> str:
    """The key variable's name, stripped, when a deployment lets an embedder read it.

    ``allowed``: glob patterns (default :data:`DEFAULT_KEY_ENV_ALLOWED`). Raises ``ValueError``
    naming the variable for a malformed name, a denied name (:data:`DENIED_KEY_ENV_PATTERNS`)
    or one no allowed pattern matches.
    """
    name = str(name or "").strip()
    if not _NAME.fullmatch(name):
        raise ValueError(
            f"The embedder key variable must be an environment variable name (got {name[:80]!r})."
        )
    upper = name.upper()
    if any(fnmatchcase(upper, p.upper()) for p in DENIED_KEY_ENV_PATTERNS):
        raise ValueError(
            f"The embedder key variable {name!r} is one of the service's secrets (or named like "
            "one); name a variable that holds only the embedder's key."
        )
    patterns = patterns_from(allowed) if allowed is not None else DEFAULT_KEY_ENV_ALLOWED
    if not any(fnmatchcase(name, p) for p in patterns):
        raise ValueError(
            f"The embedder key variable {name!r} is not one this deployment allows "
            f"({', '.join(patterns) or 'none'}; EMBEDDER_KEY_ENV_ALLOWED)."
        )
    return name


def check_endpoint_url(
    url: str, allowed_hosts: Iterable[str] = (), *, what: str = "endpoint"
) -> str:
    """The URL, stripped, when it is an ``http(s)`` URL on a host the deployment allows.

    ``allowed_hosts``: glob patterns matched against the lowercased host name (no port); empty
    allows any host. ``what`` names the endpoint in the message. Raises ``ValueError`` for
    another scheme, no host, credentials in the URL or a host no pattern matches.
    """
    url = str(url or "").strip()
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"The {what} URL must be http(s)://host[:port]/…, got {url[:200]!r}.")
    if parts.username is not None or parts.password is not None:
        raise ValueError(f"The {what} URL must not carry a user name or password.")
    host = parts.hostname.lower()
    patterns = patterns_from(allowed_hosts)
    if patterns and not any(fnmatchcase(host, p.lower()) for p in patterns):
        raise ValueError(
            f"The {what} host {host!r} is not one this deployment allows ({HOSTS_ENV})."
        )
    return url


def hosts_from_env(env: Mapping[str, str]) -> tuple[str, ...]:
    """The allowed endpoint hosts from ``env`` (:data:`HOSTS_ENV`; empty: any host)."""
    return patterns_from(env.get(HOSTS_ENV) or "")


Resolver = Callable[[str, int], list[str]]
"""``(host, port)`` → the IP addresses the host resolves to (raises ``OSError`` when none)."""


def _resolve(host: str, port: int) -> list[str]:
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return sorted({str(info[4][0]) for info in infos})


def non_public_addresses(addresses: Iterable[str]) -> list[str]:
    """The addresses of ``addresses`` that are not public (``ipaddress``'s ``is_global`` is
    false: loopback, private, link-local, shared, reserved, multicast, unspecified)."""
    out = []
    for text in addresses:
        address = ipaddress.ip_address(text.split("%", 1)[0])
        if not address.is_global or address.is_multicast:
            out.append(text)
    return out


def check_webhook_url(
    url: str, allowed_hosts: Iterable[str] = (), *, resolve: Resolver | None = None
) -> str:
    """The webhook URL, stripped, when the worker may POST to it (module docstring).

    ``allowed_hosts``: glob patterns; a host matching one is trusted whatever it resolves to,
    and with patterns given no other host is allowed. With none, every address ``resolve``
    (default: ``socket.getaddrinfo``) gives must be public. Raises ``ValueError`` for a URL
    :func:`check_endpoint_url` refuses, a host that does not resolve or one with a non-public
    address.
    """
    patterns = patterns_from(allowed_hosts)
    url = check_endpoint_url(url, patterns, what="webhook")
    if patterns:
        return url
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        addresses = (resolve or _resolve)(host, port)
    except (OSError, UnicodeError) as exc:
        raise ValueError(f"The webhook host {host!r} does not resolve ({exc}).") from exc
    private = non_public_addresses(addresses)
    if private or not addresses:
        raise ValueError(
            f"The webhook host {host!r} resolves to a non-public address "
            f"({', '.join(private) or 'none'}); list it in WEBHOOK_HOSTS_ALLOWED to allow it."
        )
    return url
