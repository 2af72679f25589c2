"""The node models one parse accepts: the built-in ones, or those with an orchestrator's own node types added."""

from __future__ import annotations

import functools
import types
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, ForwardRef, Union, get_args, get_origin

from pydantic import Field, TypeAdapter, create_model

from ice_mcp.blueprint.models import NODE_MODELS, NODE_TYPES, Blueprint, NodeBase, NodeSpec

_NODES = "_Nodes"  # what a container's sub-graph fields refer to while its set's union is being made


@dataclass(frozen=True, slots=True, eq=False)
class NodeSet:
    """Node models by type name, with the blueprint model whose nodes (sub-graphs' too) are any of them."""

    models: Mapping[str, type[NodeBase]]
    blueprint: type[Blueprint]
    node: TypeAdapter[Any]  # one node spec of the set
    names: tuple[str, ...]


BUILTIN_NODES = NodeSet(NODE_MODELS, Blueprint, TypeAdapter(NodeSpec), NODE_TYPES)


def node_set(models: Mapping[str, type[NodeBase]]) -> NodeSet:
    """The built-in models with `models` added (or replacing a built-in's), made once per distinct set."""
    added = {name: model for name, model in models.items() if NODE_MODELS.get(name) is not model}
    if not added:
        return BUILTIN_NODES
    return _made(frozenset({**NODE_MODELS, **added}.items()))


@functools.lru_cache(maxsize=32)
def _made(items: frozenset[tuple[str, type[NodeBase]]]) -> NodeSet:
    """A set's models, each container's sub-graph fields re-typed to hold any node of the set (a subclass of
    its model: `isinstance` checks still hold), and its blueprint model (~25 ms, once per set and process)."""
    order = {name: i for i, name in enumerate(NODE_TYPES)}
    models = dict(sorted(items, key=lambda item: (order.get(item[0], len(order)), item[0])))
    ref = ForwardRef(_NODES)
    made: dict[str, type[NodeBase]] = {}
    for name, model in models.items():
        if not model.subgraph_fields:
            made[name] = model
            continue
        fields: dict[str, Any] = {field: (_swap(model.model_fields[field].annotation, NodeSpec, ref),
                                          model.model_fields[field]) for field in model.subgraph_fields}
        made[name] = create_model(model.__name__, __base__=model, __module__=model.__module__, **fields)
    nodes: Any = Annotated[Union[tuple(made.values())], Field(discriminator="type")]  # noqa: UP007 (members built here)
    for name, model in made.items():
        if model is not models[name]:
            model.model_rebuild(_types_namespace={_NODES: nodes})
    blueprint = create_model("Blueprint", __base__=Blueprint, __module__=Blueprint.__module__,
                             nodes=(list[nodes], Blueprint.model_fields["nodes"]))
    return NodeSet(made, blueprint, TypeAdapter(nodes), tuple(made))


def _swap(annotation: Any, old: Any, new: Any) -> Any:
    """`annotation` with `old` replaced by `new` wherever it appears (`list[old] | None` → `list[new] | None`)."""
    if annotation == old:
        return new
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is None or not args:
        return annotation
    swapped = tuple(_swap(arg, old, new) for arg in args)
    if swapped == args:
        return annotation
    if origin is Annotated:
        return Annotated[(swapped[0], *annotation.__metadata__)]
    if origin in (Union, types.UnionType):
        return Union[swapped]  # noqa: UP007
    return origin[swapped]
