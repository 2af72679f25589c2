"""The figures of an evaluation: pass@k and pass^k from n attempts with c passes, and percentiles.

pass@k is the unbiased estimator of "at least one of k attempts passes" (Chen et al. 2021, HumanEval):
1 - C(n-c, k) / C(n, k). pass^k is "all k attempts pass" (tau-bench): C(c, k) / C(n, k). Both are averaged
over the cases, and defined for 1 <= k <= n.
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def pass_at_k(n: int, c: int, k: int) -> float:
    """The chance that at least one of k attempts drawn from n (c of which passed) passes."""
    _check(n, c, k)
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def pass_hat_k(n: int, c: int, k: int) -> float:
    """The chance that all k attempts drawn from n (c of which passed) pass."""
    _check(n, c, k)
    return math.comb(c, k) / math.comb(n, k)


def _check(n: int, c: int, k: int) -> None:
    if not (0 <= c <= n and 1 <= k <= n):
        raise ValueError(f"need 0 <= c <= n and 1 <= k <= n (n={n}, c={c}, k={k})")


def mean_over_cases(counts: Sequence[tuple[int, int]], k: int, of: str) -> float | None:
    """pass@k (`of` "at") or pass^k (`of` "hat") averaged over cases given as (n, c); None when a case has
    fewer than k attempts."""
    if not counts or any(n < k for n, _ in counts):
        return None
    estimate = pass_at_k if of == "at" else pass_hat_k
    return sum(estimate(n, c, k) for n, c in counts) / len(counts)


def percentile(values: Sequence[float], q: float) -> float | None:
    """The q-th percentile (0..100) by linear interpolation between closest ranks (numpy's default); None when
    there are no values."""
    if not values:
        return None
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100.0
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def spread(values: Sequence[float], digits: int = 6) -> dict[str, float | None]:
    """p50, p95, max and the sum of some measurements (rounded)."""

    def r(value: float | None) -> float | None:
        return None if value is None else round(value, digits)

    return {"p50": r(percentile(values, 50)), "p95": r(percentile(values, 95)),
            "max": r(max(values)) if values else None, "total": r(sum(values))}
