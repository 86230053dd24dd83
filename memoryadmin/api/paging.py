"""Paging of API lists: ``(page, count, pages)`` with a 404 naming ``page`` past the last one."""

from __future__ import annotations

from typing import Any

from django.core.paginator import EmptyPage, Page, Paginator
from django.utils.translation import ngettext

from memoryadmin.api.actions.common import NotFound


def paginate(items: Any, page: int, per_page: int) -> tuple[Page, int, int]:
    """``(page, count, pages)`` of ``items``; :class:`NotFound` for a page past the last one."""
    paginator = Paginator(items, per_page)
    try:
        current = paginator.page(page)
    except EmptyPage:
        if page == 1:
            return paginator.get_page(1), 0, 1
        raise NotFound(
            f"Page {page} does not exist; there "
            f"{ngettext('is', 'are', paginator.num_pages)} {paginator.num_pages} "
            f"{ngettext('page', 'pages', paginator.num_pages)}.",
            field="page",
        ) from None
    return current, paginator.count, paginator.num_pages
