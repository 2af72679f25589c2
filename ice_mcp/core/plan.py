"""A validated blueprint compiled once: the graph the runner executes."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ice_mcp.blueprint.issues import nearest
from ice_mcp.core.scheduler import GraphShape
from ice_mcp.store.sqlite import dumps

if TYPE_CHECKING:
    from jsonschema.protocols import Validator

    from ice_mcp.blueprint.issues import CostEstimate
    from ice_mcp.blueprint.models import Blueprint, NodeSpec
    from ice_mcp.core.executor import NodeExecutor
    from ice_mcp.core.templates import Compiled

CONTAINER_TYPES = frozenset({"loop", "parallel", "recursive", "workflow"})  # and every type with sub-graphs
MAX_INPUT_PROBLEMS = 20  # a huge invalid input would otherwise build one error per bad element


@dataclass(slots=True)
class PlanNode:
    id: str
    spec: NodeSpec
    execute: NodeExecutor
    deps: tuple[str, ...]
    templates: dict[str, Compiled] = field(default_factory=dict)
    subgraphs: dict[str, Graph] = field(default_factory=dict)
    own_timeout: bool = False  # the executor enforces timeout_seconds itself (see NodeType.own_timeout)

    @property
    def type(self) -> str:
        return self.spec.type

    @property
    def attempt_timeout(self) -> float | None:
        """The runner's timeout around each attempt."""
        return None if self.own_timeout else self.spec.timeout_seconds

    @property
    def is_container(self) -> bool:
        """Containers run sub-graphs whose nodes charge the run themselves."""
        return self.spec.type in CONTAINER_TYPES or bool(self.spec.subgraph_fields)


@dataclass(slots=True)
class Graph:
    """One scope: the top level of a blueprint, a loop body, a parallel branch."""

    nodes: dict[str, PlanNode]
    shape: GraphShape
    sinks: tuple[str, ...]
    max_parallel: int
    output: Compiled | None = None

    def prepare(self) -> None:
        """Generate the code of every template in this graph and the graphs inside it."""
        for node in self.nodes.values():
            for template in node.templates.values():
                template.prepare()
            for subgraph in node.subgraphs.values():
                subgraph.prepare()

    def sink_output(self, outputs: dict[str, Any]) -> Any:
        """A sub-graph's result: its only sink's output, or an object keyed by sink id."""
        if len(self.sinks) == 1:
            return outputs.get(self.sinks[0])
        return {sink: outputs.get(sink) for sink in self.sinks}


@dataclass(slots=True)
class Plan:
    blueprint: Blueprint
    graph: Graph
    outputs: Compiled | None
    inputs_validator: Validator
    estimate: CostEstimate
    # The inputs a caller may pass, when the blueprint lists them (others are refused as typos).
    declared_inputs: Mapping[str, Any] | None = None
    quick_inputs_check: Callable[[Mapping[str, Any]], bool] | None = None  # True: valid, without the validator
    version: int | None = None  # registered at run time: its version in the run store
    document: dict[str, Any] | None = None  # the blueprint as a JSON document, when it was given as one
    document_text: str | None = None  # the document as JSON text, as each run's store row keeps it (made once)

    @property
    def name(self) -> str:
        return self.blueprint.name

    def prepare(self) -> Plan:
        """Generate the code of every template now, rather than at its first render: for a server,
        in a worker thread, so the event loop never does it."""
        self.graph.prepare()
        if self.outputs is not None:
            self.outputs.prepare()
        return self

    def source(self) -> dict[str, Any]:
        """The blueprint as a JSON document (what a resumed run compiles again)."""
        if self.document is not None:
            return self.document
        return self.blueprint.model_dump(mode="json", by_alias=True, exclude_unset=True)

    def source_text(self) -> str:
        """The document as JSON text, made on the first run and kept (a third of the document's memory)."""
        if self.document_text is None:
            self.document_text = dumps(self.source())
        return self.document_text

    def prepare_inputs(self, inputs: Mapping[str, Any]) -> tuple[dict[str, Any], list[dict[str, str]]]:
        """The inputs with top-level schema defaults filled in, and the problems (the first 20): schema
        violations, and inputs the blueprint does not declare (with the nearest one it does)."""
        filled = dict(inputs)
        declared = self.declared_inputs
        problems = [] if declared is None else [
            {"path": key, "message": "unknown input" + (f"; did you mean {hint!r}?" if hint else "")}
            for key, hint in ((key, nearest(key, declared)) for key in filled if key not in declared)
        ][:MAX_INPUT_PROBLEMS]
        for key, prop in (self.blueprint.inputs.get("properties") or {}).items():
            if key not in filled and isinstance(prop, Mapping) and "default" in prop:
                filled[key] = prop["default"]
        quick = self.quick_inputs_check
        if (quick is not None and quick(filled)) or self.inputs_validator.is_valid(filled):
            return filled, problems
        found = itertools.islice(self.inputs_validator.iter_errors(filled), MAX_INPUT_PROBLEMS)
        errors = sorted(found, key=lambda e: list(e.path))
        problems += [{"path": "/".join(map(str, e.path)) or "(inputs)", "message": e.message} for e in errors]
        return filled, problems
