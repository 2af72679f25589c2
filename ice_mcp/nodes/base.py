"""The one narrow interface between the engine and the code that runs a node.

An executor is `async (NodeCall) -> NodeResult`. It knows nothing of scheduling:
the engine hands it the node's spec, its rendered templates and the run's
services, and reads back an output object, a cost and a token count.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from ice_mcp.errors import IceError

if TYPE_CHECKING:
    from ice_mcp.blueprint.issues import CostEstimate, ValidationIssue
    from ice_mcp.blueprint.models import NodeSpec
    from ice_mcp.engine.context import RunContext, SubgraphResult
    from ice_mcp.engine.plan import PlanNode
    from ice_mcp.engine.templates import Scope
    from ice_mcp.services import Services


@dataclass(slots=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0

    @property
    def total(self) -> int:
        return self.input_tokens + self.output_tokens

    def add(self, other: Usage) -> None:
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens

    def as_dict(self) -> dict[str, int]:
        return {"input_tokens": self.input_tokens, "output_tokens": self.output_tokens}


@dataclass(slots=True)
class NodeResult:
    """What a node produced: its output object and what it cost."""

    output: dict[str, Any]
    cost_usd: float = 0.0
    usage: Usage = field(default_factory=Usage)


class NodeFailure(IceError):
    """A failure the user (or a model) should read: a clear code and message.

    `retryable=False` tells the engine that another attempt cannot help
    (bad arguments, a sandbox violation, an unknown name).
    """

    code = "node_error"

    def __init__(
        self,
        message: str,
        *,
        code: str = "node_error",
        retryable: bool = True,
        details: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(message, code=code, details=details)
        self.retryable = retryable


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

    def render(self, field_name: str) -> Any:
        """The node's templated field, rendered against the node's scope."""
        return self.node.templates[field_name].render(self.scope)

    def evaluate(self, field_name: str, **extra: Any) -> Any:
        """The node's expression field, evaluated with optional extra names bound."""
        return self.node.templates[field_name].render(self.scope.child(extra) if extra else self.scope)

    async def run_subgraph(self, name: str, variables: Mapping[str, Any], *, label: str) -> SubgraphResult:
        """Run one of the node's compiled sub-graphs with extra names in scope."""
        return await self.ctx.run_subgraph(self.node.subgraphs[name], self.scope.child(variables), label)


NodeExecutor = Callable[[NodeCall], Awaitable[NodeResult]]


class CheckContext(Protocol):
    """What a type-specific validation check may look at."""

    @property
    def services(self) -> Services: ...


NodeCheck = Callable[["NodeSpec", "CheckContext"], "list[ValidationIssue]"]
NodeEstimate = Callable[["NodeSpec", "Services"], "CostEstimate"]


@dataclass(frozen=True, slots=True)
class NodeType:
    """A node type the engine can run: its executor plus optional validation and estimate."""

    name: str
    execute: NodeExecutor
    check: NodeCheck | None = None
    estimate: NodeEstimate | None = None
