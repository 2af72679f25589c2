"""A network manifest as one graph of runs, whichever engine runs it: its graph (each workflow a node, driven by
the same runner and scheduler as a blueprint), what a member's end means for the rest, and its kept record."""

from __future__ import annotations

import graphlib
from collections.abc import Mapping
from typing import Any

from ice_mcp.blueprint.issues import ValidationIssue, ValidationReport, nearest
from ice_mcp.blueprint.models import NetworkManifest, WorkflowNode
from ice_mcp.core.context import Spend
from ice_mcp.core.executor import NodeExecutor
from ice_mcp.core.plan import Graph, PlanNode
from ice_mcp.core.scheduler import GraphShape
from ice_mcp.core.templates import compile_value
from ice_mcp.errors import BlueprintInvalid, NodeFailure, RunStopped, TemplateCompileError
from ice_mcp.store.records import RunRecord
from ice_mcp.types import NodeResult

__all__ = ["keep_network", "member_ended", "network_graph", "network_status"]


def network_graph(manifest: NetworkManifest, execute: NodeExecutor,
                  issues_of: Mapping[str, list[ValidationIssue]] | None = None) -> Graph:
    """The network's graph: a node per workflow (`execute` runs one), after its `after` and the workflows its
    inputs read. Raises BlueprintInvalid with every problem, `issues_of` (a workflow's own, by id) included."""
    issues: list[ValidationIssue] = []
    ids = [w.id for w in manifest.workflows]
    known = set(ids)
    nodes: dict[str, PlanNode] = {}
    deps: dict[str, tuple[str, ...]] = {}
    for workflow in manifest.workflows:
        issues.extend((issues_of or {}).get(workflow.id, ()))
        after = set()
        for dep in workflow.after:
            if dep not in known or dep == workflow.id:
                issues.append(ValidationIssue(code="unknown_dependency", message=f"`after` names unknown workflow {dep!r}",
                                              node_id=workflow.id, field="after", suggestion=nearest(dep, known)))
            else:
                after.add(dep)
        try:
            compiled = compile_value(workflow.inputs)
        except TemplateCompileError as exc:
            issues.append(ValidationIssue(code=exc.code, message=str(exc), node_id=workflow.id, field="inputs"))
            continue
        for name in compiled.names - {"global", "trigger"}:
            if name in known and name != workflow.id:
                after.add(name)
            else:
                issues.append(ValidationIssue(code="unknown_reference", message=f"inputs read {name!r}, which is no workflow here",
                                              node_id=workflow.id, field="inputs", suggestion=nearest(name, known)))
        deps[workflow.id] = tuple(sorted(after, key=ids.index))
        spec = WorkflowNode(id=workflow.id, workflow_ref=workflow.id)
        nodes[workflow.id] = PlanNode(workflow.id, spec, execute, deps[workflow.id], {"inputs": compiled})
    if len(ids) != len(known):
        issues.append(ValidationIssue(code="duplicate_id", message="workflow ids must be unique", field="workflows"))
    if issues:
        raise BlueprintInvalid(ValidationReport(ok=False, errors=issues))
    shape = GraphShape(order=tuple(ids), deps=deps, gates=dict.fromkeys(ids, ()),
                       on_error=dict.fromkeys(ids, "skip_dependents"))
    depended = {d for ds in deps.values() for d in ds}
    graph = Graph(nodes, shape, tuple(i for i in ids if i not in depended), manifest.max_parallel)
    try:
        graphlib.TopologicalSorter(deps).prepare()
    except graphlib.CycleError as exc:
        raise BlueprintInvalid(ValidationReport(ok=False, errors=[ValidationIssue(
            code="cycle", message="workflow cycle: " + " → ".join(exc.args[1]), field="after")])) from None
    return graph


def member_ended(workflow_id: str, run: RunRecord, spend: Spend) -> NodeResult:
    """A member's run ended: its outputs feed the workflows after it; a failure skips only those, and the
    network's budget spent stops the network."""
    left = spend.remaining()
    if run.status == "over_budget" and left is not None and left <= 0:
        raise RunStopped("over_budget", "the network reached its budget")
    if run.status != "succeeded":
        raise NodeFailure(f"workflow {workflow_id!r} {run.status}", code=f"workflow_{run.status}", retryable=False)
    return NodeResult(run.outputs or {})


def network_status(stopped: str | None, workflows: Mapping[str, Mapping[str, Any]]) -> str:
    """How a network ended: as it was stopped (`over_budget`), else failed when any workflow did not succeed."""
    if stopped is not None:
        return stopped
    return "failed" if any(w["status"] != "succeeded" for w in workflows.values()) else "succeeded"


def keep_network(record: RunRecord, workflows: Mapping[str, Mapping[str, Any]], status: str, cost_usd: float,
                 now: float) -> RunRecord:
    """The network's record as it stands: each workflow a node (status, error, `{run_id, outputs}`)."""
    for wid, state in workflows.items():
        node = record.nodes[wid]
        waiting = status == "running" and state["status"] == "skipped"  # not started: "skipped" once it ended
        node.status, node.error = "pending" if waiting else state["status"], state["error"]
        node.output = {"run_id": state["run_id"], "outputs": state["outputs"]}
    record.status, record.cost_usd = status, cost_usd
    if status != "running":
        record.finished_at = now
        record.duration_ms = (now - (record.started_at or now)) * 1000
    return record
