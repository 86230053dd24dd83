"""Policy validation: each bad value raises ValueError naming the field."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

import pytest

from consolidation import NAMED_POLICIES, Policy


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("max_loss_fraction", 1.5),
        ("max_loss_fraction", -0.1),
        ("max_loss_fraction", float("nan")),
        ("max_loss_fraction", "0.2"),
        ("max_loss_fraction", True),
        ("link_threshold", 1.01),
        ("link_threshold", float("inf")),
        ("contradiction_threshold", -1.5),
        ("max_group_size", 1),
        ("max_group_size", 0),
        ("max_group_size", 2.5),
        ("max_group_size", True),
        ("max_group_size", 10**23),
        ("recall_k", 5000),
        ("prune_half_life_days", 1e9),
        ("max_merged_chars", 5),
        ("merge_exact", "yes"),
        ("merge_near", 1),
        ("reconcile", None),
        ("promote", "true"),
        ("prune", 0),
        ("curated_tier", ""),
        ("curated_tier", 3),
        ("promote_min_sessions", 0),
        ("promote_min_importance", 2.0),
        ("promote_min_access", -1),
        ("prune_half_life_days", 0),
        ("prune_half_life_days", -3.0),
        ("prune_threshold", 1.2),
        ("prune_min_age_days", -1),
        ("min_recall_retention", 1.5),
        ("min_recall_retention", float("nan")),
        ("recall_k", 0),
        ("max_lost_content_words", -1),
        ("max_lost_content_words", 2.5),
        ("max_lost_content_words", True),
        ("max_lost_content_words", "3"),
        ("max_lost_content_words", 10**12),
        ("max_lost_sentence_fraction", 1.5),
        ("max_lost_sentence_fraction", None),
        ("auto_apply_max_risk", -0.1),
        ("auto_apply_max_risk", float("nan")),
    ],
)
def test_it_rejects_a_bad_value_naming_the_field(field, value):
    with pytest.raises(ValueError, match=field):
        Policy(**{field: value})


@pytest.mark.parametrize("name", sorted(NAMED_POLICIES))
def test_it_ships_valid_named_policies(name):
    policy = NAMED_POLICIES[name]
    assert Policy.from_dict(policy.to_dict()) == policy


def test_it_rejects_unknown_fields():
    with pytest.raises(ValueError, match="bogus"):
        Policy.from_dict({"bogus": 1})


def test_it_accepts_empty_recall_retention():
    assert Policy(min_recall_retention=None).min_recall_retention is None


@pytest.mark.parametrize(("value", "stored"), [(0, 0), (3.0, 3), (None, None)])
def test_it_takes_a_whole_number_of_content_words_or_none(value, stored):
    got = Policy(max_lost_content_words=value).max_lost_content_words
    assert got == stored and (got is None or type(got) is int)


def test_every_field_says_what_it_does_and_why_its_default_is_what_it_is():
    """Each field's help sentence is in its metadata (the console's form shows it) and its
    source — seed, paper or measurement — in docs/POLICY.md."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "POLICY.md").read_text()
    for f in fields(Policy):
        assert len(f.metadata.get("help", "")) > 20, f.name
        assert f"`{f.name}`" in page, f"{f.name} has no source in docs/POLICY.md"


@pytest.mark.parametrize(
    "f", [f for f in fields(Policy) if "low" in f.metadata], ids=lambda f: f.name
)
def test_the_lowest_value_a_field_declares_is_the_lowest_it_accepts(f):
    low = f.metadata["low"]
    extra = {  # the fields the rules between two fields tie this one to
        "summary_min_cluster": {"summary_max_cluster": 256},
        "summary_max_cluster": {"summary_min_cluster": 2},
        "llm_context_tokens": {"llm_max_tokens": 16},
    }.get(f.name, {})
    Policy(**{f.name: low, **extra})  # accepted
    below = low - (1 if "int" in str(f.type) else 0.01)
    with pytest.raises(ValueError, match=f.name):
        Policy(**{f.name: below, **extra})
