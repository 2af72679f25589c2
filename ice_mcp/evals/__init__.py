"""Evaluations: a workflow run over a dataset of cases, each run scored, with pass rate, pass@k and pass^k.

Names load on first use: the evaluation tools' table imports only `limits` when a server starts."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ice_mcp.lazy import lazy_exports

if TYPE_CHECKING:
    from ice_mcp.evals.compare import compare_reports
    from ice_mcp.evals.dataset import Case, Dataset, load_dataset
    from ice_mcp.evals.desk import EvalHost, Evals, EvalTarget
    from ice_mcp.evals.scorers import (
        SCORERS,
        Score,
        Scorer,
        make_scorer,
        make_scorers,
        scorer_from_text,
    )
    from ice_mcp.evals.stats import pass_at_k, pass_hat_k, percentile

_EXPORTS = {
    "compare_reports": "ice_mcp.evals.compare",
    "Case": "ice_mcp.evals.dataset", "Dataset": "ice_mcp.evals.dataset", "load_dataset": "ice_mcp.evals.dataset",
    "EvalHost": "ice_mcp.evals.desk", "Evals": "ice_mcp.evals.desk", "EvalTarget": "ice_mcp.evals.desk",
    "SCORERS": "ice_mcp.evals.scorers", "Score": "ice_mcp.evals.scorers", "Scorer": "ice_mcp.evals.scorers",
    "make_scorer": "ice_mcp.evals.scorers", "make_scorers": "ice_mcp.evals.scorers",
    "scorer_from_text": "ice_mcp.evals.scorers",
    "pass_at_k": "ice_mcp.evals.stats", "pass_hat_k": "ice_mcp.evals.stats", "percentile": "ice_mcp.evals.stats",
}

__all__ = ["SCORERS", "Case", "Dataset", "EvalHost", "EvalTarget", "Evals", "Score", "Scorer", "compare_reports",
           "load_dataset", "make_scorer", "make_scorers", "pass_at_k", "pass_hat_k", "percentile",
           "scorer_from_text"]

__getattr__ = lazy_exports(__name__, _EXPORTS, globals())
