"""Display filters: operation scores and memory metadata as labelled fields."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from memoryadmin.agents.models import Agent
from memoryadmin.templatetags.console import metadata_fields, score_fields
from tests.proposals.make import make_proposal


@pytest.mark.parametrize(
    ("scores", "expected"),
    [
        (
            {
                "min_cosine": 0.9312,
                "confidence": 0.9312,
                "rule": "near_duplicate",
                "pairwise": [[1]],
            },
            [("lowest pairwise cosine", "0.931"), ("confidence", "0.931")],
        ),
        (
            {"score": 0.0123, "age_days": 120, "coverage": 0.75},
            [
                ("decayed importance", "0.012"),
                ("age", "120.0 days"),
                ("content words kept elsewhere", "75.0%"),
            ],
        ),
        (
            {"rules": ["min_sessions", "importance"], "promoted": True, "new_key": 3},
            [
                ("rules", "min sessions, importance"),
                ("merged memory promoted", "yes"),
                ("new key", "3"),
            ],
        ),
        (None, []),
    ],
)
def test_it_labels_operation_scores(scores, expected):
    assert score_fields(scores) == expected


def test_it_labels_memory_metadata():
    meta = {
        "pinned": False,
        "evidence": ["D1:3", "D1:4"],
        "created_at": "2025-01-01T00:00:00+00:00",
        "importance": 0.5,
        "extra": {"a": 1},
    }
    assert metadata_fields(meta) == [
        ("created", "2025-01-01 00:00:00 UTC"),
        ("evidence", "D1:3, D1:4"),
        ("extra", "a: 1"),
        ("importance", "0.5"),
        ("pinned", "no"),
    ]


def test_a_memory_time_is_shown_to_the_second_without_microseconds():
    meta = {"updated_at": "2026-12-02T05:04:16.123456+00:00", "last_accessed_at": "not a date"}
    assert metadata_fields(meta) == [
        ("last accessed", "not a date"),
        ("updated", "2026-12-02 05:04:16 UTC"),
    ]


@pytest.mark.django_db
def test_the_pass_page_shows_scores_as_labelled_fields(client: Client, carol, unique_name) -> None:
    agent = Agent.objects.create(name="A", slug=unique_name("a"), collection_name=unique_name("c"))
    run = make_proposal(agent, merges=1, prunes=1)
    client.force_login(carol)
    html = client.get(reverse("pass_detail", args=[run.pk])).content.decode()
    assert "<dt>lowest pairwise cosine</dt>" in html and "<dt>age</dt>" in html
    assert "min_cosine=" not in html and "age_days=" not in html
