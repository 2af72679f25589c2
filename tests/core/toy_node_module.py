"""Two node types from outside ice_mcp, each one definition: `shout` (a leaf) and `twice` (a container).

The tests copy this file into a package of their own under tmp_path and import it from there.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from ice_mcp.blueprint.models import Drawing, NodeBase, NodeSpec
from ice_mcp.core.executor import NodeCall, NodeType
from ice_mcp.types import PURE, NodeResult, Usage


class ShoutNode(NodeBase):
    """`text` (a template) in capitals, with `times` exclamation marks."""

    template_fields = ("text",)
    drawing = Drawing("stadium", label=("voice",))  # drawn as a pill: `s<br/>shout: loud`
    type: Literal["shout"] = "shout"
    text: str
    voice: str = "loud"
    times: Annotated[int, Field(ge=1, le=10)] = 1


async def execute_shout(call: NodeCall) -> NodeResult:
    spec = call.spec
    assert isinstance(spec, ShoutNode)
    return NodeResult({"text": str(call.render("text")).upper() + "!" * spec.times})


# Declares no effects: a read-only server takes it to do anything. Placed in an activity on Temporal (the default).
SHOUT_NODE = NodeType(name="shout", execute=execute_shout, model=ShoutNode)


class TwiceNode(NodeBase):
    """Its `body` run twice, `round` 1 then 2; the output lists both results."""

    subgraph_fields = ("body",)
    drawing = Drawing("subroutine", inside="index", first=1)  # its nodes' events: `t[1].x`, `t[2].x`
    type: Literal["twice"] = "twice"
    body: list[NodeSpec] = Field(min_length=1)

    def inner_vars(self) -> frozenset[str]:
        return frozenset({"round"})


async def execute_twice(call: NodeCall) -> NodeResult:
    outputs: list[Any] = []
    cost, usage = 0.0, Usage()
    for round_ in (1, 2):
        run = await call.run_subgraph("body", {"round": round_}, label=f"{call.spec.id}[{round_}]")
        outputs.append(run.output)
        cost += run.cost_usd
        usage.add(run.usage)
    return NodeResult({"results": outputs}, cost, usage)


# Runs only its body's nodes (which count as the workflow's own), deterministically: in the workflow on Temporal.
TWICE_NODE = NodeType(name="twice", execute=execute_twice, effects=PURE, model=TwiceNode, placement="workflow")

# What `--tools toy_nodes_x.nodes` adds beside the built-in node types, from the command line or a server.
NODE_TYPES = (SHOUT_NODE, TWICE_NODE)
