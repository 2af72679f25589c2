"""Blueprint → plan, in one pass that reports every problem at once.

The compiler never runs anything: it checks names, references, templates,
cycles and registry entries, estimates the cost, and builds the plan only
when nothing is wrong.
"""

from __future__ import annotations

import graphlib
from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ice_mcp.blueprint.issues import FREE, CostEstimate, ValidationIssue, nearest
from ice_mcp.blueprint.loading import Unparsed
from ice_mcp.blueprint.models import Blueprint, ConditionNode, NodeBase
from ice_mcp.blueprint.schemas import SchemaInvalid, quick_check, shared_validator
from ice_mcp.core.executor import NodeType
from ice_mcp.core.plan import Graph, Plan, PlanNode
from ice_mcp.core.scheduler import GraphShape
from ice_mcp.core.templates import Compiled, compile_expression, compile_value
from ice_mcp.errors import TemplateCompileError

if TYPE_CHECKING:
    from ice_mcp.services import Services

RUN_NAMES = frozenset({"inputs", "global", "trigger"})
_NO_NAMES: frozenset[str] = frozenset()
LLM_TYPES = frozenset({"llm", "agent"})
MAX_ISSUES = 200  # past this, one more issue says how many were left out
MAX_SUGGESTIONS = 50  # each "did you mean" compares a name with every candidate


@dataclass(slots=True)
class ScopeResult:
    graph: Graph | None
    free_names: set[str]
    estimate: CostEstimate


def _acyclic(deps: Mapping[str, tuple[str, ...]]) -> bool:
    """Kahn's algorithm: True when every node can be ordered after its dependencies."""
    waiting = {node: len(node_deps) for node, node_deps in deps.items()}
    dependents: dict[str, list[str]] = {}
    for node, node_deps in deps.items():
        for dep in node_deps:
            dependents.setdefault(dep, []).append(node)
    ready = [node for node, count in waiting.items() if count == 0]
    done = 0
    while ready:
        node = ready.pop()
        done += 1
        for dependent in dependents.get(node, ()):
            waiting[dependent] -= 1
            if waiting[dependent] == 0:
                ready.append(dependent)
    return done == len(waiting)


def _union(names: AbstractSet[str], more: AbstractSet[str]) -> AbstractSet[str]:
    """`names` and `more` (neither changed): most nodes read through one field, so no set is made for them."""
    if not more:
        return names
    return more if not names else {*names, *more}


def declared_properties(schema: Any) -> Mapping[str, Any] | None:
    """The properties an inputs schema allows, or None when it allows others too (or cannot say)."""
    if not isinstance(schema, Mapping) or not isinstance(schema.get("properties"), Mapping):
        return None
    if schema.get("additionalProperties", False) is not False or any(
            key in schema for key in ("patternProperties", "allOf", "anyOf", "oneOf", "$ref", "if")):
        return None
    return schema["properties"]


class Compiler:
    """One compilation. Node types come from the orchestrator (with why known ones are unavailable here);
    each type's `check` and `estimate` see the orchestrator's services through this object."""

    def __init__(self, services: Services, node_types: Mapping[str, NodeType],
                 unavailable: Mapping[str, str] | None = None) -> None:
        self.services = services
        self.node_types = node_types
        self.unavailable = unavailable or {}
        self.issues: list[ValidationIssue] = []
        self.warnings: list[ValidationIssue] = []
        self.left_out = 0
        self.declared_inputs: Mapping[str, Any] | None = None  # set when the blueprint lists its inputs
        self.templates: Mapping[str, Compiled] = {}  # the compiled fields of the node being checked

    def issue(self, code: str, message: str, node_id: str | None = None, field: str | None = None,
              suggestion: str | None = None) -> None:
        if len(self.issues) >= MAX_ISSUES:
            self.left_out += 1
            return
        self.issues.append(ValidationIssue(code=code, message=message, node_id=node_id, field=field,
                                           suggestion=suggestion))

    def suggest(self, name: str, candidates: Any) -> str | None:
        return nearest(name, candidates) if len(self.issues) < MAX_SUGGESTIONS else None

    # -- the whole blueprint ------------------------------------------------

    def compile(
        self,
        blueprint: Blueprint | None,
        nodes: Sequence[Any],
        *,
        inputs_schema: Any,
        outputs: Any,
        budget_usd: float | None,
        max_parallel: int,
    ) -> tuple[Plan | None, CostEstimate]:
        validator = self._inputs_validator(inputs_schema)
        self.declared_inputs = declared_properties(inputs_schema) if blueprint is None or "inputs" in \
            blueprint.model_fields_set else None
        top = self.compile_scope(nodes, outer=RUN_NAMES, local_vars=frozenset(), max_parallel=max_parallel)
        compiled_outputs = None
        if isinstance(outputs, Mapping):
            visible = RUN_NAMES | {n.id for n in nodes}
            compiled_outputs = self._template(outputs, visible, node_id=None, field="outputs")[0]
        self._check_budget(top.estimate, budget_usd)
        if self.left_out:
            self.issues.append(ValidationIssue(code="too_many_issues",
                                               message=f"{self.left_out} more problems are not listed"))
        if self.issues or blueprint is None or top.graph is None or validator is None:
            return None, top.estimate
        plan = Plan(blueprint, top.graph, compiled_outputs, validator, top.estimate, self.declared_inputs,
                    quick_check(inputs_schema))
        return plan, top.estimate

    def _inputs_validator(self, schema: Any) -> Any:
        if not isinstance(schema, Mapping):
            return None
        if schema.get("type", "object") != "object":
            self.issue("invalid_schema", "`inputs` must be a JSON Schema of type object", field="inputs")
            return None
        try:
            return shared_validator(schema)
        except SchemaInvalid as exc:
            self.issue(exc.code, f"`inputs`: {exc.message}", field="inputs" + (exc.path.replace("/", ".")))
            return None

    def _check_budget(self, estimate: CostEstimate, budget: float | None) -> None:
        if budget is None or estimate.is_free:
            return
        if estimate.usd_max is None:
            self.issue("over_budget", f"the cost has no upper bound (LLM calls up to {estimate.llm_calls_max or 'unbounded'}), "
                       f"so it may exceed budget_usd={budget}; bound loops with max_iterations", field="budget_usd")
        elif estimate.usd_max > budget * (1 + 1e-9):  # sums of prices are not exact
            self.issue("over_budget", f"estimated cost up to ${estimate.usd_max:.4f} exceeds budget_usd={budget}",
                       field="budget_usd")

    # -- one scope ----------------------------------------------------------

    def compile_scope(self, specs: Sequence[Any], *, outer: frozenset[str], local_vars: frozenset[str],
                      max_parallel: int) -> ScopeResult:
        ids = [spec.id for spec in specs]
        local_ids = set(ids)
        unique = len(local_ids) == len(ids)
        position = (dict(zip(ids, range(len(ids)), strict=True)) if unique  # made in C: no id is repeated
                    else {node_id: i for i, node_id in reversed(list(enumerate(ids)))})  # first occurrence wins
        if not unique:  # some id is used twice: name each repeat
            seen: set[str] = set()
            for spec in specs:
                if spec.id in seen:
                    self.issue("duplicate_id", f"node id {spec.id!r} is used more than once in this scope",
                               spec.id, "id")
                seen.add(spec.id)
        for var in local_vars & local_ids:
            self.issue("duplicate_id", f"node id {var!r} hides the variable of the same name", var, "id")
        visible = outer | local_vars | local_ids

        gates: dict[str, list[tuple[str, bool]]] = {}  # only gated nodes have an entry
        for spec in specs:
            if spec.type == "condition" and isinstance(spec, ConditionNode):
                for field, branch in (("true_path", True), ("false_path", False)):
                    for target in getattr(spec, field):
                        if target not in local_ids:
                            self.issue("unknown_dependency", f"{field} names unknown node {target!r}", spec.id,
                                       field, self.suggest(target, local_ids))
                        elif target == spec.id:
                            self.issue("cycle", "a condition cannot gate itself", spec.id, field)
                        else:
                            gates.setdefault(target, []).append((spec.id, branch))

        free: set[str] = set()
        deps: dict[str, tuple[str, ...]] = {}
        plan_nodes: dict[str, PlanNode] = {}
        estimate = FREE
        # True while every node depends only on nodes listed before it (ids at their first position): then
        # the graph has no cycle, and Kahn's algorithm need not say so.
        in_order = True
        for spec in specs:
            node_id = spec.id
            node_deps: set[str] = set()
            for dep in spec.dependencies:
                if dep == node_id:
                    self.issue("cycle", "a node cannot depend on itself", node_id, "dependencies")
                elif dep not in local_ids:
                    self.issue("unknown_dependency", f"dependency {dep!r} is not a node in this scope", node_id,
                               "dependencies", self.suggest(dep, local_ids))
                else:
                    node_deps.add(dep)
            gated = gates.get(node_id)
            if gated:
                node_deps.update(cond for cond, _ in gated)
            if type(spec) is Unparsed:
                deps[node_id] = tuple(sorted(node_deps))
                in_order = False  # checked the long way
                continue
            plan_node, names, node_estimate = self._node(spec, visible, outer)
            for name in names:
                if name == node_id:
                    self.issue("cycle", f"node {node_id!r} reads its own output", node_id)
                elif name in local_ids:
                    node_deps.add(name)
                elif name not in local_vars:
                    free.add(name)
            if len(node_deps) > 1:
                ordered = sorted(node_deps, key=position.__getitem__)
                node_order = deps[node_id] = tuple(ordered)
                in_order = in_order and position[ordered[-1]] < position[node_id]
            else:
                node_order = deps[node_id] = tuple(node_deps)
                in_order = in_order and (not node_order or position[node_order[0]] < position[node_id])
            if gated:
                node_estimate = node_estimate.widen(FREE)
            if node_estimate is not FREE:  # most nodes cost nothing: no sum to make
                estimate = estimate + node_estimate
            if plan_node is not None:
                plan_node.deps = node_order
                plan_nodes[node_id] = plan_node

        if not in_order:
            self._check_cycles(deps)
        if self.issues or len(plan_nodes) != len(specs):
            return ScopeResult(None, free, estimate)
        shape = GraphShape(
            order=tuple(ids),
            deps=deps,
            gates={i: tuple(g) for i, g in gates.items()},
            on_error={spec.id: spec.on_error for spec in specs},
        )
        # The sinks: nodes nothing depends on.
        graph = Graph(plan_nodes, shape, tuple(i for i in ids if i not in shape.dependents), max_parallel)
        return ScopeResult(graph, free, estimate)

    def _check_cycles(self, deps: Mapping[str, tuple[str, ...]]) -> None:
        if _acyclic(deps):
            return
        try:  # graphlib names the cycle
            graphlib.TopologicalSorter(deps).prepare()
        except graphlib.CycleError as exc:
            cycle = exc.args[1]
            self.issue("cycle", "dependency cycle: " + " → ".join(cycle), cycle[0], "dependencies")

    # -- one node -----------------------------------------------------------

    def _node(self, spec: NodeBase, visible: frozenset[str], outer: frozenset[str]
              ) -> tuple[PlanNode | None, AbstractSet[str], CostEstimate]:
        node_type = self.node_types.get(spec.type)
        if node_type is None:
            reason = self.unavailable.get(spec.type)
            self.issue("unavailable_node_type", f"node type {spec.type!r} is not available in this installation"
                       + (f" ({reason})" if reason else ""), spec.id, "type")
        names: AbstractSet[str] = _NO_NAMES  # what the node reads; a set only once a second field adds to it
        templates: dict[str, Compiled] = {}
        subgraphs: dict[str, Graph] = {}
        # Only containers (which have sub-graphs) bring variables of their own.
        extra = spec.inner_vars() if spec.subgraph_fields else _NO_NAMES

        for field in spec.template_fields:
            value = getattr(spec, field)
            if value is None or field == "output":
                continue
            scope = visible | extra if extra and spec.templates_see_inner_vars else visible
            compiled, used = self._template(value, scope, spec.id, field)
            if compiled is not None:
                templates[field] = compiled
            names = _union(names, used - extra if extra else used)
        for field in spec.expression_fields:
            compiled, used = self._expression(getattr(spec, field), visible | extra, spec.id, field)
            if compiled is not None:
                templates[field] = compiled
            names = _union(names, used - extra)
        sub_estimate = FREE
        if spec.subgraph_fields:
            names, sub_estimate = self._container(spec, visible, extra, names, templates, subgraphs)

        if node_type is None:
            estimate = CostEstimate(llm_calls_min=1, llm_calls_max=1) if spec.type in LLM_TYPES else sub_estimate
            return None, names, estimate
        estimate = sub_estimate if node_type.estimate is None else node_type.estimate(spec, self, sub_estimate)  # type: ignore[arg-type]
        if node_type.check is not None:
            self.templates = templates
            for issue in node_type.check(spec, self):  # type: ignore[arg-type]
                self.issue(issue.code, issue.message, issue.node_id, issue.field, issue.suggestion)
        plan_node = PlanNode(spec.id, spec, node_type.execute, (), templates, subgraphs,  # type: ignore[arg-type]
                             node_type.own_timeout)
        return plan_node, names, estimate

    def _container(self, spec: NodeBase, visible: frozenset[str], extra: frozenset[str], names: AbstractSet[str],
                   templates: dict[str, Compiled], subgraphs: dict[str, Graph]
                   ) -> tuple[AbstractSet[str], CostEstimate]:
        """A container's sub-graphs (into `subgraphs`) and its `output` (into `templates`): the names the
        node reads with theirs, and their estimate."""
        sub_estimate = FREE
        inner_ids: set[str] = set()
        for i, (key, body) in enumerate(spec.inner_graphs()):
            result = self.compile_scope(body, outer=visible, local_vars=extra,
                                        max_parallel=getattr(spec, "concurrency", None) or 1_000)
            names = _union(names, result.free_names)
            inner_ids.update(node.id for node in body)
            # One sub-graph: its estimate; several (a parallel's branches) all run: their sum.
            sub_estimate = sub_estimate + result.estimate if i else result.estimate
            if result.graph is not None:
                subgraphs[key] = result.graph
        output = getattr(spec, "output", None) if "output" in spec.template_fields else None
        if output is not None:
            # A container's `output` picks the result inside each sub-graph's own scope.
            compiled, used = self._template(output, visible | extra | inner_ids, spec.id, "output")
            if compiled is not None:
                templates["output"] = compiled
                for graph in subgraphs.values():
                    graph.output = compiled
            names = _union(names, used - extra - inner_ids)
        return names, sub_estimate

    def _template(self, value: Any, visible: frozenset[str], node_id: str | None, field: str
                  ) -> tuple[Compiled | None, frozenset[str]]:
        try:
            compiled = compile_value(value)
        except TemplateCompileError as exc:
            self.issue(exc.code, f"{field}: {exc}", node_id, field)
            return None, _NO_NAMES
        names = compiled.names
        if names:
            self._check_names(names, visible, node_id, field)
            if self.declared_inputs is not None:
                self._check_inputs(compiled.input_keys, node_id, field)
        return compiled, names

    def _expression(self, source: str, visible: frozenset[str], node_id: str, field: str
                    ) -> tuple[Compiled | None, frozenset[str]]:
        try:
            compiled = compile_expression(source)
        except TemplateCompileError as exc:
            self.issue("expression_syntax", f"{field}: {exc}", node_id, field)
            return None, _NO_NAMES
        self._check_names(compiled.names, visible, node_id, field)
        if self.declared_inputs is not None:
            self._check_inputs(compiled.input_keys, node_id, field)
        return compiled, compiled.names

    def _check_names(self, names: frozenset[str], visible: frozenset[str], node_id: str | None, field: str) -> None:
        if names <= visible:
            return
        for name in sorted(names - visible):
            self.issue("unknown_reference", f"{field} reads {name!r}, which is no node, input or variable here",
                       node_id, field, self.suggest(name, visible))

    def _check_inputs(self, keys: frozenset[str], node_id: str | None, field: str) -> None:
        """`inputs.x` must name an input the blueprint declares (when it declares them)."""
        declared = self.declared_inputs
        if declared is None or not keys:
            return
        unknown = keys.difference(declared)  # each key looked up in the dict (`- declared.keys()` walks it in Python)
        for key in sorted(unknown) if unknown else ():
            self.issue("unknown_input", f"{field} reads inputs.{key}, which the blueprint's `inputs` does not declare",
                       node_id, field, self.suggest(key, declared))
