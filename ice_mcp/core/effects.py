"""What a workflow may do to the world, folded over its nodes from what each node type declares."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Protocol

from ice_mcp.types import EFFECTFUL, PURE, Effects

if TYPE_CHECKING:
    from ice_mcp.blueprint.models import NodeSpec
    from ice_mcp.core.executor import NodeType


class EffectsContext(Protocol):
    """What a node type's effects may depend on: the tools and workflows it names."""

    def tool_effects(self, name: str) -> Effects | None:
        """A registered tool's declared effects; None when there is no such tool."""
        ...

    def workflow_effects(self, name: str) -> Effects:
        """A registered workflow's effects (EFFECTFUL when unknown, or nested too deep to tell)."""
        ...


def iter_nodes(nodes: Iterable[NodeSpec]) -> Iterator[NodeSpec]:
    """Every node of a graph, the nodes of its sub-graphs (a field of nodes, or of lists of nodes) included."""
    for node in nodes:
        yield node
        for name in node.subgraph_fields:
            for item in getattr(node, name) or ():
                yield from iter_nodes(item if isinstance(item, list) else [item])


def graph_effects(nodes: Iterable[NodeSpec], node_types: Mapping[str, NodeType], ctx: EffectsContext) -> Effects:
    """Read-only only if every node is; destructive or open-world if any node may be. A node whose type is
    unknown here, or declares nothing, may do anything: the read-only gate denies by default."""
    effects = PURE
    for node in iter_nodes(nodes):
        node_type = node_types.get(node.type)
        declared = node_type.effects if node_type is not None else None
        if declared is None:
            effects = effects.then(EFFECTFUL)
        elif isinstance(declared, Effects):
            effects = effects.then(declared)
        else:
            effects = effects.then(declared(node, ctx))
    return effects
