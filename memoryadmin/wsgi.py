"""WSGI entry point (``gunicorn memoryadmin.wsgi`` in production)."""

from __future__ import annotations

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memoryadmin.settings")
application = get_wsgi_application()

from memoryadmin.core.stores import warm_up  # noqa: E402  (needs the app registry)

warm_up()  # the Chroma client and the embedder, before the first request
