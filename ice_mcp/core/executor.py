"""The one narrow interface between the engine and the code that runs a node.

An executor is `async (NodeCall) -> NodeResult`. It knows nothing of scheduling:
the engine hands it the node's spec, its rendered templates, the run's services
and spend, and reads back an output object, a cost and a token count. Executors
are registered on the orchestrator as `NodeType`s; the engine never looks them up.
A `NodeType` is the whole of a node type: its model (and through it its sub-graphs
and drawing), executor, checks, estimate, effects and where it runs on Temporal.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol

from ice_mcp.blueprint.models import NODE_MODELS, Drawing, NodeBase
from ice_mcp.blueprint.node_sets import NodeSet, node_set
from ice_mcp.store.vocabulary import EventType
from ice_mcp.types import Effects, NodeResult

if TYPE_CHECKING:
    from ice_mcp.blueprint.issues import CostEstimate, ValidationIssue
    from ice_mcp.blueprint.models import NodeSpec
    from ice_mcp.core.context import RunContext, Spend, SubgraphResult
    from ice_mcp.core.effects import EffectsContext
    from ice_mcp.core.plan import PlanNode
    from ice_mcp.core.questions import Questions
    from ice_mcp.core.templates import Compiled, Scope
    from ice_mcp.services import Services


@dataclass(slots=True)
class NodeCall:
    """One attempt of one node, as an executor sees it."""

    node: PlanNode
    scope: Scope
    ctx: RunContext
    attempt: int

    @property
    def spec(self) -> NodeSpec:
        return self.node.spec

    @property
    def services(self) -> Services:
        return self.ctx.services

    @property
    def spend(self) -> Spend:
        """The run's spend against its budget (and every enclosing one): model calls check it first."""
        return self.ctx.spend

    @property
    def questions(self) -> Questions:
        """Where a `human` node asks and waits for its answer."""
        if self.ctx.questions is None:
            raise RuntimeError("this run has no question desk (it was not started by an orchestrator)")
        return self.ctx.questions

    @property
    def run_id(self) -> str:
        return self.ctx.run_id

    @property
    def node_path(self) -> str:
        """The node's id with the path of the sub-graphs it runs in (`loop[2].fetch`)."""
        return self.ctx.path + self.node.id

    def render(self, field_name: str) -> Any:
        """The node's templated field, rendered against the node's scope."""
        return self.node.templates[field_name].render(self.scope)

    def evaluate(self, field_name: str, **extra: Any) -> Any:
        """The node's expression field, evaluated with optional extra names bound."""
        return self.node.templates[field_name].render(self.scope.child(extra) if extra else self.scope)

    def emit(self, event: str, **data: Any) -> None:
        """A node-specific event (`node_event`, with `event` naming it) in the run's event stream."""
        self.ctx.emit(EventType.NODE_EVENT, self.node.id, self.attempt, event=event, **data)

    async def run_subgraph(self, name: str, variables: Mapping[str, Any], *, label: str) -> SubgraphResult:
        """Run one of the node's compiled sub-graphs with extra names in scope."""
        return await self.ctx.run_subgraph(self.node.subgraphs[name], self.scope.child(variables), label)

    async def run_workflow(self, name: str, inputs: dict[str, Any], *, label: str | None = None) -> SubgraphResult:
        """Run a registered workflow inside this run (depth-limited); its nodes charge this run."""
        return await self.ctx.run_workflow(name, inputs, label=label)


NodeExecutor = Callable[[NodeCall], Awaitable[NodeResult]]


class CheckContext(Protocol):
    """What a type-specific validation check or estimate may look at."""

    @property
    def services(self) -> Services: ...

    @property
    def templates(self) -> Mapping[str, Compiled]:
        """The node's fields as compiled (a constant field is a `Constant`)."""
        ...

    @property
    def declared_inputs(self) -> Mapping[str, Any] | None:
        """The blueprint's declared inputs (name → schema), or None when it does not list them."""
        ...

    def suggest(self, name: str, candidates: Any) -> str | None: ...


NodeCheck = Callable[["NodeSpec", "CheckContext"], "list[ValidationIssue]"]
# (spec, context, the estimate of the node's sub-graphs) -> the node's estimate
NodeEstimate = Callable[["NodeSpec", "CheckContext", "CostEstimate"], "CostEstimate"]
# (spec, context) -> what this node may do, when it depends on the node (the tool it calls, the workflow it runs)
NodeEffects = Callable[["NodeSpec", "EffectsContext"], Effects]


# Where a node runs on Temporal: an activity (any I/O; a lost worker's attempt runs again), or the workflow's own
# code (deterministic only: containers, conditions, waits for a signal).
Placement = Literal["activity", "workflow"]


@dataclass(frozen=True, slots=True)
class NodeType:
    """A node type the engine can run: its model, its executor plus optional validation, estimate and effects,
    and where it runs on Temporal. Its model's `type` Literal is its name; its sub-graphs and its drawing are
    its model's (`subgraph_fields`, `drawing`)."""

    name: str
    execute: NodeExecutor
    check: NodeCheck | None = None
    estimate: NodeEstimate | None = None
    # What a node of this type may do (the read-only gate and MCP's hints read it); None: anything.
    effects: Effects | NodeEffects | None = None
    # The executor enforces `timeout_seconds` itself (a `human` node's deadline outlives restarts), so the
    # runner sets no per-attempt timeout around it.
    own_timeout: bool = False
    # The pydantic model of its spec (a NodeBase with `type: Literal[name]`); None: the built-in model of the name.
    model: type[NodeBase] | None = None
    # None: the workflow for a container (its sub-graphs are run there), else an activity.
    placement: Placement | None = None

    def __post_init__(self) -> None:
        model = self.model if self.model is not None else NODE_MODELS.get(self.name)
        tag = model.model_fields.get("type") if model is not None else None
        if model is not None and (tag is None or tag.default != self.name):
            raise ValueError(f"node type {self.name!r}: its model {model.__name__}'s `type` must be "
                             f"Literal[{self.name!r}] = {self.name!r}")
        container = model is not None and bool(model.subgraph_fields)
        if container and self.placement == "activity":
            raise ValueError(f"node type {self.name!r} has sub-graphs: they run in the workflow (placement='workflow')")
        object.__setattr__(self, "model", model)  # frozen: both set once, here
        object.__setattr__(self, "placement", self.placement or ("workflow" if container else "activity"))

    @property
    def subgraph_fields(self) -> tuple[str, ...]:
        return self.model.subgraph_fields if self.model is not None else ()

    @property
    def drawing(self) -> Drawing:
        return self.model.drawing if self.model is not None else Drawing()


def node_models(node_types: Iterable[NodeType]) -> NodeSet:
    """The node models blueprints are parsed with, given these node types: the built-in ones and theirs."""
    return node_set({t.name: t.model for t in node_types if t.model is not None})
