"""A run's journal read back: what each node reached, so a resumed or retried run skips finished work.

The journal is the run's event stream as the store kept it. Node paths are event node ids
(`loop[3].body`), so loops, branches, iterations and nested workflows resume at their own level.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ice_mcp.types import Usage

# Outcomes a replay reuses; `cancelled` is not one: such a node runs again.
FINISHED = {"node_succeeded": "succeeded", "node_failed": "failed", "node_skipped": "skipped"}


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
    """Fold a journal (event dicts in order) into a Replay."""
    outcomes: dict[str, NodeOutcome] = {}
    attempts: dict[str, int] = {}
    for event in events:
        kind, path = event.get("type"), event.get("node_id")
        if not isinstance(path, str):
            continue
        data = event.get("data") or {}
        attempt = int(event.get("attempt") or 1)
        if kind == "node_started":
            outcomes.pop(path, None)  # a node run again (after a cancel) starts over
            attempts[path] = attempt
        elif kind == "node_retrying":
            attempts[path] = attempt + 1
        elif kind == "node_cancelled":
            outcomes.pop(path, None)
        elif kind in FINISHED:
            attempts.pop(path, None)
            tokens = data.get("usage") or {}
            outcomes[path] = NodeOutcome(
                status=FINISHED[kind],
                output=data.get("output"),
                error=data.get("error"),
                attempts=attempt,
                cost_usd=float(data.get("cost_usd") or 0.0),
                usage=Usage(int(tokens.get("input_tokens", 0)), int(tokens.get("output_tokens", 0))),
                duration_ms=float(data.get("duration_ms") or 0.0),
            )
    return Replay(outcomes, attempts)
