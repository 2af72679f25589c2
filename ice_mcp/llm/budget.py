"""Spend caps above the run: per network and per caller.

The engine caps a run from each node's reported cost. Budgets here cap what several runs
spend together: the runner of a network, or the server for a caller, opens
`budget_scope(book.get("network:nightly", 5.0))` around the runs; every model call made
inside is refused before it starts when its upper-bound cost does not fit, and charged with
its actual cost after.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from ice_mcp.llm.errors import BudgetExceeded


@dataclass(slots=True)
class Budget:
    scope: str
    limit_usd: float
    spent_usd: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def remaining_usd(self) -> float:
        return max(self.limit_usd - self.spent_usd, 0.0)

    def check(self, upper_usd: float) -> None:
        """Refuse a call whose upper-bound cost would take spend past the limit."""
        if self.spent_usd >= self.limit_usd:
            raise BudgetExceeded(
                f"budget {self.scope!r} is spent: ${self.spent_usd:.6f} of ${self.limit_usd:.6f}",
                scope=self.scope, limit_usd=self.limit_usd, spent_usd=self.spent_usd,
            )
        if self.spent_usd + upper_usd > self.limit_usd:
            raise BudgetExceeded(
                f"a model call that may cost ${upper_usd:.6f} does not fit budget {self.scope!r} "
                f"(${self.remaining_usd:.6f} of ${self.limit_usd:.6f} left)",
                scope=self.scope, limit_usd=self.limit_usd, spent_usd=self.spent_usd,
            )

    def charge(self, usd: float) -> None:
        with self._lock:
            self.spent_usd += usd


class BudgetBook:
    """Budgets by scope name (`network:<name>`, `caller:<id>`), created on first use."""

    def __init__(self) -> None:
        self._budgets: dict[str, Budget] = {}
        self._lock = threading.Lock()

    def get(self, scope: str, limit_usd: float) -> Budget:
        with self._lock:
            budget = self._budgets.get(scope)
            if budget is None:
                budget = self._budgets[scope] = Budget(scope, limit_usd)
            else:
                budget.limit_usd = limit_usd
            return budget

    def spent(self, scope: str) -> float:
        budget = self._budgets.get(scope)
        return budget.spent_usd if budget else 0.0


_ACTIVE: contextvars.ContextVar[tuple[Budget, ...]] = contextvars.ContextVar("ice_mcp_budgets", default=())


@contextmanager
def budget_scope(*budgets: Budget) -> Iterator[None]:
    """Model calls made inside (including in tasks started inside) are held to these budgets too."""
    token = _ACTIVE.set(_ACTIVE.get() + budgets)
    try:
        yield
    finally:
        _ACTIVE.reset(token)


def active_budgets() -> tuple[Budget, ...]:
    return _ACTIVE.get()
