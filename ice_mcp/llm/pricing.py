"""Per-model prices (prices.json), the cost of a call, and the cost estimate of a call to come."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from ice_mcp.types import Usage

CHARS_PER_TOKEN = 4
# Tokens a chat request spends beyond its text: roles, separators, the reply's priming.
MESSAGE_OVERHEAD_TOKENS = 8


@dataclass(frozen=True, slots=True)
class Price:
    model: str
    provider: str
    input_per_million: float
    output_per_million: float
    as_of: str

    def cost(self, usage: Usage) -> float:
        return (
            usage.input_tokens * self.input_per_million + usage.output_tokens * self.output_per_million
        ) / 1_000_000


class PriceTable:
    """Prices by model name: the longest listed prefix wins, then the provider's `*` entry."""

    def __init__(self, entries: dict[str, dict[str, Any]]) -> None:
        self._prices: dict[str, Price] = {}
        for name, entry in entries.items():
            self.add(
                Price(
                    model=name,
                    provider=str(entry["provider"]),
                    input_per_million=float(entry["input"]),
                    output_per_million=float(entry["output"]),
                    as_of=str(entry.get("as_of", "")),
                )
            )

    def add(self, price: Price) -> None:
        self._prices[price.model] = price

    def copy(self) -> PriceTable:
        other = PriceTable({})
        other._prices = dict(self._prices)
        return other

    def models(self) -> list[str]:
        return sorted(name for name in self._prices if not name.endswith("/*"))

    def lookup(self, model: str) -> Price | None:
        """The listed price of `model` (exact or by prefix, e.g. a dated version), else None."""
        if model in self._prices:
            return self._prices[model]
        best: Price | None = None
        for name, price in self._prices.items():
            if name.endswith("/*") or not model.startswith(name):
                continue
            if best is None or len(name) > len(best.model):
                best = price
        return best

    def price(self, model: str, provider: str) -> Price:
        """The price to charge: the model's own, else its provider's conservative default."""
        found = self.lookup(model)
        if found is not None:
            return found
        fallback = self._prices.get(f"{provider}/*")
        if fallback is not None:
            return fallback
        # A provider we hold no prices for (a self-hosted endpoint): free.
        return Price(model, provider, 0.0, 0.0, "")

    def provider_of(self, model: str) -> str | None:
        found = self.lookup(model)
        return found.provider if found else None


@cache
def default_prices() -> PriceTable:
    text = resources.files("ice_mcp.llm").joinpath("prices.json").read_text(encoding="utf-8")
    return PriceTable(json.loads(text)["models"])


def estimate_tokens(text: str) -> int:
    """A conservative token count for `text` without a tokenizer (about 4 characters a token)."""
    return math.ceil(len(text) / CHARS_PER_TOKEN) + MESSAGE_OVERHEAD_TOKENS


def call_cost_range(price: Price, input_tokens: int, max_output_tokens: int) -> tuple[float, float]:
    """USD of one call: at least its input and one token out, at most its input and `max_tokens` out."""
    low = price.cost(Usage(input_tokens, 1))
    high = price.cost(Usage(input_tokens, max_output_tokens))
    return low, high
