"""A run's journal read back: what each node reached, so a resumed or retried run skips finished work.

The journal is the run's event stream as the store kept it. Node paths are event node ids
(`loop[3].body`), so loops, branches, iterations and nested workflows resume at their own level.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ice_mcp.store.node_states import FINISHED, fold
from ice_mcp.types import Usage


@dataclass(frozen=True, slots=True)
class NodeOutcome:
    """How a node ended in the journal."""

    status: str
    output: Any = None
    error: dict[str, Any] | None = None
    attempts: int = 1
    cost_usd: float = 0.0
    usage: Usage = field(default_factory=Usage)
    duration_ms: float = 0.0


@dataclass(frozen=True, slots=True)
class Replay:
    """Finished outcomes by node path, and the attempt each unfinished node had reached."""

    outcomes: Mapping[str, NodeOutcome] = field(default_factory=dict)
    attempts: Mapping[str, int] = field(default_factory=dict)
    reused_from: str | None = None  # a retry: the outcomes are another run's, so this run journals them too

    def __bool__(self) -> bool:
        return bool(self.outcomes or self.attempts)

    def for_retry(self, run_id: str, rerun: Iterable[str] = ()) -> Replay:
        """Only successes of run `run_id`, minus the nodes in `rerun` and everything nested inside them."""
        prefixes = tuple(rerun)

        def keep(path: str) -> bool:
            return not any(path == p or path.startswith((p + ".", p + "[")) for p in prefixes)

        kept = {path: o for path, o in self.outcomes.items() if o.status == "succeeded" and keep(path)}
        return Replay(kept, {}, reused_from=run_id)


def replay_from_events(events: Iterable[Mapping[str, Any]]) -> Replay:
    """Fold a journal (event dicts in order) into a Replay: the nodes whose latest execution finished, and the
    attempt every other started one had reached (a cancelled node runs again, at that attempt)."""
    outcomes: dict[str, NodeOutcome] = {}
    attempts: dict[str, int] = {}
    for path, state in fold(events).items():
        if state.status in FINISHED:
            outcomes[path] = NodeOutcome(state.status, state.output, state.error, max(state.attempts, 1),
                                         state.cost_usd, state.usage, state.duration_ms)
        elif state.status != "pending":
            attempts[path] = state.attempts
    return Replay(outcomes, attempts)
