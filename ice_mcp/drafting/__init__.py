"""Drafting: a blueprint from a goal in words, written by a model and repaired from the validator's issues until it
validates; and the drafting benchmark that measures a model at it (`benchmark.py`). No transport here."""

from ice_mcp.drafting.draft_format import Assumptions, Draft, read_draft
from ice_mcp.drafting.loop import Constraints, DraftAttempt, DraftResult, draft_blueprint

__all__ = ["Assumptions", "Constraints", "Draft", "DraftAttempt", "DraftResult", "draft_blueprint", "read_draft"]
