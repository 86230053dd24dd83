"""Root URL configuration."""

from __future__ import annotations

from django.contrib import admin
from django.urls import include, path

from memoryadmin.console.views.accounts import (
    PasswordChangeView,
    PasswordResetConfirmView,
    password_reset,
)

urlpatterns = [
    path("admin/", admin.site.urls),
    # Before Django's auth URLs: without EMAIL_HOST it says an administrator resets passwords.
    path("accounts/password_reset/", password_reset, name="password_reset"),
    # Before Django's too: a new password lifts a lockout; a wrong old one counts as a failure.
    path(
        "accounts/reset/<uidb64>/<token>/",
        PasswordResetConfirmView.as_view(),
        name="password_reset_confirm",
    ),
    path("accounts/password_change/", PasswordChangeView.as_view(), name="password_change"),
    path("accounts/", include("django.contrib.auth.urls")),
    path("", include("memoryadmin.api.urls")),
    path("", include("memoryadmin.console.urls")),
]
