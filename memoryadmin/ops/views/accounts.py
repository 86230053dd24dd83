"""Account pages: password reset (throttled; it lifts a lockout) and password change."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from memoryadmin.ops.forms.accounts import ThrottledPasswordChangeForm
from memoryadmin.ops.services.accounts import lockout_clear, password_reset_throttled

__all__ = ["PasswordChangeView", "PasswordResetConfirmView", "password_reset"]


@login_not_required
@require_http_methods(["GET", "POST"])
def password_reset(request: HttpRequest) -> HttpResponse:
    """ "Forgot your password?": Django's reset-by-mail when ``EMAIL_HOST`` is set; without a
    mail server, a page saying an administrator resets it (``manage.py changepassword``).

    A request over the limits (:func:`password_reset_throttled`) sends no mail and is answered
    like any other (the "check your mail" page), so nobody learns which addresses exist.
    """
    if not settings.EMAIL_HOST:
        return render(request, "registration/password_reset_unavailable.html")
    if request.method == "POST":
        email = str(request.POST.get("email", ""))[:254]
        if email and password_reset_throttled(request=request, email=email):
            return redirect("password_reset_done")
    return auth_views.PasswordResetView.as_view()(request)


class PasswordResetConfirmView(auth_views.PasswordResetConfirmView):
    """Django's "set a new password" page; a new password also lifts a django-axes lockout."""

    def form_valid(self, form: Any) -> HttpResponse:
        response = super().form_valid(form)
        lockout_clear(user=form.user)
        return response


class PasswordChangeView(auth_views.PasswordChangeView):
    """Django's password change with wrong old passwords throttled like logins."""

    form_class = ThrottledPasswordChangeForm

    def get_form_kwargs(self) -> dict[str, Any]:
        return {**super().get_form_kwargs(), "request": self.request}
