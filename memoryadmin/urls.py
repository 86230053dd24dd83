"""Root URL configuration."""

from __future__ import annotations

from django.contrib import admin
from django.urls import include, path

from memoryadmin.console.views.errors import password_reset

urlpatterns = [
    path("admin/", admin.site.urls),
    # Before Django's auth URLs: without EMAIL_HOST it says an administrator resets passwords.
    path("accounts/password_reset/", password_reset, name="password_reset"),
    path("accounts/", include("django.contrib.auth.urls")),
    path("", include("memoryadmin.api.urls")),
    path("", include("memoryadmin.console.urls")),
]
