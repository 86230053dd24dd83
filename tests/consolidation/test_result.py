"""The loss guard: the seed contract's examples (seeds/000, quoted in docs/SOURCES.md) plus the
fail-closed superset."""

from __future__ import annotations

import pytest

from consolidation import ConsolidationResult
from consolidation.result import loss_budget


@pytest.mark.parametrize(
    ("before", "after", "retained", "expected"),
    [
        (100, 60, None, 0.4),  # net-count loss
        (100, 100, 0, 1.0),  # equal size but nothing original kept
        (100, 90, 80, 0.2),  # partial retention
        (0, 0, None, 0.0),  # empty store
        (10, 15, None, 0.0),  # growth is never negative
        (10, 15, 10, 0.0),
        (100, 100, 150, 0.0),  # retained clamped to entries_before
        (100, 100, -5, 1.0),  # retained clamped to 0
    ],
)
def test_it_measures_loss_fraction(before, after, retained, expected):
    r = ConsolidationResult(entries_before=before, entries_after=after, retained_originals=retained)
    assert r.loss_fraction == pytest.approx(expected)


@pytest.mark.parametrize(("retained", "clamped"), [(150, 100), (-5, 0), (80, 80), (None, None)])
def test_it_clamps_retained_originals(retained, clamped):
    r = ConsolidationResult(entries_before=100, entries_after=90, retained_originals=retained)
    assert r.retained_originals == clamped


@pytest.mark.parametrize(
    ("before", "after", "retained", "threshold", "exceeds"),
    [
        (100, 60, None, 0.25, True),
        (100, 60, None, 0.5, False),
        (100, 100, 0, 0.25, True),
        (100, 90, 80, 0.25, False),
        (100, 75, None, 0.25, False),  # strict >: exactly at the threshold passes
        (100, 74, None, 0.25, True),
        (0, 0, None, 0.0, False),
        (100, 100, 100, 0.0, False),
        (100, 99, None, 0.0, True),
        (100, 0, None, 1.0, False),
    ],
)
def test_it_trips_the_guard_strictly_above_threshold(before, after, retained, threshold, exceeds):
    r = ConsolidationResult(entries_before=before, entries_after=after, retained_originals=retained)
    assert r.exceeds_loss(threshold) is exceeds


@pytest.mark.parametrize(
    "bad", [float("nan"), float("inf"), float("-inf"), -0.1, 1.5, True, False, "x", None, [0.2]]
)
def test_it_fails_closed_on_invalid_threshold(bad):
    r = ConsolidationResult(entries_before=100, entries_after=60)
    with pytest.raises(ValueError):
        r.exceeds_loss(bad)


def test_it_defaults_context_to_empty_dict():
    r = ConsolidationResult()
    assert r.context == {}
    assert ConsolidationResult(context=None).context == {}
    assert r.rejected is False and r.reason is None and r.retained_originals is None


def test_it_serialises_with_loss_fraction():
    d = ConsolidationResult(entries_before=100, entries_after=60, merged=40).to_dict()
    assert d["loss_fraction"] == pytest.approx(0.4)
    assert d["merged"] == 40


@pytest.mark.parametrize("n", [0, 1, 3, 7, 10, 99, 100, 101, 1000, 12345])
@pytest.mark.parametrize("f", [0.0, 0.01, 0.1, 0.25, 0.29, 0.3, 0.33, 0.57, 0.7, 1.0])
def test_the_loss_budget_is_the_most_removals_the_guard_lets_pass(f, n):
    k = loss_budget(f, n)
    passes = ConsolidationResult(entries_before=n, entries_after=n, retained_originals=n - k)
    assert not passes.exceeds_loss(f)
    if k < n:
        one_more = ConsolidationResult(entries_before=n, retained_originals=n - k - 1)
        assert one_more.exceeds_loss(f)


def test_the_loss_budget_does_not_truncate_a_float_below_the_guard():
    assert int(0.29 * 100) == 28  # what the LLM judge once allowed
    assert loss_budget(0.29, 100) == 29


@pytest.mark.parametrize("bad", [-0.1, 1.5, float("nan"), "x", None, True])
def test_the_loss_budget_refuses_an_invalid_threshold(bad):
    with pytest.raises(ValueError, match="max_loss_fraction"):
        loss_budget(bad, 10)
