"""The evaluation tools' bounds and scorer kinds, apart from the desk and scorers so that the tool table (and a
server's tool list) names them without loading either."""

from __future__ import annotations

SCORER_KINDS = ("exact", "contains", "regex", "number", "json_schema", "llm_judge")  # scorers.SCORERS, in order
MAX_REPETITIONS = 100
DEFAULT_CONCURRENCY = 4
DEFAULT_TIMEOUT_SECONDS = 600.0
