"""The workflows an orchestrator knows: blueprints validated, compiled, registered, kept in the run store and restored."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ice_mcp.blueprint.issues import ValidationIssue, ValidationReport, nearest
from ice_mcp.blueprint.models import Blueprint
from ice_mcp.blueprint.pinning import pin
from ice_mcp.core.blueprints import check_blueprint, compile_plan
from ice_mcp.core.effects import graph_effects
from ice_mcp.core.executor import NodeType
from ice_mcp.core.plan import Plan
from ice_mcp.direct import agent_document
from ice_mcp.errors import BlueprintInvalid, IceError, UnknownName
from ice_mcp.run_handles import PlanCache
from ice_mcp.services import Services
from ice_mcp.store.base import RunStorage, StoredRun
from ice_mcp.store.records import NETWORK_ID_PREFIX
from ice_mcp.tools.registry import Registry
from ice_mcp.types import EFFECTFUL, Effects

logger = logging.getLogger("ice_mcp.orchestrator")  # the orchestrator's log, as before the catalogue had a module
Target = str | Blueprint | Mapping[str, Any] | Path
MAX_EFFECTS_DEPTH = 8  # workflows running workflows deeper than this may do anything, as far as hints go


class Catalogue:
    """The registry's workflows and the plans compiled for them (dropped whenever the registry changes),
    with the versions of those registered at run time kept in the run store (`store`, when there is one)."""

    def __init__(self, registry: Registry, services: Services, node_types: Mapping[str, NodeType],
                 unavailable_node_types: Mapping[str, str], store: RunStorage | None) -> None:
        self.registry = registry
        self._services = services
        self._node_types = node_types
        self._unavailable = unavailable_node_types
        self._store = store
        self._plans = PlanCache()
        self._agent_plans: dict[str, Plan] = {}
        registry.subscribe(self._registry_changed)

    def _registry_changed(self, kind: str, name: str) -> None:
        # A tool or workflow that changed may change what a cached plan's checks said: compile again.
        self._plans.clear()
        self._agent_plans.clear()

    def workflow_effects(self, name: str) -> Effects:
        """What running a registered workflow may do, from what its nodes' types declare (unknown: anything)."""
        return _EffectsReader(self.registry, self._node_types).workflow_effects(name)

    # -- plans ----------------------------------------------------------------------------------------

    def validate(self, source: Target) -> ValidationReport:
        """Every problem at once, as structured issues (each with the document path it concerns, and its line
        and column when `source` is text), plus a cost estimate. Never raises."""
        report = check_blueprint(source, self._services, self._node_types, self._unavailable)[0]
        if isinstance(source, Mapping) or (isinstance(source, str) and _is_document_text(source)):
            return pin(report, source)
        return report

    def compile(self, source: Target) -> Plan:
        """The plan of a blueprint; raises BlueprintInvalid. A Blueprint object is compiled once."""
        if isinstance(source, Blueprint):
            plan = self._plans.get(source)
            if plan is None:
                plan = compile_plan(source, self._services, self._node_types, self._unavailable)
                self._plans.put(source, plan)
            return plan
        return compile_plan(source, self._services, self._node_types, self._unavailable)

    def plan(self, target: Target) -> Plan:
        """The plan of a registered workflow's name, or of a blueprint; raises UnknownName or BlueprintInvalid."""
        if isinstance(target, str) and target in self.registry.workflows:
            return self.workflow_plan(target)
        if isinstance(target, str) and _is_name(target):
            raise UnknownName("workflow", target, nearest(target, self.registry.workflows))
        return self.compile(target)

    def workflow_plan(self, name: str) -> Plan:
        """A registered workflow's plan, compiled on first use and kept with it; raises UnknownName."""
        entry = self.registry.workflow(name)
        if entry.plan is None:
            entry.plan = self.compile(entry.blueprint)
        return entry.plan

    def agent_plan(self, name: str) -> Plan:
        """The one-node plan asking a registered agent, compiled once; raises UnknownName."""
        plan = self._agent_plans.get(name)
        if plan is None:
            self.registry.agent(name)
            plan = self._agent_plans[name] = self.compile(agent_document(name))
        return plan

    def stored_plan(self, stored: StoredRun) -> Plan:
        """The plan a stored run ran, compiled again (to resume or retry it)."""
        if stored.record.run_id.startswith(NETWORK_ID_PREFIX):
            raise IceError("a network run is not resumed or retried as one run: after a restart its workflows' "
                           "runs resume but the workflows after them do not start; run the network again",
                           code="network_lost")
        if stored.blueprint is not None:
            return self.compile(stored.blueprint)
        return self.workflow_plan(stored.record.workflow)  # written before runs kept their blueprint

    # -- registration ---------------------------------------------------------------------------------

    def register_blueprint(self, source: Target | Plan, *, origin: str = "runtime", version: int | None = None,
                           text: str | None = None, prepare: bool = True) -> Blueprint:
        """Register a workflow, replacing one of the same name; one registered at run time
        (`origin="runtime"`) is kept in the store as a new version unless it is the same, with the document
        `text` it came from (JSON/YAML text given as `source` is its own). Raises BlueprintInvalid.
        `prepare: False`: its templates' code is generated at their first render (checked all the same)."""
        plan = source if isinstance(source, Plan) else self.compile(source)
        if prepare:
            plan.prepare()
        if text is None and isinstance(source, str) and _is_document_text(source):
            text = source
        if origin == "runtime" and version is None and self._store is not None:
            version = self._store_version(plan, text)
        plan.version = version
        entry = self.registry.add_workflow(plan.blueprint, origin)
        entry.plan, entry.version = plan, version
        return plan.blueprint

    def _store_version(self, plan: Plan, text: str | None) -> int:
        assert self._store is not None
        name, source = plan.name, plan.source()
        versions = self._store.blueprint_versions(name)
        if (versions and versions[-1].source == source and text in (None, versions[-1].text)
                and name in self.registry.workflows):
            return versions[-1].version  # the same blueprint (and text) again: no new version
        return self._store.save_blueprint(name, source, text)

    def remove_workflow(self, name: str) -> bool:
        """Unregister a workflow; one registered at run time is deleted from the store for good."""
        removed = self.registry.remove("workflow", name)
        if self._store is not None:
            removed = self._store.delete_blueprint(name) or removed
        return removed

    def load_blueprints(self, folder: Path | str) -> list[ValidationIssue]:
        """Register every blueprint in a folder; returns the problems of those that failed."""
        problems: list[ValidationIssue] = []
        paths = sorted(p for p in Path(folder).glob("*") if p.suffix in (".json", ".yaml", ".yml"))
        pending = list(paths)
        # Blueprints may use each other as workflow nodes: retry until no more register.
        while pending:
            failed: list[tuple[Path, BlueprintInvalid]] = []
            for path in pending:
                try:
                    # At start: code generated when first rendered, not before the server's first answer.
                    self.register_blueprint(path, origin=str(path), prepare=False)
                except BlueprintInvalid as exc:
                    failed.append((path, exc))
            if len(failed) == len(pending):
                for path, invalid in failed:
                    problems.extend(e.model_copy(update={"message": f"{path.name}: {e.message}"})
                                    for e in invalid.report.errors)
                break
            pending = [path for path, _ in failed]
        return problems

    # -- the versions kept in the store ---------------------------------------------------------------

    def restore_blueprints(self) -> list[str]:
        """Register the blueprints kept in the store (their current versions); returns their names."""
        restored = []
        for stored in self._store.blueprints() if self._store is not None else []:
            try:
                self.register_blueprint(stored.source, version=stored.version)
            except IceError as exc:
                logger.warning("kept blueprint %s v%d not restored: %s", stored.name, stored.version, exc.message)
                continue
            restored.append(stored.name)
        return restored

    def sync_blueprints(self, names: set[str] | None = None) -> None:
        """Take the store's current versions of registered blueprints (`names`, or all) that another
        process registered, re-registered or deleted; the registry's listeners tell this server's clients."""
        assert self._store is not None
        current = {b.name: b for b in self._store.blueprints() if names is None or b.name in names}
        runtime = {name for name, entry in self.registry.workflows.items() if entry.source == "runtime"}
        for name in sorted((runtime if names is None else names) - set(current)):
            if name in runtime:
                self.registry.remove("workflow", name)
        for name, stored in current.items():
            entry = self.registry.workflows.get(name)
            if entry is not None and entry.version == stored.version:
                continue
            try:
                self.register_blueprint(stored.source, version=stored.version)
            except IceError as exc:
                logger.warning("kept blueprint %s v%d not taken: %s", name, stored.version, exc.message)


def _is_name(text: str) -> bool:
    return text.isidentifier() and "\n" not in text


def _is_document_text(source: str) -> bool:
    """JSON or YAML text rather than a file's path or a workflow's name (as `read_document` tells them apart)."""
    return "\n" in source or source.lstrip().startswith(("{", "["))


class _EffectsReader:
    """The tools and workflows a node's effects may name, read from the registry, nested workflows included."""

    def __init__(self, registry: Registry, node_types: Mapping[str, NodeType]) -> None:
        self._registry, self._node_types, self._depth = registry, node_types, 0

    def tool_effects(self, name: str) -> Effects | None:
        entry = self._registry.tools.get(name)
        return None if entry is None else entry.annotations.effects()

    def workflow_effects(self, name: str) -> Effects:
        entry = self._registry.workflows.get(name)
        if entry is None or self._depth > MAX_EFFECTS_DEPTH:
            return EFFECTFUL
        self._depth += 1
        try:
            return graph_effects(entry.blueprint.nodes, self._node_types, self)
        finally:
            self._depth -= 1
