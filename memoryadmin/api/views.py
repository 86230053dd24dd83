"""The user's API token page: list, create (the token is shown once) and revoke own tokens."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.http import HttpRequest
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods, require_POST

from memoryadmin.api import tokens
from memoryadmin.api.models import ApiToken


class TokenForm(forms.Form):
    name = forms.CharField(max_length=100, required=False, help_text="what the token is for")


NEW_TOKEN_KEY = "api_new_token"
"""Session key holding a just-created raw token until the page after the redirect shows it."""


@never_cache  # the page shows a raw token once: no browser or proxy may keep a copy
@require_http_methods(["GET", "POST"])
def token_list(request: HttpRequest):
    """Own tokens (prefix, name, created, last used, revoked); POST creates one and redirects
    (a refresh never makes a second token); the next page shows it once, from the session."""
    form = TokenForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            _token, raw = tokens.token_create(
                user=request.user, name=form.cleaned_data["name"], by=request.user
            )
        except ValueError as exc:
            form.add_error("name", str(exc))
        else:
            request.session[NEW_TOKEN_KEY] = raw
            return redirect("api_tokens")
    ctx = {
        "nav": "tokens",
        "tokens": tokens.tokens_of(request.user),
        "form": form,
        "new_token": request.session.pop(NEW_TOKEN_KEY, ""),
    }
    return render(request, "api/tokens.html", ctx)


@require_POST
def token_revoke(request: HttpRequest, pk: int):
    """Revoke one of the user's own tokens (another user's token is a 404)."""
    token = get_object_or_404(ApiToken, pk=pk, user=request.user)
    tokens.token_revoke(token=token, by=request.user)
    messages.success(request, f"Token {token.prefix}… revoked; it no longer works.")
    return redirect("api_tokens")
