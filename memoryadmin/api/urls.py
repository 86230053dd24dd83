"""URLs of the API app: the JSON API under ``api/v1/`` and the user's token page."""

from __future__ import annotations

from django.urls import path

from memoryadmin.api import views
from memoryadmin.api.api import urls as api_urls

urlpatterns = [
    path("api/v1/", api_urls()),
    path("account/api-tokens/", views.token_list, name="api_tokens"),
    path("account/api-tokens/<int:pk>/revoke/", views.token_revoke, name="api_token_revoke"),
]
