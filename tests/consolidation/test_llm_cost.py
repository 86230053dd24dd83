"""The cost of a pass's model work from its token totals and a price table."""

from __future__ import annotations

import pytest

from consolidation.llm_cost import llm_cost_usd, price_of
from consolidation.snapshot import llm_brief

PRICES = {"gpt-4o-mini": {"in": 0.15, "out": 0.60}, "gpt-4o": {"in": 2.5, "out": 10.0}}


def test_tokens_in_and_out_are_priced_per_million() -> None:
    totals = {"tokens_in": 2_000, "tokens_out": 500, "requests": 3}
    assert llm_cost_usd(totals, "gpt-4o-mini", PRICES) == pytest.approx(0.0006)
    assert llm_cost_usd(totals, "gpt-4o", PRICES) == pytest.approx(0.01)


def test_a_dated_model_name_takes_its_family_price_and_an_unknown_model_has_none() -> None:
    assert price_of("gpt-4o-mini-2024-07-18", PRICES) == PRICES["gpt-4o-mini"]
    assert price_of("gpt-4o-2024-08-06", PRICES) == PRICES["gpt-4o"]
    assert price_of("gemma-3-270m", PRICES) is None
    assert llm_cost_usd({"tokens_in": 10}, "gemma-3-270m", PRICES) is None


def test_a_negative_price_is_refused() -> None:
    with pytest.raises(ValueError, match="non-negative"):
        llm_cost_usd({"tokens_in": 1}, "m", {"m": {"in": -1, "out": 0}})


def test_the_brief_of_a_pass_carries_its_cost() -> None:
    context = {
        "llm": {
            "model": "gpt-4o-mini",
            "totals": {"tokens_in": 1_000_000, "tokens_out": 0},
            "distill": {"summary": "1 group distilled"},
        }
    }
    assert llm_brief(context, PRICES)["cost_usd"] == pytest.approx(0.15)
    assert llm_brief(context)["cost_usd"] is None  # no price table, no price
