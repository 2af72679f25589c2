"""Network manifests: several workflows with `after` prerequisites, run as one graph of runs.

Each workflow is a node of a synthetic graph driven by the same scheduler and
runner as a blueprint; a failed workflow skips its dependents only.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ice_mcp.blueprint.issues import CostEstimate, ValidationIssue, ValidationReport, nearest
from ice_mcp.blueprint.limits import BlueprintLimits
from ice_mcp.blueprint.loading import load_network
from ice_mcp.blueprint.models import NetworkManifest, WorkflowNode
from ice_mcp.engine.context import RunContext, RunStopped, Spend, check_fits
from ice_mcp.engine.events import Event, EventLog
from ice_mcp.engine.plan import Graph, Plan, PlanNode
from ice_mcp.engine.scheduler import GraphShape
from ice_mcp.engine.templates import Scope, TemplateCompileError, compile_value
from ice_mcp.engine.workflows import compile_plan, plan_for
from ice_mcp.errors import BlueprintInvalid
from ice_mcp.nodes.base import NodeCall, NodeExecutor, NodeFailure, NodeResult

if TYPE_CHECKING:
    from ice_mcp.orchestrator import Orchestrator


class NetworkRunner:
    def __init__(self, orchestrator: Orchestrator, *, from_client: bool, base_dir: Path | None) -> None:
        self.orc = orchestrator
        self.from_client = from_client
        self.base_dir = base_dir

    def _load(self, source: NetworkManifest | str | Path | Mapping[str, Any]) -> NetworkManifest:
        if isinstance(source, Path | str) and self.base_dir is None and not self.from_client:
            path = Path(source)
            if path.suffix in (".yaml", ".yml", ".json") and path.is_file():
                self.base_dir = path.resolve().parent
        return load_network(source, BlueprintLimits.from_settings(self.orc.settings))

    def check(self, source: NetworkManifest | str | Path | Mapping[str, Any]) -> None:
        """Raise BlueprintInvalid with every problem of the manifest; run nothing."""
        self._compile(self._load(source), _never_run)

    async def run(self, source: NetworkManifest | str | Path | Mapping[str, Any],
                  on_event: Callable[[Event], None] | None = None) -> dict[str, Any]:
        manifest = self._load(source)
        plans: dict[str, Plan] = {}
        results: dict[str, dict[str, Any]] = {w.id: {"status": "skipped", "run_id": None, "outputs": None,
                                                     "error": None} for w in manifest.workflows}
        caller = self.orc.caller_spend()
        spend = Spend(budget_usd=manifest.budget_usd, parent=caller)
        events = EventLog(f"network:{manifest.name}", [on_event] if on_event else [])

        async def run_one(call: NodeCall) -> NodeResult:
            workflow_id = call.node.id
            inputs = call.render("inputs")
            handle = await self.orc.start(plans[workflow_id], inputs, globals=manifest.global_, parent_spend=spend)
            results[workflow_id]["run_id"] = handle.run_id
            record = await handle.wait()
            results[workflow_id].update(status=record.status, outputs=record.outputs, error=record.error)
            if record.status == "over_budget" and spend.remaining() is not None and spend.remaining() <= 0:  # type: ignore[operator]
                raise RunStopped("over_budget", "the network reached its budget")
            if record.status != "succeeded":
                raise NodeFailure(f"workflow {workflow_id!r} {record.status}", code=f"workflow_{record.status}",
                                  retryable=False)
            return NodeResult(record.outputs or {})

        compiled, graph = self._compile(manifest, run_one)
        plans.update(compiled)
        total = CostEstimate()
        for plan in compiled.values():
            total = total + plan.estimate
        check_fits(total, spend, f"network {manifest.name!r}")
        ctx = RunContext(events.run_id, self.orc.services, events, Spend(), self.orc.runner,
                         globals=manifest.global_)
        status = "succeeded"
        try:
            await self.orc.runner.run_graph(graph, Scope({"global": manifest.global_}), ctx)
        except RunStopped as exc:
            status = exc.status
        if status == "succeeded" and any(r["status"] != "succeeded" for r in results.values()):
            status = "failed"
        return {"network": manifest.name, "status": status, "cost_usd": spend.cost_usd, "workflows": results}

    def _compile(self, manifest: NetworkManifest, execute: NodeExecutor) -> tuple[dict[str, Plan], Graph]:
        issues: list[ValidationIssue] = []
        ids = [w.id for w in manifest.workflows]
        known = set(ids)
        plans: dict[str, Plan] = {}
        nodes: dict[str, PlanNode] = {}
        deps: dict[str, tuple[str, ...]] = {}
        for workflow in manifest.workflows:
            try:
                plans[workflow.id] = self._resolve(workflow.ref)
            except BlueprintInvalid as exc:
                issues.extend(e.model_copy(update={"node_id": workflow.id}) for e in exc.report.errors)
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
            for name in compiled.names - {"global"}:
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
            import graphlib

            graphlib.TopologicalSorter(deps).prepare()
        except graphlib.CycleError as exc:
            raise BlueprintInvalid(ValidationReport(ok=False, errors=[ValidationIssue(
                code="cycle", message="workflow cycle: " + " → ".join(exc.args[1]), field="after")])) from None
        return plans, graph

    def _resolve(self, ref: str) -> Plan:
        """A `ref`: a registered workflow, a blueprint file beside a local manifest, or module:function."""
        if ref in self.orc.registry.workflows:
            return plan_for(self.orc.services, ref)
        if ref.endswith((".json", ".yaml", ".yml")):
            if self.base_dir is None:
                raise _invalid("unknown_workflow", f"file refs ({ref!r}) are allowed only in manifests loaded from a local file")
            path = (self.base_dir / ref).resolve()
            if not path.is_relative_to(self.base_dir):
                raise _invalid("forbidden", f"{ref!r} is outside the manifest's folder")
            return compile_plan(path, self.orc.services)
        if ":" in ref and not self.from_client:
            module_name, _, attr = ref.partition(":")
            try:
                factory = getattr(importlib.import_module(module_name), attr)
            except (ImportError, AttributeError) as exc:
                raise _invalid("unknown_workflow", f"cannot import {ref!r}: {exc}") from None
            return compile_plan(factory(), self.orc.services)
        raise _invalid("unknown_workflow", f"no workflow named {ref!r}", nearest(ref, self.orc.registry.workflows))


def _invalid(code: str, message: str, suggestion: str | None = None) -> BlueprintInvalid:
    return BlueprintInvalid(ValidationReport(ok=False, errors=[ValidationIssue(code=code, message=message, suggestion=suggestion)]))


async def _never_run(call: NodeCall) -> NodeResult:
    raise NodeFailure("a network being validated runs nothing", code="internal", retryable=False)
