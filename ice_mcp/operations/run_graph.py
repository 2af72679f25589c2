"""A run's or workflow's graph as the run views draw it (/ui and the MCP App): nodes, edges, containers.

It lives with the operations so the MCP App's `run_status` can send it; `/ui` re-exports it
(`ice_mcp.server.web.ui.graph`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ice_mcp.blueprint.models import Blueprint
from ice_mcp.errors import IceError
from ice_mcp.orchestrator import Orchestrator

MAX_NODES = 20_000  # nested workflows can multiply: stop drawing past this many nodes
MAX_DEPTH = 8
_REF = re.compile(r"\b([A-Za-z_][A-Za-z0-9_]*)\s*\.")

# A registered workflow's compiled plan, or None when it is unknown or does not compile here.
PlanLookup = Callable[[str], Any]


@dataclass(slots=True)
class _Budget:
    left: int = MAX_NODES
    truncated: bool = False


def plan_graph(plan: Any, workflows: PlanLookup) -> dict[str, Any]:
    """The view of a compiled plan's graph (exact dependencies, as the scheduler sees them)."""
    budget = _Budget()
    return {"nodes": _plan_nodes(plan.graph, workflows, budget, 0, (plan.name,)), "truncated": budget.truncated}


def blueprint_graph(blueprint: Any, workflows: PlanLookup) -> dict[str, Any]:
    """The view of a blueprint that does not compile here: declared dependencies plus the names
    its templates read (a run whose tools this process lacks still gets its picture)."""
    budget = _Budget()
    return {"nodes": _spec_nodes(list(blueprint.nodes), workflows, budget, 0, (blueprint.name,)),
            "truncated": budget.truncated}


def _item(spec: Any, deps: Sequence[str], gates: Sequence[tuple[str, bool]]) -> dict[str, Any]:
    item: dict[str, Any] = {"id": spec.id, "type": spec.type, "detail": spec.drawing.detail(spec), "deps": list(deps)}
    if gates:
        item["gates"] = [[cond, branch] for cond, branch in gates]
    if spec.description:
        item["description"] = spec.description
    return item


def _plan_nodes(graph: Any, workflows: PlanLookup, budget: _Budget, depth: int,
                stack: tuple[str, ...]) -> list[dict[str, Any]]:
    shape = graph.shape
    nodes = []
    for node_id in shape.order:
        if budget.left <= 0:
            budget.truncated = True
            break
        budget.left -= 1
        node = graph.nodes[node_id]
        item = _item(node.spec, shape.deps[node_id], shape.gates.get(node_id, ()))
        scopes = []
        if depth < MAX_DEPTH:
            for kind, label, index, sub in _plan_scopes(node, workflows):
                scope: dict[str, Any] = {"kind": kind, "label": label, "index": index, "nodes": []}
                if sub is None:
                    scope["note"] = f"workflow {label!r} is not registered here"
                elif sub[1] in stack:
                    scope["note"] = f"{label} calls itself: its inside is drawn once, above"
                else:
                    inner, name = sub
                    scope["nodes"] = _plan_nodes(inner, workflows, budget, depth + 1,
                                                 stack if name is None else (*stack, name))
                scopes.append(scope)
        if scopes:
            item["scopes"] = scopes
        nodes.append(item)
    return nodes


def _plan_scopes(node: Any, workflows: PlanLookup) -> list[tuple[str, str, int, tuple[Any, str | None] | None]]:
    """(kind, label, index, (graph, workflow name or None) or None) for each scope inside a container.

    kind says how the runner names the nodes inside in events (the node type's `drawing.inside`): `index` →
    `id[i].x` (loop items from 0, recursive iterations from `index`), `branch` → `id[index].x`, `plain` → `id.x`.
    """
    spec = node.spec
    drawing = spec.drawing
    if drawing.inside is None:
        return []
    if node.subgraphs:
        if drawing.inside == "branch":
            return [("branch", f"branch {i}", i, (graph, None)) for i, graph in enumerate(node.subgraphs.values())]
        return [(drawing.inside, name, drawing.first, (graph, None)) for name, graph in node.subgraphs.items()]
    ref = getattr(spec, drawing.workflow, None) if drawing.workflow else None
    if ref:
        plan = workflows(ref)
        return [(drawing.inside, ref, 1, None if plan is None else (plan.graph, ref))]
    return []


def _refs(spec: Any, ids: set[str]) -> set[str]:
    """Sibling nodes a spec's templates and expressions read (what the compiler infers, roughly)."""
    text = repr(spec.model_dump(mode="json", exclude={*spec.subgraph_fields, "id", "description", "metadata"}))
    return {name for name in _REF.findall(text) if name in ids and name != spec.id}


def _spec_nodes(specs: list[Any], workflows: PlanLookup, budget: _Budget, depth: int,
                stack: tuple[str, ...]) -> list[dict[str, Any]]:
    ids = {spec.id for spec in specs}
    gates: dict[str, list[tuple[str, bool]]] = {}
    for spec in specs:
        for field, branch in (("true_path", True), ("false_path", False)):
            for target in getattr(spec, field, None) or []:
                gates.setdefault(target, []).append((spec.id, branch))
    nodes = []
    for spec in specs:
        if budget.left <= 0:
            budget.truncated = True
            break
        budget.left -= 1
        deps = (set(spec.dependencies) | _refs(spec, ids) | {c for c, _ in gates.get(spec.id, [])}) & ids
        item = _item(spec, sorted(deps), gates.get(spec.id, []))
        scopes: list[dict[str, Any]] = []
        drawing = spec.drawing
        if depth < MAX_DEPTH and drawing.inside is not None:
            graphs = spec.inner_graphs()
            ref = getattr(spec, drawing.workflow, None) if drawing.workflow else None
            if graphs and drawing.inside == "branch":
                scopes += [{"kind": "branch", "label": f"branch {i}", "index": i,
                            "nodes": _spec_nodes(inner, workflows, budget, depth + 1, stack)}
                           for i, (_, inner) in enumerate(graphs)]
            elif graphs:
                scopes += [{"kind": drawing.inside, "label": name, "index": drawing.first,
                            "nodes": _spec_nodes(inner, workflows, budget, depth + 1, stack)} for name, inner in graphs]
            elif ref:
                plan = workflows(ref) if ref not in stack else None
                scope = {"kind": drawing.inside, "label": ref, "index": 1,
                         "nodes": [] if plan is None else
                         _spec_nodes(list(plan.blueprint.nodes), workflows, budget, depth + 1, (*stack, ref))}
                if plan is None:
                    scope["note"] = f"workflow {ref!r} is not drawn here"
                scopes.append(scope)
        if scopes:
            item["scopes"] = scopes
        nodes.append(item)
    return nodes


def workflow_lookup(orc: Orchestrator) -> PlanLookup:
    """A registered workflow's plan by name, None when it is unknown or does not compile here."""
    def lookup(name: str) -> Any:
        try:
            return orc.workflow_plan(name)
        except IceError:
            return None
    return lookup


def run_graph(orc: Orchestrator, run_id: str) -> dict[str, Any] | None:
    """The graph of a run the caller may see: its live plan, else its kept blueprint (compiled, or drawn from
    the blueprint when it does not compile here), else its workflow's; None when nothing describes it."""
    handle = orc.get_handle(run_id)
    if handle is not None and handle.plan is not None:
        return plan_graph(handle.plan, workflow_lookup(orc))
    stored = orc.store.run(run_id) if orc.store is not None and orc.get_run(run_id) is not None else None
    if stored is None:
        return None
    source: Any = stored.blueprint
    if source is None and (entry := orc.registry.workflows.get(stored.record.workflow)) is not None:
        source = entry.blueprint
    if source is None:
        return None
    try:
        return plan_graph(orc.compile(source), workflow_lookup(orc))
    except IceError:
        blueprint = source if isinstance(source, Blueprint) else _parsed(orc, source)
        return None if blueprint is None else {**blueprint_graph(blueprint, workflow_lookup(orc)), "approximate": True}


def _parsed(orc: Orchestrator, source: Any) -> Blueprint | None:
    try:
        return orc.node_models.blueprint.model_validate(source)
    except ValueError:
        return None
