"""The operator's time zone from the browser's ``tz`` cookie.

app.js stores the zone with ``encodeURIComponent`` (``America%2FNew_York``); the server read the
cookie as is, found no such zone and showed UTC everywhere.
"""

from __future__ import annotations

from django.test import RequestFactory

from memoryadmin.core.selectors import request_zone
from tests.conftest import login


def test_it_reads_the_url_encoded_cookie_app_js_writes() -> None:
    request = RequestFactory().get("/")
    request.COOKIES["tz"] = "America%2FNew_York"
    assert request_zone(request).key == "America/New_York"


def test_it_still_reads_a_plain_cookie_and_falls_back_on_nonsense(settings) -> None:
    settings.TIME_ZONE = "UTC"
    request = RequestFactory().get("/")
    request.COOKIES["tz"] = "Europe/Lisbon"
    assert request_zone(request).key == "Europe/Lisbon"
    request.COOKIES["tz"] = "%2E%2E%2Fetc%2Fpasswd"
    assert request_zone(request).key == "UTC"


def test_it_shows_the_page_in_the_cookie_zone(client, bob) -> None:
    login(client, bob)
    client.cookies["tz"] = "America%2FNew_York"
    html = client.get("/").content.decode()
    assert ">America/New_York</span>" in html
