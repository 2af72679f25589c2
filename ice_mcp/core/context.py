"""What one run carries down to every node it runs, at any depth."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from ice_mcp.blueprint.issues import CostEstimate
from ice_mcp.errors import IceError, NodeFailure, RunStopped
from ice_mcp.store.events import EventLog
from ice_mcp.types import Usage

CALL_TRIGGER: dict[str, Any] = {"kind": "call"}  # what a run started by a call sees as `trigger`

if TYPE_CHECKING:
    from ice_mcp.core.plan import Graph, Plan
    from ice_mcp.core.questions import Questions
    from ice_mcp.core.templates import Scope
    from ice_mcp.services import Services
    from ice_mcp.store.journal import Replay
    from ice_mcp.store.records import NodeRecord

Sleep = Callable[[float], Awaitable[Any]]
# A registered workflow's compiled plan by name (raises UnknownName): the orchestrator's catalogue,
# handed to each run so the engine never looks workflows up itself.
WorkflowPlans = Callable[[str], "Plan"]


@dataclass(slots=True)
class Spend:
    """The run's spend against its budget, shared by every nested graph."""

    budget_usd: float | None = None
    cost_usd: float = 0.0
    usage: Usage = field(default_factory=Usage)
    parent: Spend | None = None
    # A spend kept beyond this process (a caller's, in a shared store): adds a charge there, returns the total.
    kept: Callable[[float], float] | None = None

    def charge(self, cost_usd: float, usage: Usage) -> None:
        spend: Spend | None = self
        while spend is not None:
            spend.cost_usd += cost_usd
            spend.usage.add(usage)
            if spend.kept is not None and cost_usd:
                spend.cost_usd = spend.kept(cost_usd)
            spend = spend.parent
        spend = self
        while spend is not None:
            if spend.budget_usd is not None and cost_usd > 0 and spend.cost_usd >= spend.budget_usd:
                raise RunStopped("over_budget", f"spend ${spend.cost_usd:.4f} reached the budget of ${spend.budget_usd}",
                                 spend)
            spend = spend.parent

    def remaining(self) -> float | None:
        """The least headroom left under this spend's budget or any enclosing one."""
        left: float | None = None
        spend: Spend | None = self
        while spend is not None:
            if spend.budget_usd is not None:
                here = spend.budget_usd - spend.cost_usd
                left = here if left is None else min(left, here)
            spend = spend.parent
        return left


def check_fits(estimate: CostEstimate, spend: Spend | None, what: str) -> None:
    """Refuse before running when the estimate's upper bound does not fit an enclosing budget."""
    left = spend.remaining() if spend is not None else None
    if left is None or estimate.is_free:
        return
    if estimate.usd_max is None or estimate.usd_max > left * (1 + 1e-9):
        upper = "unbounded" if estimate.usd_max is None else f"${estimate.usd_max:.4f}"
        raise IceError(f"{what}: cost up to {upper} does not fit the ${left:.4f} left in the budget",
                       code="over_budget", details={"estimate_usd_max": estimate.usd_max, "remaining_usd": left})


@dataclass(slots=True)
class SubgraphResult:
    output: Any
    outputs: dict[str, Any]
    records: dict[str, NodeRecord]
    cost_usd: float
    usage: Usage


class GraphRunner:
    """What RunContext needs from the runner (the runner module builds on this one)."""

    now: Callable[[], float]  # the run's wall clock (Temporal's, inside a workflow)

    async def run_graph(self, graph: Graph, scope: Scope, ctx: RunContext) -> SubgraphResult:
        raise NotImplementedError

    async def run_workflow(self, plan: Plan, inputs: dict[str, Any], ctx: RunContext) -> SubgraphResult:
        raise NotImplementedError


@dataclass(slots=True)
class RunContext:
    run_id: str
    services: Services
    events: EventLog
    spend: Spend
    runner: GraphRunner
    workflows: WorkflowPlans
    sleep: Sleep = asyncio.sleep
    depth: int = 0
    path: str = ""
    globals: dict[str, Any] = field(default_factory=dict)
    replay: Replay | None = None  # what an earlier execution of this run finished (resume, retry)
    questions: Questions | None = None  # where `human` nodes wait for answers (the orchestrator's desk)
    trigger: dict[str, Any] = field(default_factory=lambda: dict(CALL_TRIGGER))  # templates' `trigger`
    trace_parent: str | None = None  # W3C context new node spans hang under (None: this run is not traced)

    def emit(self, kind: str, node_id: str | None = None, attempt: int | None = None, /, **data: Any) -> None:
        if node_id is not None and self.path:
            node_id = self.path + node_id
        self.events.emit_data(kind, node_id, attempt, data)  # `data` is this call's own dict

    def nested(self, label: str) -> RunContext:
        """The context for a sub-graph: event node ids are prefixed with `label`."""
        return replace(self, path=f"{self.path}{label}.")

    async def run_subgraph(self, graph: Graph, scope: Scope, label: str) -> SubgraphResult:
        return await self.runner.run_graph(graph, scope, self.nested(label))

    async def run_workflow(self, name: str, inputs: dict[str, Any], *, label: str | None = None) -> SubgraphResult:
        """Run a registered workflow inside this run (depth-limited); its nodes charge this run."""
        limit = self.services.settings.max_workflow_depth
        if self.depth + 1 > limit:
            raise NodeFailure(f"workflow nesting deeper than {limit} levels (calling {name!r})", code="max_depth",
                              retryable=False)
        plan = self.workflows(name)
        child = replace(self.nested(label or name), depth=self.depth + 1)
        return await self.runner.run_workflow(plan, inputs, child)
