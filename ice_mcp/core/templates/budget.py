"""The per-render budget: what one render may still build and write, and its deadline."""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from jinja2.exceptions import SecurityError

from ice_mcp.core.templates.limits import (
    MAX_INT_BITS,
    MAX_OUTPUT_CHARS,
    MAX_RENDER_SECONDS,
    MAX_SEQUENCE_ITEMS,
    MAX_WORK_CHARS,
)


@dataclass(slots=True)
class RenderBudget:
    """What one render may still do: characters to build, output to write, time to take."""

    deadline: float
    work_left: int = MAX_WORK_CHARS
    output_left: int = MAX_OUTPUT_CHARS

    def spend(self, units: int) -> None:
        self.work_left -= units
        if self.work_left < 0:
            raise SecurityError(f"template builds more than {MAX_WORK_CHARS} characters in all")
        if time.monotonic() > self.deadline:
            raise SecurityError(f"template took longer than {int(MAX_RENDER_SECONDS * 1000)} ms")


_BUDGET: ContextVar[RenderBudget | None] = ContextVar("ice_mcp_render_budget", default=None)


def _spend(units: int) -> None:
    budget = _BUDGET.get()
    if budget is not None:
        budget.spend(units)


@contextmanager
def _budgeted() -> Iterator[None]:
    token = _BUDGET.set(RenderBudget(time.monotonic() + MAX_RENDER_SECONDS))
    try:
        yield
    finally:
        _BUDGET.reset(token)


def _metered(values: Iterable[Any]) -> Iterator[Any]:
    """`values`, one at a time, charging each to the budget (filters loop in Python over these)."""
    for count, item in enumerate(values):
        if count >= MAX_SEQUENCE_ITEMS:
            raise SecurityError(f"more than {MAX_SEQUENCE_ITEMS} items")
        if not count & 127:
            _spend(128)
        yield item


def _checked(value: Any) -> Any:
    """A freshly built value, refused when over the caps and charged to the budget."""
    if isinstance(value, str):
        if len(value) > MAX_OUTPUT_CHARS:
            raise SecurityError(f"result longer than {MAX_OUTPUT_CHARS} characters")
        _spend(len(value))
    elif isinstance(value, list | tuple | dict):
        if len(value) > MAX_SEQUENCE_ITEMS:
            raise SecurityError(f"result longer than {MAX_SEQUENCE_ITEMS} items")
        _spend(len(value))
    elif isinstance(value, int) and value.bit_length() > MAX_INT_BITS:
        raise SecurityError(f"integer larger than {MAX_INT_BITS} bits")
    elif isinstance(value, Iterator):
        return _metered(value)
    else:
        _spend(1)
    return value
