"""Test helpers for the JSON API: real tokens for alice (admin), bob (reviewer), carol (viewer)."""

from __future__ import annotations

from typing import Any

from django.test import Client

from memoryadmin.api.tokens import token_create


class Api:
    """A Django test client that sends ``Authorization: Bearer <token>`` on every request."""

    def __init__(self, client: Client, token: str | None) -> None:
        self.client = client
        self.headers = {"HTTP_AUTHORIZATION": f"Bearer {token}"} if token else {}

    def get(self, path: str, **params: Any) -> Any:
        return self.client.get(f"/api/v1{path}", params, **self.headers)

    def post(self, path: str, body: dict[str, Any] | None = None) -> Any:
        return self.client.post(
            f"/api/v1{path}", body or {}, content_type="application/json", **self.headers
        )

    def call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        fn = getattr(self.client, method.lower())
        if method.upper() == "GET":
            return fn(f"/api/v1{path}", **self.headers)
        return fn(f"/api/v1{path}", body or {}, content_type="application/json", **self.headers)


def api_factory(alice: Any, bob: Any, carol: Any) -> Any:
    """``make("admin" | "reviewer" | "viewer" | "anonymous")`` → :class:`Api` with a real token
    of alice / bob / carol (a module's ``api_as`` fixture returns this)."""
    users = {"admin": alice, "reviewer": bob, "viewer": carol}

    def make(role: str) -> Api:
        if role == "anonymous":
            return Api(Client(), None)
        _token, raw = token_create(user=users[role], name=f"test {role}")
        return Api(Client(), raw)

    return make
