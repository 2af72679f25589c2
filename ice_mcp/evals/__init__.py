"""Evaluations: a workflow run over a dataset of cases, each run scored, with pass rate, pass@k and pass^k."""

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

__all__ = ["SCORERS", "Case", "Dataset", "EvalHost", "EvalTarget", "Evals", "Score", "Scorer", "compare_reports",
           "load_dataset", "make_scorer", "make_scorers", "pass_at_k", "pass_hat_k", "percentile",
           "scorer_from_text"]
