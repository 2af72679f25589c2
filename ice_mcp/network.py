"""Network manifests: several workflows with `after` prerequisites, run as one graph of runs.

Each workflow is a node of a synthetic graph driven by the same scheduler and runner as a
blueprint; a failed workflow skips its dependents only. A network run has an id, so a caller
that stops waiting can follow it (`run_status` / `run_result` take it like a run id). On an
engine that runs networks whole (Temporal: a workflow of child workflows) this process only checks,
keeps and hands over the network, then follows its record.
"""

from __future__ import annotations

import asyncio
import importlib
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ice_mcp.blueprint.issues import CostEstimate, ValidationIssue, ValidationReport, nearest
from ice_mcp.blueprint.limits import BlueprintLimits
from ice_mcp.blueprint.loading import load_network
from ice_mcp.blueprint.models import NetworkManifest
from ice_mcp.core.context import CALL_TRIGGER, RunContext, Spend, check_fits
from ice_mcp.core.executor import NodeCall, NodeExecutor
from ice_mcp.core.networks import keep_network, member_ended, network_graph, network_status
from ice_mcp.core.plan import Graph, Plan
from ice_mcp.core.templates import Scope
from ice_mcp.desks import RunStarter
from ice_mcp.engines.base import NetworkLaunch
from ice_mcp.errors import (
    BlueprintInvalid,
    IceError,
    NodeFailure,
    RunStopped,
    UnknownName,
)
from ice_mcp.hosts import HasEngine, HasOwner, HasRegistry, HasRunner, HasServices, HasSettings
from ice_mcp.principals import acting_as, may_see, owned_key
from ice_mcp.store.base import Leases, RunRecords
from ice_mcp.store.events import Event, EventLog
from ice_mcp.store.records import NETWORK_ID_PREFIX, NodeRecord, RunRecord
from ice_mcp.types import NodeResult

if TYPE_CHECKING:
    from ice_mcp.catalogue import Target
    from ice_mcp.run_handles import ExpiringKeys
    from ice_mcp.schedules.desk import Schedules

__all__ = ["NETWORK_ID_PREFIX", "ManifestSource", "NamedNetwork", "NetworkHandle", "NetworkRunner", "NetworkRuns",
           "network_result"]
ManifestSource = NetworkManifest | str | Path | Mapping[str, Any]
HAND_OVER_SECONDS = 10.0  # how long an answer about a network waits for the engine that runs it to have it


@dataclass(frozen=True, slots=True)
class NamedNetwork:
    """A network manifest kept by name (`Orchestrator.register_network`), with the folder its file refs are in."""

    manifest: NetworkManifest
    base_dir: Path | None


class NetworkHandle:
    """A network run in progress (or finished): its id, its result so far, and a way to wait or cancel."""

    def __init__(self, network_id: str, name: str, principal: str | None = None) -> None:
        self.network_id = network_id
        self.name = name
        self.principal = principal  # who started it (its workflows' runs are theirs too)
        self.status = "running"
        self.cost_usd = 0.0
        self.workflows: dict[str, dict[str, Any]] = {}
        self.task: asyncio.Task[dict[str, Any]] | None = None
        # Set when an engine runs it whole (Temporal): its hand-over, its record as kept there, its cancel.
        self.started: asyncio.Future[bool] | None = None
        self.kept: Callable[[], RunRecord | None] | None = None
        self.stop: Callable[[], bool] | None = None

    @property
    def done(self) -> bool:
        return self.task is None or self.task.done()

    def result(self) -> dict[str, Any]:
        """`{"network", "network_id", "status", "cost_usd", "workflows": {id: {status, run_id, outputs, error}}}`."""
        if self.kept is not None and not self.done and (record := self.kept()) is not None:
            self.take(record)  # run elsewhere: its record says where it stands
        return {"network": self.name, "network_id": self.network_id, "status": self.status,
                "cost_usd": self.cost_usd, "workflows": {k: dict(v) for k, v in self.workflows.items()}}

    def take(self, record: RunRecord) -> None:
        """Stand as the network's kept record says."""
        result = network_result(record)
        self.status, self.cost_usd, self.workflows = result["status"], result["cost_usd"], result["workflows"]

    async def wait(self, timeout: float | None = None) -> dict[str, Any]:
        """The result once the network ends, or as it stands after `timeout` seconds (it goes on)."""
        if self.started is not None and not self.started.done():
            # Not answered before the engine has it: from then on it outlives this process.
            await asyncio.wait({self.started}, timeout=HAND_OVER_SECONDS)
        if self.task is not None and not self.task.done():
            await asyncio.wait({self.task}, timeout=timeout)
        return self.result()

    def cancel(self) -> bool:
        if self.stop is not None:  # where it runs: its end comes back through the task
            return not self.done and self.stop()
        return self.task is not None and self.task.cancel()

    def detach(self) -> None:
        """This process stops following it (a server stopping): a network it runs stops (another server resumes
        it); one an engine runs goes on there."""
        if self.task is not None:
            self.task.cancel()


def network_result(record: RunRecord) -> dict[str, Any]:
    """A network run as the store keeps it (another process runs it, or ran it), in `NetworkHandle.result()`'s shape."""
    workflows = {wid: {"status": node.status, "run_id": (node.output or {}).get("run_id"),
                       "outputs": (node.output or {}).get("outputs"), "error": node.error}
                 for wid, node in record.nodes.items()}
    return {"network": record.workflow, "network_id": record.run_id, "status": record.status,
            "cost_usd": record.cost_usd, "workflows": workflows}


class NetworkStore(RunRecords, Leases, Protocol):
    """What a network run keeps in the run store: its record, under this process's lease."""


class NetworkHost(RunStarter, HasSettings, HasOwner, HasEngine, HasServices, HasRunner, HasRegistry, Protocol):
    """What a network runner asks of its orchestrator: its workflows resolved and started, the runner and services
    its graph runs on, the engine that may run it whole, the store it is kept in, the caller's budget."""

    @property
    def store(self) -> NetworkStore | None: ...
    def workflow_plan(self, name: str) -> Plan: ...
    def compile(self, source: Target) -> Plan: ...
    def caller_spend(self, caller: str | None = None) -> Spend | None: ...


class NetworkRunner:
    def __init__(self, orchestrator: NetworkHost, *, from_client: bool, base_dir: Path | None) -> None:
        self.orc = orchestrator
        self.from_client = from_client
        self.base_dir = base_dir

    def load(self, source: ManifestSource) -> NetworkManifest:
        if isinstance(source, Path | str) and self.base_dir is None and not self.from_client:
            path = Path(source)
            if path.suffix in (".yaml", ".yml", ".json") and path.is_file():
                self.base_dir = path.resolve().parent
        return load_network(source, BlueprintLimits.from_settings(self.orc.settings))

    def check(self, source: ManifestSource) -> None:
        """Raise BlueprintInvalid with every problem of the manifest; run nothing."""
        self._compile(self.load(source), _never_run)

    def start(self, manifest: NetworkManifest, *, caller: str | None = None,
              on_event: Callable[[Event], None] | None = None, trigger: Mapping[str, Any] | None = None,
              idempotency_key: str | None = None, resume: RunRecord | None = None) -> NetworkHandle:
        """Check the manifest and its budget, then run it in a task; raises BlueprintInvalid or IceError.
        With a run store the network run is kept there too (every process sees its state), and a key another
        process already started a network with returns that one's state instead of starting another.
        `resume`: the kept record of a network whose server died: it runs again under its id, and each of its
        workflows attaches to the run it had started (their keys are the network's), so nothing runs twice.
        An engine that runs networks whole (Temporal) is handed the network once it is kept: no server runs it."""
        network_id = resume.run_id if resume is not None else NETWORK_ID_PREFIX + uuid.uuid4().hex
        handle = NetworkHandle(network_id, manifest.name, caller)
        handle.workflows = {w.id: {"status": "skipped", "run_id": None, "outputs": None, "error": None}
                            for w in manifest.workflows}
        plans: dict[str, Plan] = {}
        spend = Spend(budget_usd=manifest.budget_usd, parent=self.orc.caller_spend(caller))
        events = EventLog(handle.network_id, [on_event] if on_event else [])
        seen = dict(trigger) if trigger is not None else dict(CALL_TRIGGER)
        engine = self.orc.engine
        kept = _Kept(self.orc, handle, manifest, trigger, self.base_dir, resume, owner=engine.network_owner)

        async def run_one(call: NodeCall) -> NodeResult:
            workflow_id = call.node.id
            result = handle.workflows[workflow_id]
            result["status"] = "running"
            try:
                with acting_as(None):  # the key is the network's own (a resumed network attaches to its runs)
                    run = await self.orc.start(plans[workflow_id], call.render("inputs"), globals=manifest.global_,
                                               parent_spend=spend, trigger=trigger, caller=caller,  # the caller's runs
                                               idempotency_key=f"{handle.network_id}:{workflow_id}"
                                               if self.orc.store is not None else None)
            except IceError as exc:  # refused before it ran (its inputs, its workflow's limits, the budget)
                result.update(status="failed", error=exc.as_dict())
                kept.save()
                raise
            result["run_id"] = run.run_id
            kept.save()
            record = await run.wait()
            result.update(status=record.status, outputs=record.outputs, error=record.error)
            kept.save()
            return member_ended(workflow_id, record, spend)

        compiled, graph = self._compile(manifest, run_one)
        plans.update(compiled)
        total = CostEstimate()
        for plan in compiled.values():
            total = total + plan.estimate
        check_fits(total, spend, f"network {manifest.name!r}")
        if resume is None and (holder := kept.create(idempotency_key, graph.shape.deps)) is not None:
            stored = self.orc.store.get(holder.network_id) if self.orc.store is not None else None
            if engine.network_owner is None or stored is None or stored.done:
                return holder
            # The key's network may have lost its server before it was handed over: hand it over (at most once).
            return self._hand_over(holder, stored, manifest, compiled, seen)
        if engine.network_owner is not None:
            return self._hand_over(handle, kept.record, manifest, compiled, seen)
        ctx = RunContext(events.run_id, self.orc.services, events, Spend(), self.orc.runner, self.orc.workflow_plan,
                         globals=manifest.global_, trigger=seen)

        async def run() -> dict[str, Any]:
            stopped = None
            try:
                await self.orc.runner.run_graph(graph, Scope({"global": manifest.global_, "trigger": seen}), ctx)
            except RunStopped as exc:
                stopped = exc.status
            except asyncio.CancelledError:
                handle.status, handle.cost_usd = "cancelled", spend.cost_usd
                kept.save()
                raise
            handle.status, handle.cost_usd = network_status(stopped, handle.workflows), spend.cost_usd
            kept.save()
            return handle.result()

        handle.task = asyncio.get_running_loop().create_task(run(), name=f"ice_mcp-{handle.network_id}")
        return handle

    def _hand_over(self, handle: NetworkHandle, record: RunRecord, manifest: NetworkManifest,
                   plans: dict[str, Plan], trigger: dict[str, Any]) -> NetworkHandle:
        """Give the network to the engine that runs it whole (its members inside it): the handle reads its record
        in the store while it runs, takes its end from the engine, and cancels it there."""
        store = self.orc.store
        handed = self.orc.engine.launch_network(NetworkLaunch(
            record, manifest.model_dump(mode="json", by_alias=True, exclude_none=True), plans,
            caller=handle.principal, trigger=trigger))

        async def follow() -> dict[str, Any]:
            handle.take(await handed.ended)
            return handle.result()

        handle.started, handle.stop = handed.started, handed.cancel
        handle.kept = (lambda: store.get(handle.network_id)) if store is not None else None
        handle.task = asyncio.get_running_loop().create_task(follow(), name=f"ice_mcp-{handle.network_id}")
        return handle

    def _compile(self, manifest: NetworkManifest, execute: NodeExecutor) -> tuple[dict[str, Plan], Graph]:
        """Each workflow's plan (its ref resolved here) and the network's graph; every problem at once."""
        plans: dict[str, Plan] = {}
        issues: dict[str, list[ValidationIssue]] = {}
        for workflow in manifest.workflows:
            try:
                plans[workflow.id] = self._resolve(workflow.ref)
            except BlueprintInvalid as exc:
                issues[workflow.id] = [e.model_copy(update={"node_id": workflow.id}) for e in exc.report.errors]
        return plans, network_graph(manifest, execute, issues)

    def _resolve(self, ref: str) -> Plan:
        """A `ref`: a registered workflow, a blueprint file beside a local manifest, or module:function."""
        if ref in self.orc.registry.workflows:
            return self.orc.workflow_plan(ref)
        if ref.endswith((".json", ".yaml", ".yml")):
            if self.base_dir is None:
                raise _invalid("unknown_workflow", f"file refs ({ref!r}) are allowed only in manifests loaded from a local file")
            path = (self.base_dir / ref).resolve()
            if not path.is_relative_to(self.base_dir):
                raise _invalid("forbidden", f"{ref!r} is outside the manifest's folder")
            return self.orc.compile(path)
        if ":" in ref and not self.from_client:
            module_name, _, attr = ref.partition(":")
            try:
                factory = getattr(importlib.import_module(module_name), attr)
            except (ImportError, AttributeError) as exc:
                raise _invalid("unknown_workflow", f"cannot import {ref!r}: {exc}") from None
            return self.orc.compile(factory())
        raise _invalid("unknown_workflow", f"no workflow named {ref!r}", nearest(ref, self.orc.registry.workflows))


class _Kept:
    """A network run's record in the run store (when there is one): its workflows as nodes, kept as they change."""

    def __init__(self, orc: NetworkHost, handle: NetworkHandle, manifest: NetworkManifest,
                 trigger: Mapping[str, Any] | None, base_dir: Path | None, resumed: RunRecord | None,
                 owner: str | None = None) -> None:
        self._store, self._me, self._handle = orc.store, orc.owner, handle
        # Its owner: an engine that runs it whole (never taken over), or this process, under its lease.
        self._owner, self._leased = owner or orc.owner.owner_id, owner is None
        self._manifest = manifest
        # What a server that takes the run over needs to run it again: the manifest and where its files are.
        kept = {"manifest": manifest.model_dump(mode="json", by_alias=True, exclude_none=True),
                "base_dir": None if base_dir is None else str(base_dir)}
        self.record = resumed or RunRecord(handle.network_id, manifest.name, kept, started_at=time.time(),
                                           trigger=dict(trigger) if trigger is not None else None,
                                           principal=handle.principal,
                                           nodes={w.id: NodeRecord() for w in manifest.workflows})
        self.record.status = "running"

    def create(self, idempotency_key: str | None, deps: Mapping[str, tuple[str, ...]]) -> NetworkHandle | None:
        """Keep the new run; a network another process started with the same key comes back instead. Its graph
        is kept as a blueprint of workflow nodes, so the run view draws it."""
        if self._store is None:
            return None
        drawing = {"schema_version": "1", "name": self._manifest.name, "description": self._manifest.description,
                   "nodes": [{"id": w.id, "type": "workflow", "workflow_ref": w.ref, "dependencies": list(deps[w.id])}
                             for w in self._manifest.workflows]}
        if self._leased:
            self._store.register_owner(self._me)  # others take the run for lost only once this process's lease is
        holder = self._store.create(self.record, idempotency_key=idempotency_key, owner=self._owner,
                                    blueprint=drawing)
        stored = self._store.get(holder) if holder is not None else None
        if holder is None or stored is None:
            return None
        other = NetworkHandle(holder, stored.workflow, stored.principal)
        result = network_result(stored)
        other.status, other.cost_usd, other.workflows = result["status"], result["cost_usd"], result["workflows"]
        return other

    def save(self) -> None:
        if self._store is None:
            return
        handle = self._handle
        keep_network(self.record, handle.workflows, handle.status, handle.cost_usd, time.time())
        self._store.save(self.record, owner=self._owner)


def _invalid(code: str, message: str, suggestion: str | None = None) -> BlueprintInvalid:
    return BlueprintInvalid(ValidationReport(ok=False, errors=[ValidationIssue(code=code, message=message, suggestion=suggestion)]))


async def _never_run(call: NodeCall) -> NodeResult:
    raise NodeFailure("a network being validated runs nothing", code="internal", retryable=False)


class NetworkRuns:
    """The orchestrator's network calls (a mixin `Orchestrator` inherits): manifests kept by name, network runs
    started, followed and looked up here or, another process's, in the run store."""

    networks: dict[str, NamedNetwork]  # manifests kept by name (a folder's networks/): schedules run them
    _networks: ExpiringKeys[NetworkHandle]  # network runs started here, by id
    _network_keys: ExpiringKeys[NetworkHandle]  # and by idempotency key
    _network_host: NetworkHost  # the orchestrator itself, as its network runners see it (it sets this)
    store: RunRecords | None
    schedules: Schedules

    def register_network(self, source: ManifestSource) -> NetworkManifest:
        """Check a network manifest (a file's refs resolve beside it) and keep it by name, so schedules can run
        it; its `schedules:` are kept in the store like a blueprint's. Raises BlueprintInvalid or IceError."""
        runner = NetworkRunner(self._network_host, from_client=False, base_dir=None)
        manifest = runner.load(source)
        runner.check(manifest)
        self.networks[manifest.name] = NamedNetwork(manifest, runner.base_dir)
        self.schedules.declare(manifest.name, manifest.schedules, kind="network")
        return manifest

    def resume_network(self, record: RunRecord) -> NetworkHandle:
        """Run again a network whose server died, under its id: finished workflows answer from their runs, the
        one in flight is followed (or taken over), the rest start. IceError if its record kept no manifest."""
        kept = record.inputs.get("manifest")
        if not isinstance(kept, dict):
            raise IceError("this network run was kept without its manifest (before networks were durable): its "
                           "workflows' runs resume, the workflows after them do not start; run it again",
                           code="network_lost")
        base = record.inputs.get("base_dir")
        runner = NetworkRunner(self._network_host, from_client=False, base_dir=Path(base) if base else None)
        handle = runner.start(runner.load(kept), caller=record.principal, trigger=record.trigger, resume=record)
        self._networks.put(handle.network_id, handle)
        return handle

    def validate_network(self, manifest: ManifestSource, *, from_client: bool = True,
                         base_dir: Path | None = None) -> ValidationReport:
        """Every problem of a network manifest (refs, `after`, templates, cycles); never raises."""
        try:
            NetworkRunner(self._network_host, from_client=from_client, base_dir=base_dir).check(manifest)
        except BlueprintInvalid as exc:
            return exc.report
        except IceError as exc:
            return ValidationReport(ok=False, errors=[ValidationIssue(code=exc.code, message=exc.message)])
        return ValidationReport(ok=True)

    def start_network(self, manifest: ManifestSource, *, from_client: bool = True, base_dir: Path | None = None,
                      on_event: Callable[[Event], None] | None = None, idempotency_key: str | None = None,
                      caller: str | None = None, trigger: Mapping[str, Any] | None = None) -> NetworkHandle:
        """Start a network run and return at once (`network_id` follows it); raises BlueprintInvalid or
        IceError. The same idempotency key attaches to the same network run (another process's, with a store).
        A registered network's name runs it; `trigger` is what its workflows' templates see (a schedule's slot)."""
        idempotency_key = owned_key(idempotency_key)
        if idempotency_key and (existing := self._network_keys.get(idempotency_key)) is not None:
            return existing
        if isinstance(manifest, str) and manifest.isidentifier():  # a name, not YAML text or a path
            named = self.networks.get(manifest)
            if named is None:  # another server may serve it: this one cannot start it
                raise UnknownName("network", manifest, nearest(manifest, self.networks))
            manifest, base_dir, from_client = named.manifest, named.base_dir, False
        runner = NetworkRunner(self._network_host, from_client=from_client, base_dir=base_dir)
        handle = runner.start(runner.load(manifest), caller=caller, on_event=on_event, trigger=trigger,
                              idempotency_key=idempotency_key)
        if handle.task is None:  # another process runs it (the key was its): the store follows it, not this one
            return handle
        self._networks.put(handle.network_id, handle)
        if idempotency_key:
            self._network_keys.put(idempotency_key, handle)
        return handle

    async def run_network(self, manifest: ManifestSource, *, from_client: bool = True, base_dir: Path | None = None,
                          on_event: Callable[[Event], None] | None = None, caller: str | None = None
                          ) -> dict[str, Any]:
        """Run a network to the end: `{"network", "network_id", "status", "cost_usd", "workflows"}`."""
        handle = self.start_network(manifest, from_client=from_client, base_dir=base_dir, on_event=on_event,
                                    caller=caller)
        try:
            return await handle.wait()
        except asyncio.CancelledError:
            handle.cancel()
            raise

    def get_network(self, network_id: str) -> NetworkHandle | None:
        """A network run started here (kept as long as idempotency keys, at least an hour; the latest 512)."""
        handle = self._networks.get(network_id) if network_id.startswith(NETWORK_ID_PREFIX) else None
        return handle if handle is not None and may_see(handle.principal) else None

    def network_status(self, network_id: str) -> dict[str, Any] | None:
        """A network run's result so far, from here or (another process's) from the run store."""
        if not network_id.startswith(NETWORK_ID_PREFIX):
            return None  # a workflow run's id: no store read
        if (handle := self.get_network(network_id)) is not None:
            return handle.result()
        record = self.store.get(network_id) if self.store is not None else None
        return network_result(record) if record is not None and may_see(record.principal) else None
