"""Console URLs (views are added by the UI work)."""

from __future__ import annotations

urlpatterns: list = []
