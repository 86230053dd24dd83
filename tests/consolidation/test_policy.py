"""Policy validation: each bad value raises ValueError naming the field."""

from __future__ import annotations

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
