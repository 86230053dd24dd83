"""Counts read as English: no "(s)" in any template or message, and the admin's model names
have their real plurals (not "memorys", "querys")."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.apps import apps

from tests.api.api_helpers import api_factory

ROOT = Path(__file__).resolve().parents[2]
SOURCES = [*ROOT.glob("templates/**/*.html"), *ROOT.glob("memoryadmin/**/*.py")]


def test_no_template_or_message_pluralizes_with_parentheses() -> None:
    """Django's ``pluralize`` / ``ngettext`` say "1 operation" and "2 operations"."""
    found = [
        f"{path.relative_to(ROOT)}:{n}"
        for path in SOURCES
        if "migrations" not in path.parts
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if re.search(r"[a-z]\(s\)(?!\))", line) and "http(s)" not in line
    ]
    assert not found, found


def test_every_model_has_a_real_plural() -> None:
    for model in apps.get_models():
        plural = str(model._meta.verbose_name_plural)
        assert not re.search(r"[^aeiou]ys$", plural), (model.__name__, plural)


@pytest.mark.django_db
def test_the_admin_index_lists_archived_memories_and_probe_queries(admin_client) -> None:
    html = admin_client.get("/admin/").content.decode()
    assert "Archived memories" in html and "Probe queries" in html
    assert "memorys" not in html.lower() and "querys" not in html.lower()


@pytest.fixture
def api_as(alice, bob, carol):
    return api_factory(alice, bob, carol)


@pytest.mark.django_db
def test_a_missing_page_names_its_count_in_words(api_as) -> None:
    r = api_as("viewer").get("/passes", page=99)
    assert r.status_code == 404, r.content
    assert "(s)" not in r.json()["detail"] and re.search(r"is 1 page\b", r.json()["detail"])
