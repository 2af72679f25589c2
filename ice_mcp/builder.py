"""A fluent way to write a blueprint in Python; `build()` yields the same Blueprint model."""

from __future__ import annotations

from typing import Any

from ice_mcp.blueprint.models import Blueprint
from ice_mcp.blueprint.node_sets import BUILTIN_NODES, NodeSet


class WorkflowBuilder:
    """`WorkflowBuilder("report").add_tool("read", "csv_reader", path="{{ inputs.path }}").build()`"""

    def __init__(self, name: str, *, description: str | None = None, inputs: dict[str, Any] | None = None,
                 **options: Any) -> None:
        self._top: dict[str, Any] = {"name": name, **options}
        if description is not None:
            self._top["description"] = description
        if inputs is not None:
            self._top["inputs"] = inputs
        self._outputs: dict[str, Any] = {}
        self._nodes: list[dict[str, Any]] = []

    def _add(self, node_id: str, node_type: str, fields: dict[str, Any]) -> WorkflowBuilder:
        self._nodes.append({"id": node_id, "type": node_type, **{k: v for k, v in fields.items() if v is not None}})
        return self

    def add_node(self, spec: dict[str, Any]) -> WorkflowBuilder:
        """Add a node written as a plain spec dict (any type)."""
        self._nodes.append(dict(spec))
        return self

    def add_tool(self, node_id: str, tool_name: str, args: dict[str, Any] | None = None, **options: Any) -> WorkflowBuilder:
        return self._add(node_id, "tool", {"tool_name": tool_name, "tool_args": args or {}, **options})

    def add_llm(self, node_id: str, model: str, prompt: str, **options: Any) -> WorkflowBuilder:
        return self._add(node_id, "llm", {"model": model, "prompt": prompt, **options})

    def add_agent(self, node_id: str, agent: str | dict[str, Any], input: str | None = None, **options: Any) -> WorkflowBuilder:
        return self._add(node_id, "agent", {"agent": agent, "input": input, **options})

    def add_code(self, node_id: str, code: str, inputs: dict[str, Any] | None = None, **options: Any) -> WorkflowBuilder:
        return self._add(node_id, "code", {"code": code, "inputs": inputs or {}, **options})

    def add_condition(self, node_id: str, expression: str, true_path: list[str] | None = None,
                      false_path: list[str] | None = None, **options: Any) -> WorkflowBuilder:
        return self._add(node_id, "condition", {"expression": expression, "true_path": true_path or [],
                                                "false_path": false_path or [], **options})

    def add_loop(self, node_id: str, items: Any, body: list[dict[str, Any]] | WorkflowBuilder, **options: Any) -> WorkflowBuilder:
        return self._add(node_id, "loop", {"items": items, "body": _nodes_of(body), **options})

    def add_parallel(self, node_id: str, branches: list[list[dict[str, Any]] | WorkflowBuilder], **options: Any) -> WorkflowBuilder:
        return self._add(node_id, "parallel", {"branches": [_nodes_of(b) for b in branches], **options})

    def add_recursive(self, node_id: str, convergence_condition: str, max_iterations: int,
                      body: list[dict[str, Any]] | WorkflowBuilder | None = None, **options: Any) -> WorkflowBuilder:
        return self._add(node_id, "recursive", {"convergence_condition": convergence_condition,
                                                "max_iterations": max_iterations,
                                                "body": None if body is None else _nodes_of(body), **options})

    def add_workflow(self, node_id: str, workflow_ref: str, inputs: dict[str, Any] | None = None, **options: Any) -> WorkflowBuilder:
        return self._add(node_id, "workflow", {"workflow_ref": workflow_ref, "inputs": inputs or {}, **options})

    def connect(self, source: str, target: str) -> WorkflowBuilder:
        """`target` runs after `source`."""
        for node in self._nodes:
            if node["id"] == target:
                deps = node.setdefault("dependencies", [])
                if source not in deps:
                    deps.append(source)
                return self
        raise KeyError(f"no node {target!r} in this builder")

    def output(self, name: str, template: Any) -> WorkflowBuilder:
        self._outputs[name] = template
        return self

    def nodes(self) -> list[dict[str, Any]]:
        return [dict(node) for node in self._nodes]

    def to_dict(self) -> dict[str, Any]:
        data = {**self._top, "nodes": self.nodes()}
        if self._outputs:
            data["outputs"] = dict(self._outputs)
        return data

    def build(self, nodes: NodeSet = BUILTIN_NODES) -> Blueprint:
        """The Blueprint model; raises pydantic's ValidationError on a malformed spec. `nodes`: the node models
        it may hold (an orchestrator's `node_models`, when it has node types of its own)."""
        return nodes.blueprint.model_validate(self.to_dict())


def _nodes_of(body: list[dict[str, Any]] | WorkflowBuilder) -> list[dict[str, Any]]:
    return body.nodes() if isinstance(body, WorkflowBuilder) else list(body)
