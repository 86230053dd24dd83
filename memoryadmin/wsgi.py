"""WSGI entry point (``gunicorn memoryadmin.wsgi`` in production)."""

from __future__ import annotations

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memoryadmin.settings")
application = get_wsgi_application()

from memoryadmin.core.stores import warm_up  # noqa: E402  (needs the app registry)

warm_up()  # the Chroma client and the embedder, before the first request


def warm_up_pages() -> None:
    """Import every view (the URLconf; Django loads it on the first request) and compile the
    templates of the pages an operator opens first, so the first proposal page after a start
    answers nearly as fast as the next one (a 7-operation proposal's first page took
    1.1–1.3 s after a start, the next ones 0.2 s; with this 0.3–0.7 s on a busy 2-core box).
    Off with ``MEMORYADMIN_WARM_UP=0``, like :func:`~memoryadmin.core.stores.warm_up`."""
    if os.getenv("MEMORYADMIN_WARM_UP", "1").strip().lower() in ("0", "false", "no", "off"):
        return
    from django.template.loader import get_template
    from django.urls import get_resolver

    get_resolver().url_patterns  # noqa: B018  (the lazy import is the point)
    for name in WARM_TEMPLATES:
        get_template(name)


WARM_TEMPLATES = (
    "proposals/pass_detail.html",
    "proposals/_review.html",
    "ops/dashboard.html",
    "agents/agent_detail.html",
)
"""Templates compiled at start: the proposal page with its Review panel, the dashboard and an
agent's page."""

warm_up_pages()
