"""What a pass's model work cost, from its token totals and a price table (pure, no network).

A price table maps a model name to ``{"in": USD per 1M input tokens, "out": USD per 1M output
tokens}``; the console's is ``settings.LLM_PRICES``. A model missing from the table has no
price (its cost is ``None``, shown as "no price"), never a guessed one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["llm_cost_usd", "price_of"]


def price_of(model: str, prices: Mapping[str, Mapping[str, float]]) -> Mapping[str, float] | None:
    """The ``{"in", "out"}`` price of ``model`` in ``prices``: its exact name, else the longest
    table name it starts with followed by ``-`` (``gpt-4o-mini-2024-07-18`` is priced as
    ``gpt-4o-mini``); ``None`` when none matches."""
    if model in prices:
        return prices[model]
    best = max((name for name in prices if model.startswith(name + "-")), key=len, default="")
    return prices[best] if best else None


def llm_cost_usd(
    totals: Mapping[str, Any] | None, model: str, prices: Mapping[str, Mapping[str, float]]
) -> float | None:
    """USD of ``totals`` (``{"tokens_in", "tokens_out", …}``, as ``llm_figures`` computes them)
    at ``model``'s price; ``None`` when the model has no price. Rounded to 1e-6 USD. Raises
    ``ValueError`` for a price that is not a non-negative number."""
    price = price_of(model or "", prices)
    if price is None:
        return None
    p_in, p_out = price.get("in", 0.0), price.get("out", 0.0)
    for p in (p_in, p_out):
        if not isinstance(p, int | float) or isinstance(p, bool) or p < 0:
            raise ValueError(f"price of {model!r} must be non-negative USD per 1M tokens: {p!r}")
    totals = totals or {}
    usd = (int(totals.get("tokens_in", 0)) * p_in + int(totals.get("tokens_out", 0)) * p_out) / 1e6
    return round(usd, 6)
