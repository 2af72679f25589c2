"""Validation results: structured issues and the cost estimate."""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import TypeVar

from pydantic import BaseModel, Field

N = TypeVar("N", int, float)


class ValidationIssue(BaseModel):
    code: str
    message: str
    node_id: str | None = None  # the node it concerns (the innermost, inside loops and branches)
    field: str | None = None  # the field of that node (or of the blueprint, without a node), dotted
    suggestion: str | None = None
    path: str | None = None  # a JSON pointer to what it concerns in the document: /nodes/2/tool_args/path
    line: int | None = None  # where that is in the document's text (1-based), when it was given as text
    column: int | None = None


class CostEstimate(BaseModel):
    """LLM calls and spend a run may need; a `None` maximum means unbounded."""

    llm_calls_min: int = 0
    llm_calls_max: int | None = 0
    usd_min: float = 0.0
    usd_max: float | None = 0.0

    def __add__(self, other: CostEstimate) -> CostEstimate:
        if other.is_zero:
            return self
        if self.is_zero:
            return other
        return CostEstimate(
            llm_calls_min=self.llm_calls_min + other.llm_calls_min,
            llm_calls_max=_add(self.llm_calls_max, other.llm_calls_max),
            usd_min=self.usd_min + other.usd_min,
            usd_max=_add(self.usd_max, other.usd_max),
        )

    def times(self, low: int, high: int | None) -> CostEstimate:
        """This estimate repeated between `low` and `high` times (`None`: unbounded)."""
        return CostEstimate(
            llm_calls_min=self.llm_calls_min * low,
            llm_calls_max=_mul(self.llm_calls_max, high),
            usd_min=self.usd_min * low,
            usd_max=_mul(self.usd_max, high),
        )

    def widen(self, other: CostEstimate) -> CostEstimate:
        """Either this or `other` happens (branches): min of mins, max of maxes."""
        return CostEstimate(
            llm_calls_min=min(self.llm_calls_min, other.llm_calls_min),
            llm_calls_max=_max(self.llm_calls_max, other.llm_calls_max),
            usd_min=min(self.usd_min, other.usd_min),
            usd_max=_max(self.usd_max, other.usd_max),
        )

    @property
    def is_free(self) -> bool:
        return self.llm_calls_max == 0

    @property
    def is_zero(self) -> bool:
        """Nothing at all (estimates are never changed in place, so sums may share it)."""
        return self.llm_calls_max == 0 and self.llm_calls_min == 0 and self.usd_max == 0 and self.usd_min == 0


def _add(a: N | None, b: N | None) -> N | None:
    return None if a is None or b is None else a + b


def _mul(a: N | None, n: int | None) -> N | None:
    if a == 0:
        return a
    return None if a is None or n is None else a * n


def _max(a: N | None, b: N | None) -> N | None:
    return None if a is None or b is None else max(a, b)


FREE = CostEstimate()  # what a node that calls no model costs


class ValidationReport(BaseModel):
    ok: bool
    errors: list[ValidationIssue] = Field(default_factory=list)
    warnings: list[ValidationIssue] = Field(default_factory=list)
    estimate: CostEstimate = Field(default_factory=CostEstimate)


def nearest(name: str, candidates: Iterable[str]) -> str | None:
    """The closest candidate to `name`, for "did you mean" suggestions."""
    matches = difflib.get_close_matches(name, list(candidates), n=1, cutoff=0.6)
    return matches[0] if matches else None
