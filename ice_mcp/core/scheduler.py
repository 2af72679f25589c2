"""What runs next, decided from node states alone.

Pure and deterministic: no I/O, no clock, no randomness, no asyncio. The same
scheduler can be driven in-process by the runner or by a durable engine
(a Temporal workflow replaying its history), since the same sequence of
completions always yields the same decisions.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Literal

OnError = Literal["fail", "continue", "skip_dependents"]


class NodeState(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    SKIPPED = "skipped"
    CANCELLED = "cancelled"


TERMINAL = frozenset({NodeState.SUCCEEDED, NodeState.FAILED, NodeState.SKIPPED, NodeState.CANCELLED})
# The states as plain names: reading an Enum member through its class costs ~70 ns, a few times per node.
_PENDING, _RUNNING, _SUCCEEDED, _SKIPPED = NodeState.PENDING, NodeState.RUNNING, NodeState.SUCCEEDED, NodeState.SKIPPED


@dataclass(frozen=True, slots=True)
class GraphShape:
    """The graph as the scheduler sees it: ids in declared order, edges, gates, failure policy.

    `gates[n]` lists (condition id, branch): n runs only if each condition took that branch (no entry: no gate).
    `on_error[n]`: `fail` stops the graph, `continue` lets dependents run, and
    `skip_dependents` skips what depends on n while the rest goes on.
    """

    order: tuple[str, ...]
    deps: Mapping[str, tuple[str, ...]]
    gates: Mapping[str, tuple[tuple[str, bool], ...]]
    on_error: Mapping[str, OnError]
    # Derived once per graph, not per run: what depends on each node, and how many each waits for.
    dependents: Mapping[str, tuple[str, ...]] = field(init=False, repr=False, compare=False)
    waiting: Mapping[str, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        dependents: dict[str, list[str]] = {}
        waiting: dict[str, int] = {}
        deps = self.deps
        for node in self.order:
            node_deps = deps[node]
            waiting[node] = len(node_deps)
            for dep in node_deps:
                found = dependents.get(dep)
                if found is None:  # not setdefault: that makes a list per edge
                    dependents[dep] = [node]
                else:
                    found.append(node)
        object.__setattr__(self, "dependents", {node: tuple(found) for node, found in dependents.items()})
        object.__setattr__(self, "waiting", waiting)


class Scheduler:
    def __init__(self, shape: GraphShape, max_parallel: int) -> None:
        self.shape = shape
        self.max_parallel = max_parallel
        self.states: dict[str, NodeState] = dict.fromkeys(shape.order, _PENDING)
        self.branch_taken: dict[str, bool] = {}
        self.failed_node: str | None = None
        self.stopped = False
        self._running = 0
        self._waiting_on = dict(shape.waiting)
        self._blocked: set[str] = set()
        self._dependents = shape.dependents
        self._ready: deque[str] = deque()
        self._initially_skipped: list[str] = []
        for node in shape.order:
            if not shape.deps[node] and self._skips(node):
                self._initially_skipped += [node, *self._release(node)]

    @property
    def running(self) -> int:
        return self._running

    @property
    def finished(self) -> bool:
        return self._running == 0 and (self.stopped or not self._ready)

    def initial_skips(self) -> list[str]:
        """Nodes skipped before anything ran (a gate on a node with no dependency cannot open)."""
        skipped, self._initially_skipped = self._initially_skipped, []
        return skipped

    def take_ready(self) -> list[str]:
        """The nodes to start now, within `max_parallel`; they are marked running."""
        if self.stopped:
            return []
        started: list[str] = []
        while self._ready and self._running < self.max_parallel:
            node = self._ready.popleft()
            self.states[node] = _RUNNING
            self._running += 1
            started.append(node)
        return started

    def succeeded(self, node: str, branch: bool | None = None) -> list[str]:
        """Record a success (`branch`: a condition's result); returns the nodes now skipped."""
        self._finish(node, _SUCCEEDED)
        if branch is not None:
            self.branch_taken[node] = branch
        return self._release(node)

    def failed(self, node: str) -> list[str]:
        """Record a failure, applying the node's `on_error`; returns the nodes now skipped."""
        self._finish(node, NodeState.FAILED)
        policy = self.shape.on_error[node]
        if policy == "fail":
            self.failed_node = self.failed_node or node
            self.stopped = True
            return []
        if policy == "skip_dependents":
            self._blocked.update(self._dependents.get(node, ()))
        return self._release(node)

    def stop(self) -> list[str]:
        """Stop the graph (failure, cancellation, budget): pending nodes become cancelled."""
        self.stopped = True
        cancelled = [n for n, s in self.states.items() if s is _PENDING]
        for node in cancelled:
            self.states[node] = NodeState.CANCELLED
        self._ready.clear()
        return cancelled

    def cancelled(self, node: str) -> None:
        """A running node was cancelled (after `stop`)."""
        self._finish(node, NodeState.CANCELLED)

    def _finish(self, node: str, state: NodeState) -> None:
        if self.states[node] is not _RUNNING:
            raise ValueError(f"node {node!r} is {self.states[node]}, not running")
        self.states[node] = state
        self._running -= 1

    def _release(self, node: str) -> list[str]:
        """`node` is final: resolve each dependent whose dependencies are now all final."""
        skipped: list[str] = []
        finals = [node]
        while finals:
            final = finals.pop()
            for dependent in self._dependents.get(final, ()):
                self._waiting_on[dependent] -= 1
                if self._waiting_on[dependent] == 0 and self._skips(dependent):
                    skipped.append(dependent)
                    finals.append(dependent)
        return skipped

    def _skips(self, node: str) -> bool:
        """Decide a node whose dependencies are final: skipped (True) or ready (False)."""
        deps: Sequence[str] = self.shape.deps[node]
        gates = self.shape.gates.get(node)
        gate_closed = gates is not None and any(self.branch_taken.get(cond) is not branch for cond, branch in gates)
        # Skipped when every dependency was: the first one not skipped decides it (no generator per node).
        all_deps_skipped = bool(deps)
        for dep in deps:
            if self.states[dep] is not _SKIPPED:
                all_deps_skipped = False
                break
        if gate_closed or node in self._blocked or all_deps_skipped:
            self.states[node] = _SKIPPED
            if node in self._blocked:
                self._blocked.update(self._dependents.get(node, ()))
            return True
        self._ready.append(node)
        return False
