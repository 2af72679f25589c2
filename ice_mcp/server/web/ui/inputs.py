"""A node's inputs as they were rendered, rebuilt from the run's inputs and the outputs in its events.

Templates are pure (Jinja2's immutable sandbox, no clock or randomness), so rendering a node's
templates again against the same names gives what the node received.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ice_mcp.core.templates import Scope
from ice_mcp.errors import IceError
from ice_mcp.store.node_states import fold

_SEGMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(?:\[(\d+)\])?")
PlanLookup = Callable[[str], Any]


class NotRenderable(IceError):
    """Why a node's inputs cannot be rebuilt (an unknown node, a loop item that was never reached...)."""

    code = "not_renderable"


def outputs_from_events(events: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """What each finished node left in its scope, by full node id (`loop[3].x`)."""
    outputs: dict[str, Any] = {}
    for node_id, state in fold(events).items():
        if state.status == "succeeded":
            outputs[node_id] = state.output
        elif state.status == "failed":
            outputs[node_id] = {"error": state.error}  # what `on_error: continue` leaves
        elif state.status == "skipped":
            outputs[node_id] = None
    return outputs


def rendered_inputs(plan: Any, run_inputs: Mapping[str, Any], outputs: Mapping[str, Any], node_path: str,
                    workflows: PlanLookup) -> dict[str, Any]:
    """The rendered template fields of the node at `node_path` (raises NotRenderable)."""
    segments = node_path.split(".")
    graph, prefix = plan.graph, ""
    level = _level(Scope({"inputs": dict(run_inputs), "global": {}}), graph, prefix, outputs)
    for segment in segments[:-1]:
        match = _SEGMENT.fullmatch(segment)
        if match is None or match.group(1) not in graph.nodes:
            raise NotRenderable(f"no node {segment!r} in this scope")
        node, index = graph.nodes[match.group(1)], None if match.group(2) is None else int(match.group(2))
        inner_scope, graph = _enter(node, index, level, prefix + node.id, outputs, workflows)
        prefix += segment + "."
        level = _level(inner_scope, graph, prefix, outputs)
    node = graph.nodes.get(segments[-1])
    if node is None:
        raise NotRenderable(f"no node {segments[-1]!r} in this scope")
    return {name: node.templates[name].render(level)
            for name in node.spec.template_fields if name in node.templates and name != "output"}


def _level(scope: Scope, graph: Any, prefix: str, outputs: Mapping[str, Any]) -> Scope:
    """A graph's level as the runner builds it: the enclosing scope plus its finished nodes' outputs."""
    return scope.child({node_id: outputs[prefix + node_id] for node_id in graph.nodes if prefix + node_id in outputs})


def _enter(node: Any, index: int | None, level: Scope, path: str, outputs: Mapping[str, Any],
           workflows: PlanLookup) -> tuple[Scope, Any]:
    """The scope and graph inside one container, as its executor builds them (nodes/loop.py etc.)."""
    spec = node.spec
    if node.type == "loop" and index is not None:
        items = node.templates["items"].render(level)
        if isinstance(items, Mapping):
            items = [{"key": k, "value": v} for k, v in items.items()]
        if not isinstance(items, list | tuple) or index >= len(items):
            raise NotRenderable(f"loop {spec.id!r} has no item {index}")
        return level.child({spec.item_var: items[index], "index": index}), node.subgraphs["body"]
    if node.type == "parallel" and index is not None and f"branch{index}" in node.subgraphs:
        return level.child({}), node.subgraphs[f"branch{index}"]
    if node.type == "workflow":
        inputs = node.templates["inputs"].render(level) if "inputs" in node.templates else {}
        return _workflow_scope(spec.workflow_ref, inputs, workflows)
    if node.type == "recursive" and index is not None and (spec.body or spec.workflow_ref):
        previous: Any = None
        for iteration in range(1, index + 1):
            variables = {"iteration": iteration, "previous": previous}
            if spec.body:
                scope, graph = level.child(variables), node.subgraphs["body"]
            else:
                inputs = node.templates["inputs"].render(level.child(variables)) if spec.inputs else {}
                scope, graph = _workflow_scope(spec.workflow_ref, inputs, workflows)
            if iteration == index:
                return scope, graph
            inner = _level(scope, graph, f"{path}[{iteration}].", outputs)
            previous = _graph_output(graph, inner, workflows(spec.workflow_ref) if spec.workflow_ref else None)
    raise NotRenderable(f"cannot enter {spec.type} node {spec.id!r} here")


def _workflow_scope(name: str, inputs: Any, workflows: PlanLookup) -> tuple[Scope, Any]:
    plan = workflows(name)
    if plan is None:
        raise NotRenderable(f"workflow {name!r} is not registered here")
    filled, _ = plan.prepare_inputs(inputs if isinstance(inputs, Mapping) else {})
    return Scope({"inputs": filled, "global": {}}), plan.graph


def _graph_output(graph: Any, level: Scope, workflow_plan: Any) -> Any:
    """A sub-graph's result as its container hands it on (core/runner.py, core/plan.py)."""
    outputs = level.vars
    if workflow_plan is not None:
        if workflow_plan.outputs is None:
            return {sink: outputs.get(sink) for sink in graph.sinks}
        rendered = workflow_plan.outputs.render(level)
        return rendered if isinstance(rendered, dict) else {"result": rendered}
    if graph.output is not None:
        return graph.output.render(level)
    return graph.sink_output(outputs)
