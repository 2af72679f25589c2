"""pass@k and pass^k against values worked out by hand, and the percentiles."""

from __future__ import annotations

import pytest

from ice_mcp.evals.stats import mean_over_cases, pass_at_k, pass_hat_k, percentile, spread


@pytest.mark.parametrize(("n", "c", "k", "expected"), [
    (5, 0, 1, 0.0),
    (5, 5, 3, 1.0),
    (5, 2, 1, 2 / 5),  # one draw: the plain pass rate
    (5, 2, 2, 1 - 3 / 10),  # 1 - C(3,2)/C(5,2) = 1 - 3/10
    (5, 2, 3, 1 - 1 / 10),  # 1 - C(3,3)/C(5,3)
    (5, 2, 4, 1.0),  # n - c = 3 < k: every draw of 4 holds a pass
    (10, 3, 5, 1 - 21 / 252),  # C(7,5) = 21, C(10,5) = 252
])
def test_pass_at_k_is_the_unbiased_estimator(n: int, c: int, k: int, expected: float) -> None:
    assert pass_at_k(n, c, k) == pytest.approx(expected)


@pytest.mark.parametrize(("n", "c", "k", "expected"), [
    (5, 2, 1, 2 / 5),
    (5, 2, 2, 1 / 10),  # C(2,2)/C(5,2)
    (5, 2, 3, 0.0),  # C(2,3) = 0: three passes cannot be drawn from two
    (5, 5, 5, 1.0),
    (10, 7, 3, 35 / 120),  # C(7,3) = 35, C(10,3) = 120
])
def test_pass_hat_k_is_all_k_passing(n: int, c: int, k: int, expected: float) -> None:
    assert pass_hat_k(n, c, k) == pytest.approx(expected)


def test_k_beyond_n_or_c_beyond_n_is_refused() -> None:
    with pytest.raises(ValueError):
        pass_at_k(3, 1, 4)
    with pytest.raises(ValueError):
        pass_hat_k(3, 4, 1)


def test_means_over_cases() -> None:
    counts = [(3, 3), (3, 1), (3, 0)]  # a passing, a flaky and a failing case, three attempts each
    assert mean_over_cases(counts, 1, "at") == pytest.approx((1 + 1 / 3 + 0) / 3)
    assert mean_over_cases(counts, 2, "at") == pytest.approx((1 + (1 - 1 / 3) + 0) / 3)  # C(2,2)/C(3,2) = 1/3
    assert mean_over_cases(counts, 3, "hat") == pytest.approx(1 / 3)
    assert mean_over_cases(counts, 4, "at") is None and mean_over_cases([], 1, "at") is None


def test_percentiles_interpolate_between_ranks() -> None:
    assert percentile([], 50) is None
    assert percentile([7.0], 95) == 7.0
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == pytest.approx(2.5)
    values = [float(v) for v in range(1, 101)]  # 1..100
    assert percentile(values, 95) == pytest.approx(95.05)  # rank 94.05 between 95 and 96
    assert spread([3.0, 1.0, 2.0]) == {"p50": 2.0, "p95": 2.9, "max": 3.0, "total": 6.0}
