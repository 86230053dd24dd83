"""Account forms: the password change, its wrong old passwords counted by django-axes."""

from __future__ import annotations

from typing import Any

from axes.handlers.proxy import AxesProxyHandler
from django import forms
from django.conf import settings
from django.contrib.auth import authenticate
from django.contrib.auth.forms import PasswordChangeForm

__all__ = ["ThrottledPasswordChangeForm"]


class ThrottledPasswordChangeForm(PasswordChangeForm):
    """Django's password change, with the old password checked through ``authenticate()``.

    So each wrong old password is a failed login to django-axes: after ``AXES_FAILURE_LIMIT``
    of them from one address the form refuses (even the right password) for
    ``AXES_COOLOFF_TIME``, as the login page does. Needs the ``request`` (keyword).
    """

    def __init__(self, user: Any, *args: Any, request: Any = None, **kwargs: Any) -> None:
        super().__init__(user, *args, **kwargs)
        self.request = request

    def clean_old_password(self) -> str:
        old = self.cleaned_data["old_password"]
        credentials = {"username": self.user.get_username()}
        minutes = int(settings.AXES_COOLOFF_TIME.total_seconds() // 60)
        locked = forms.ValidationError(
            f"Too many wrong passwords; try again in {minutes} minutes.", code="locked"
        )
        if AxesProxyHandler.is_locked(self.request, credentials):
            raise locked
        if authenticate(self.request, username=credentials["username"], password=old) is None:
            if AxesProxyHandler.is_locked(self.request, credentials):
                raise locked
            raise forms.ValidationError(
                self.error_messages["password_incorrect"], code="password_incorrect"
            )
        return old
