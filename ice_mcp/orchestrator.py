"""The service layer, the one API the MCP server, /rpc and the command line use: validate, register,
start, watch, cancel, retry and look up runs and networks.

The orchestrator wires everything below it: its registry, its node types (the executors the engine
runs), its services (LLM, sandboxes, memory) and its run store. Its catalogue of workflows lives in
`ice_mcp.catalogue`, the answers to `human` nodes in `ice_mcp.answers`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ice_mcp.answers import Answers
from ice_mcp.blueprint.issues import ValidationIssue, ValidationReport, nearest
from ice_mcp.blueprint.models import Blueprint
from ice_mcp.catalogue import Catalogue, Target
from ice_mcp.core.context import Sleep, Spend, check_fits
from ice_mcp.core.executor import NodeSet, NodeType, node_models
from ice_mcp.core.metrics import Metrics
from ice_mcp.core.plan import Plan
from ice_mcp.core.questions import Question, Questions
from ice_mcp.core.runner import Runner
from ice_mcp.direct import tool_plan
from ice_mcp.engines import Engine, Launch, PrometheusMetrics, open_engine
from ice_mcp.engines.base import RECENT_RUNS
from ice_mcp.errors import BlueprintInvalid, IceError, InputsInvalid, RateLimited, UnknownName
from ice_mcp.hooks.desk import Hooks
from ice_mcp.llm.service import LLMService
from ice_mcp.network import NETWORK_ID_PREFIX, NamedNetwork, NetworkHandle, NetworkRuns
from ice_mcp.nodes import builtin_node_types
from ice_mcp.notify.desk import Notifications
from ice_mcp.observability.tracing import begin_run
from ice_mcp.principals import isolated, may_see, owned_key
from ice_mcp.run_handles import ExpiringKeys, RunHandle, new_run_id
from ice_mcp.schedules.desk import Schedules
from ice_mcp.services import Services
from ice_mcp.settings import Settings
from ice_mcp.store.base import Owner, RunStorage, Signal, StoredRun
from ice_mcp.store.events import Event, EventLog, Listener
from ice_mcp.store.journal import Replay, replay_from_events
from ice_mcp.store.records import RunRecord, trigger_kind
from ice_mcp.store.sqlite import open_store
from ice_mcp.tools.builtin import register_builtin_tools
from ice_mcp.tools.registry import Registry
from ice_mcp.tools.upstream_config import load_configs
from ice_mcp.types import Effects
from ice_mcp.versions import BlueprintVersions

if TYPE_CHECKING:
    from ice_mcp.tools.upstream import Upstreams

logger = logging.getLogger(__name__)
RETENTION_SECONDS = 3600.0  # how often a server deletes the runs past ICE_MCP_RETENTION_DAYS


class Orchestrator(NetworkRuns, BlueprintVersions):
    """Everything a server or a script needs, wired explicitly.

    `registry`: the tools, agents and workflows it runs (default: a fresh one; the built-in tools are
    added unless `builtin_tools=False`). `node_types`: the executors it runs (default: the built-ins).
    `llm`: the LLM service (default: from the environment, on first use). `engine`: what runs the runs
    (default: `settings.engine`, the embedded engine unless it names another).
    """

    def __init__(self, *, registry: Registry | None = None, settings: Settings | None = None,
                 store: RunStorage | None = None, builtin_tools: bool = True, sleep: Sleep = asyncio.sleep,
                 node_types: Iterable[NodeType] | None = None, llm: LLMService | None = None,
                 engine: Engine | None = None) -> None:
        self.settings = settings or Settings.from_env()
        self.registry = registry if registry is not None else Registry()
        if builtin_tools:
            register_builtin_tools(self.registry)
        self.services = Services(self.registry, self.settings)
        if llm is not None:
            self.services.llm = llm
        builtins, unavailable = builtin_node_types()
        types = builtins if node_types is None else list(node_types)
        self.unavailable_node_types = {k: why for k, why in unavailable.items() if k not in {t.name for t in types}}
        self.node_types: dict[str, NodeType] = {node_type.name: node_type for node_type in types}
        if store is None and (self.settings.persist_runs or self.settings.state_url):
            store = open_store(self.settings.state_url, self.settings.data_dir,
                               idempotency_key_seconds=self.settings.idempotency_key_seconds)
        self.store: RunStorage | None = store
        self._catalogue = Catalogue(self.registry, self.services, self.node_types, self.unavailable_node_types, store)
        self.sleep = sleep  # backoff between retries; tests pass a recorder
        self.metrics = Metrics()
        self.prometheus = PrometheusMetrics(self.registry, self.services)  # its CollectorRegistry: GET /metrics
        self._watchers: list[Listener] = []  # told of every event of every run (a server's notifications)
        self.questions = Questions()  # where `human` nodes wait for answers
        self._answers = Answers(self)  # and where the answers arrive, here or from another process
        self.schedules = Schedules(self)  # kept in the run store; a server's firing loop starts their runs
        self.hooks = Hooks(self)  # webhooks kept in the run store; `serve --http` receives their deliveries
        self.notifications = Notifications(self)  # finished runs POSTed to targets through the store's outbox
        self.runner = Runner()
        self.owner = Owner.this_process(uuid.uuid4().hex)
        self.engine: Engine = engine or open_engine(self)
        ttl = self.settings.idempotency_key_seconds
        self._keys: ExpiringKeys[str] = ExpiringKeys(ttl)
        self._networks: ExpiringKeys[NetworkHandle] = ExpiringKeys(max(ttl, 3600.0), limit=RECENT_RUNS)
        self._network_keys: ExpiringKeys[NetworkHandle] = ExpiringKeys(ttl)
        self._network_host = self  # what its network runners ask of it (network.NetworkHost, checked by mypy)
        self.networks: dict[str, NamedNetwork] = {}  # manifests kept by name (a folder's networks/): schedules run them
        self._signals_task: asyncio.Task[None] | None = None
        self._retention_task: asyncio.Task[None] | None = None

    # -- blueprints and the catalogue ---------------------------------------

    def validate(self, source: Target) -> ValidationReport:
        """Every problem at once, as structured issues, plus a cost estimate. Never raises."""
        return self._catalogue.validate(source)

    def compile(self, source: Target) -> Plan:
        """The plan of a blueprint; raises BlueprintInvalid. A Blueprint object is compiled once."""
        return self._catalogue.compile(source)

    @property
    def node_models(self) -> NodeSet:
        """The node models its blueprints are parsed with: the built-in ones and its own node types' models."""
        return node_models(self.node_types.values())

    async def connect_upstream(self, config_files: Iterable[str | Path] = ()) -> Upstreams:
        """Use the tools of the MCP servers in these Claude Desktop-format files (and ICE_MCP_MCP_CONFIG) as
        `SERVER.TOOL`: connect to each now and register its tools (validation needs their schemas). A server
        that cannot be reached is logged and its tools stay unknown. Raises IceError(invalid_mcp_config).

        Call it before registering blueprints that use these tools; each process (a server, a worker) holds
        its own connections, closed with the orchestrator."""
        configs, warnings = load_configs(config_files)
        for warning in warnings:
            logger.warning("MCP config: %s", warning)
        from ice_mcp.tools.upstream import (
            Upstreams,  # the MCP client SDK: imported only when upstreams are used
        )

        upstreams = Upstreams(configs, self.registry, self.settings)
        if self.services.upstream is not None:
            await self.services.upstream.aclose()
        self.services.upstream = upstreams
        await upstreams.start()
        return upstreams

    def workflow_plan(self, name: str) -> Plan:
        """A registered workflow's plan, compiled on first use and kept with it; raises UnknownName."""
        return self._catalogue.workflow_plan(name)

    def workflow_effects(self, name: str) -> Effects:
        """What running a registered workflow may do (read-only, idempotent, open-world), from its node types."""
        return self._catalogue.workflow_effects(name)

    def register_blueprint(self, source: Target | Plan, *, origin: str = "runtime", version: int | None = None
                           ) -> Blueprint:
        """Validate and register a workflow (replacing one of the same name); raises BlueprintInvalid. Registered
        at run time (`origin="runtime"`), it is kept in the run store as a new version (versions.py: its history,
        diffs, rollbacks) and comes back when a server starts on the same data folder."""
        blueprint = self._catalogue.register_blueprint(source, origin=origin, version=version)
        self.schedules.declare(blueprint.name, blueprint.schedules)  # its `schedules:`, checked (ScheduleInvalid) and kept in the store
        return blueprint

    def remove_workflow(self, name: str) -> bool:
        """Unregister a workflow; one registered at run time is deleted from the store for good."""
        return self._catalogue.remove_workflow(name)

    def restore_blueprints(self) -> list[str]:
        """Register the blueprints kept in the store (their current versions); returns their names."""
        return self._catalogue.restore_blueprints()

    def load_blueprints(self, folder: Path | str) -> list[ValidationIssue]:
        """Register every blueprint in a folder, then the network manifests in its `networks/`; returns the
        problems of those that failed."""
        problems = self._catalogue.load_blueprints(folder)
        for entry in list(self.registry.workflows.values()):
            if entry.source != "runtime" and Path(entry.source).parent == Path(folder):
                try:
                    self.schedules.declare(entry.name, entry.blueprint.schedules)
                except IceError as exc:
                    problems.append(ValidationIssue(code=exc.code, message=f"{entry.name}: schedules: {exc.message}"))
        for path in sorted(Path(folder, "networks").glob("*")):
            if path.suffix in (".json", ".yaml", ".yml"):
                try:
                    self.register_network(path)
                except BlueprintInvalid as exc:
                    problems.extend(e.model_copy(update={"message": f"networks/{path.name}: {e.message}"})
                                    for e in exc.report.errors)
                except IceError as exc:
                    problems.append(ValidationIssue(code=exc.code, message=f"networks/{path.name}: {exc.message}"))
        return problems

    # -- runs ---------------------------------------------------------------

    async def start(
        self,
        target: Target | Plan,
        inputs: Mapping[str, Any] | None = None,
        *,
        idempotency_key: str | None = None,
        on_event: Listener | None = None,
        globals: Mapping[str, Any] | None = None,
        parent_spend: Spend | None = None,
        caller: str | None = None,
        trigger: Mapping[str, Any] | None = None,
    ) -> RunHandle:
        """Start a run and return at once. Raises BlueprintInvalid, InputsInvalid or UnknownName.

        `caller` (a hash of an MCP client's token) charges the run to that caller's budget; `trigger` is what
        started it (a schedule's slot...), kept on its record and seen by templates as `trigger`."""
        idempotency_key = owned_key(idempotency_key)
        existing = self._attach(idempotency_key, on_event)
        if existing is not None:
            return existing
        plan = target if isinstance(target, Plan) else self._plan(target)
        return self._begin(plan, inputs or {}, idempotency_key=idempotency_key, on_event=on_event, globals=globals,
                           parent_spend=parent_spend or self.caller_spend(caller), caller=caller, trigger=trigger)

    async def start_tool(self, name: str, arguments: Mapping[str, Any], *, idempotency_key: str | None = None,
                         on_event: Listener | None = None, caller: str | None = None) -> RunHandle:
        """Run one registered tool as a one-node run, without a blueprint; the tool checks the arguments
        (once). Raises UnknownName, or NodeFailure(invalid_arguments)."""
        idempotency_key = owned_key(idempotency_key)
        existing = self._attach(idempotency_key, on_event)
        if existing is not None:
            return existing
        entry = self.registry.tool(name)
        kwargs = entry.parse_arguments(dict(arguments))
        return self._begin(tool_plan(entry, kwargs, dict(arguments)), arguments, idempotency_key=idempotency_key,
                           on_event=on_event, parent_spend=self.caller_spend(caller), caller=caller)

    async def start_agent(self, name: str, inputs: Mapping[str, Any], *, idempotency_key: str | None = None,
                          on_event: Listener | None = None, caller: str | None = None) -> RunHandle:
        """Ask one registered agent (`inputs`: `{"input": text}`) as a one-node run whose plan is compiled
        once. Raises UnknownName or InputsInvalid."""
        idempotency_key = owned_key(idempotency_key)
        existing = self._attach(idempotency_key, on_event)
        if existing is not None:
            return existing
        return self._begin(self._catalogue.agent_plan(name), inputs, idempotency_key=idempotency_key,
                           on_event=on_event, parent_spend=self.caller_spend(caller), caller=caller)

    def _attach(self, key: str | None, on_event: Listener | None) -> RunHandle | None:
        """The run an idempotency key already started (its listener added), if any."""
        existing = self._by_key(key) if key else None
        existing = existing if existing is None or may_see(existing.record.principal) else None
        if existing is not None and on_event is not None and not existing.done:
            existing.subscribe(on_event)
        return existing

    def _begin(self, plan: Plan, inputs: Mapping[str, Any], *, idempotency_key: str | None,
               on_event: Listener | None, parent_spend: Spend | None, globals: Mapping[str, Any] | None = None,
               caller: str | None = None, trigger: Mapping[str, Any] | None = None) -> RunHandle:
        record = self.new_run(plan, inputs, idempotency_key=idempotency_key, parent_spend=parent_spend,
                              caller=caller, trigger=trigger)
        return self._launch(plan, record, None, idempotency_key=idempotency_key, on_event=on_event,
                            globals=globals, parent_spend=parent_spend, caller=caller)

    def new_run(self, plan: Plan, inputs: Mapping[str, Any], *, idempotency_key: str | None = None,
                parent_spend: Spend | None = None, caller: str | None = None,
                trigger: Mapping[str, Any] | None = None, engine: str | None = None) -> RunRecord:
        """What starting a run checks and holds before an engine runs it: the plan's estimate against
        `parent_spend`, its inputs (schema defaults filled in), its record (traced) and its admission under the
        workflow's `limits`. `engine`: the one that will run it, when not this orchestrator's (a Temporal
        network's workflow, begun on a worker). Raises IceError(over_budget), InputsInvalid or RateLimited."""
        check_fits(plan.estimate, parent_spend, plan.name)
        prepared, problems = plan.prepare_inputs(inputs)
        if problems:
            raise InputsInvalid("; ".join(f"{p['path']}: {p['message']}" for p in problems),
                                details={"errors": problems})
        record = RunRecord(run_id=new_run_id(), workflow=plan.name, inputs=prepared, started_at=time.time(),
                           workflow_version=plan.version, trigger=dict(trigger) if trigger is not None else None,
                           principal=caller)
        begin_run(record)
        self._admit(plan, record, idempotency_key, engine)
        return record

    def _admit(self, plan: Plan, record: RunRecord, idempotency_key: str | None, engine: str | None = None) -> None:
        """Hold the workflow's `limits` in the run store (shared by every process on it); raises RateLimited,
        or (on_limit: queue) the run is `queued` and the engine starts it in its turn. A key another process
        already started a run with attaches to that run and is not counted again."""
        limits = plan.blueprint.limits
        if limits is None or self.store is None:
            return
        if limits.on_limit == "queue":
            engine = engine or self.engine.name
            if engine != "embedded":  # its queue lives with the leases that keep it durable
                raise IceError(f"{plan.name}: on_limit 'queue' needs the embedded engine; with --engine "
                               f"{engine} use 'reject'", code="unsupported")
            record.status = "queued"
            return
        if idempotency_key and self.store.by_idempotency_key(idempotency_key):
            return
        wait = self.store.admit(plan.name, record.run_id, self.store.now(),
                                max_concurrent=limits.max_concurrent_runs, per_minute=limits.runs_per_minute)
        if wait is not None:
            raise RateLimited(f"{plan.name} is at its limit ({limits.words()}): try again in {wait:.1f} s",
                              wait)

    def _launch(self, plan: Plan, record: RunRecord, replay: Replay | None, *, idempotency_key: str | None = None,
                on_event: Listener | None = None, globals: Mapping[str, Any] | None = None,
                parent_spend: Spend | None = None, caller: str | None = None) -> RunHandle:
        """Hand a run (a new one, or a retry with `replay`) to the engine, which starts it at once."""
        handle = self.engine.launch(Launch(plan, record, replay, idempotency_key=idempotency_key,
                                           listeners=[on_event] if on_event is not None else [],
                                           globals=dict(globals or {}), parent_spend=parent_spend, caller=caller))
        if idempotency_key:
            self._keys.put(idempotency_key, handle.run_id)
        return handle

    def questions_listener(self, record: RunRecord) -> Listener:
        """Keeps the record's pending questions and its `input_required` status, and stores them at once
        (another process, or the next one, reads the question from there)."""
        return self._answers.listener(record)

    async def run(self, target: Target | Plan, inputs: Mapping[str, Any] | None = None, **options: Any) -> RunRecord:
        """Run to the end and return the record. Cancelling the caller cancels the run."""
        handle = await self.start(target, inputs, **options)
        try:
            return await handle.wait()
        except asyncio.CancelledError:
            handle.cancel()
            await asyncio.shield(handle.wait())
            raise

    def _plan(self, target: Target) -> Plan:
        return self._catalogue.plan(target)

    def _by_key(self, key: str) -> RunHandle | None:
        """The run an unexpired idempotency key started: here, or (kept in the store) by any process."""
        run_id = self._keys.get(key)
        if run_id is not None and (handle := self.engine.runs.get(run_id)) is not None:
            return handle
        if self.store is None:
            return None
        run_id = run_id or self.store.by_idempotency_key(key)
        stored = self.store.run(run_id) if run_id is not None else None
        if stored is None or time.time() - (stored.record.started_at or 0) > self._keys.ttl:
            return None  # no such key, or it expired: a new run
        return self._stored_handle(stored)

    def _stored_handle(self, stored: StoredRun) -> RunHandle:
        """A handle on a kept run: finished; or under way, which the engine follows (its owner died: the
        engine takes it over, so the same key resumes the same run)."""
        record = stored.record
        handle = self.engine.runs.get(record.run_id) or (None if record.done else self.engine.follow(stored))
        return handle or RunHandle(record, EventLog(record.run_id), None)

    def watch(self, run_id: str) -> RunHandle | None:
        """A run to wait on or follow, wherever it runs: this process's handle, or one following another
        process's run through the store; None for an unknown run (or another principal's)."""
        handle = self.engine.runs.get(run_id)
        if handle is not None or self.store is None:
            return handle if handle is None or may_see(handle.record.principal) else None
        stored = self.store.run(run_id)
        return None if stored is None or not may_see(stored.record.principal) else self._stored_handle(stored)

    def caller_spend(self, caller: str | None = None) -> Spend | None:
        """The running spend of a caller against `caller_budget_usd` (None: no caller, or no such budget)."""
        if caller is None or self.settings.caller_budget_usd is None:
            return None
        return self.engine.caller_spend(caller, self.settings.caller_budget_usd)

    # -- durable runs: leases, resume, retry -------------------------------------------------

    def recover_interrupted_runs(self) -> int:
        """At server start (inside the event loop): restore kept blueprints and let the engine take over
        the runs interrupted by a server that stopped (the embedded engine resumes them here)."""
        if self.store is None:
            return 0
        self.restore_blueprints()
        self._signals_task = asyncio.get_running_loop().create_task(self._signal_loop(), name="ice_mcp-signals")
        if self.settings.retention_days is not None:
            self._retention_task = asyncio.get_running_loop().create_task(
                self._retention_loop(self.settings.retention_days), name="ice_mcp-retention")
        return self.engine.recover()

    async def _retention_loop(self, days: float) -> None:
        """Every hour, delete the runs that ended more than `days` ago (ICE_MCP_RETENTION_DAYS)."""
        while True:
            try:
                if pruned := await asyncio.to_thread(self.prune_runs, days * 86400.0):
                    logger.info("retention: %d runs that ended over %g days ago deleted", pruned, days)
            except Exception:  # a store hiccup must not stop retention
                logger.warning("retention: pruning failed; again in an hour", exc_info=True)
            await asyncio.sleep(RETENTION_SECONDS)

    async def _signal_loop(self) -> None:
        """Act on what other processes on the store ask: cancel a run running here, take a changed blueprint."""
        assert self.store is not None
        while True:
            try:
                async with contextlib.aclosing(self.store.signals()) as signals:
                    async for signal in signals:
                        self._on_signal(signal)
            except Exception:  # a store hiccup must not stop the listening
                logger.warning("listening for signals from the store failed; again in a second", exc_info=True)
            await asyncio.sleep(1.0)

    def _on_signal(self, signal: Signal) -> None:
        assert self.store is not None
        if signal.kind == "cancel":
            if (network := self.get_network(signal.subject)) is not None:
                network.cancel()
            self.engine.cancel_here(signal.subject)
        elif signal.kind == "blueprint":
            self.sync_blueprints({signal.subject})
        elif signal.kind == "answer":
            self._answers.take_handed_over(signal.subject, signal.data)
        else:  # listening (again): catch up on what was missed meanwhile
            self.sync_blueprints()
            for handle in self.engine.runs.values():
                if not handle.done and self.store.cancel_requested(handle.run_id):
                    self.engine.cancel_here(handle.run_id)

    def sync_blueprints(self, names: set[str] | None = None) -> None:
        """Take the store's current versions of registered blueprints (`names`, or all) that another
        process registered, re-registered or deleted; the registry's listeners tell this server's clients."""
        self._catalogue.sync_blueprints(names)

    def stored_plan(self, stored: StoredRun) -> Plan:
        """The plan a stored run ran, compiled again (to resume or retry it)."""
        return self._catalogue.stored_plan(stored)

    async def retry(self, run_id: str, from_node: str | None = None, *, on_event: Listener | None = None,
                    caller: str | None = None) -> RunHandle:
        """A finished run again, as a new run that reuses every node it finished, except `from_node`
        (and what depends on it) and the nodes that failed; those run again."""
        handle = self.get_handle(run_id)
        if handle is not None and handle.plan is not None:
            record, plan, events = handle.record, handle.plan, [e.to_dict() for e in handle.events.events]
        else:
            stored = self.store.run(run_id) if self.store is not None else None
            if stored is None or self.store is None or not may_see(stored.record.principal):
                raise UnknownName("run", run_id, None)
            record, plan, events = stored.record, self.stored_plan(stored), self.store.events(run_id)
        if not record.done:
            raise IceError(f"run {run_id} is still {record.status}: cancel it first", code="run_not_finished")
        rerun: list[str] = []
        if from_node is not None:
            if from_node not in plan.graph.nodes:
                raise UnknownName("node", from_node, nearest(from_node, plan.graph.nodes))
            rerun = _downstream(plan, from_node)
        fresh = RunRecord(run_id=new_run_id(), workflow=plan.name, inputs=record.inputs, started_at=time.time(),
                          workflow_version=record.workflow_version, retry_of=run_id, principal=caller)
        begin_run(fresh)
        self._admit(plan, fresh, None)  # a retry is a new run: the workflow's limits hold for it too
        return self._launch(plan, fresh, replay_from_events(events).for_retry(run_id, rerun), on_event=on_event,
                            parent_spend=self.caller_spend(caller), caller=caller)

    async def sync_store(self) -> None:
        """Wait (in a thread, bounded) until every record and event queued for the run store is on disk."""
        if self.store is not None:
            await asyncio.to_thread(self.store.flush, 10.0)

    def watch_runs(self, listener: Listener) -> Callable[[], None]:
        """Hear every event of every run this orchestrator runs (synchronously); returns the unsubscribe."""
        self._watchers.append(listener)
        return lambda: self._watchers.remove(listener) if listener in self._watchers else None

    def tell_watchers(self, event: Event) -> None:
        if not self._watchers:  # told of every event of every run: most processes have no watcher
            return
        for watcher in list(self._watchers):
            try:
                watcher(event)
            except Exception:  # one watcher's bug must not keep the others from hearing
                logger.exception("run watcher failed on %s", event.type)

    # Every lookup by id answers another principal's run as it answers an unknown id (principals.may_see).

    def get_handle(self, run_id: str) -> RunHandle | None:
        handle = self.engine.runs.get(run_id)
        return handle if handle is not None and may_see(handle.record.principal) else None

    def get_run(self, run_id: str) -> RunRecord | None:
        handle = self.engine.runs.get(run_id)
        record = handle.record if handle is not None else self.store.get(run_id) if self.store is not None else None
        return record if record is not None and may_see(record.principal) else None

    def run_events(self, run_id: str) -> list[dict[str, Any]]:
        if self.get_run(run_id) is None:
            return []
        handle = self.engine.runs.get(run_id)
        if handle is not None:
            return [event.to_dict() for event in handle.events.events]
        return self.store.events(run_id) if self.store is not None else []

    def list_runs(self, *, status: str | None = None, workflow: str | None = None, limit: int = 50,
                  schedule_id: str | None = None) -> list[RunRecord]:
        """Recent runs, newest first; `schedule_id`: the runs that schedule started (raises unknown_schedule)."""
        if schedule_id is not None:
            found = [self.get_run(run_id) for run_id in self.schedules.run_ids(schedule_id)]
            return [r for r in found if r is not None and (status is None or r.status == status)
                    and (workflow is None or r.workflow == workflow)][:limit]
        owner = isolated()
        if self.store is not None:
            stored = {r.run_id: r for r in self.store.list(status=status, workflow=workflow, limit=limit,
                                                           principal=owner)}
        else:
            stored = {}
        live = [h.record for h in self.engine.runs.values()
                if (status is None or h.record.status == status) and (workflow is None or h.record.workflow == workflow)
                and may_see(h.record.principal)]
        merged = {**stored, **{r.run_id: r for r in live}}
        return sorted(merged.values(), key=lambda r: r.started_at or 0, reverse=True)[:limit]

    def runs_page(self, *, status: str | None = None, workflow: str | None = None, trigger: str | None = None,
                  limit: int = 50, cursor: str | None = None) -> tuple[list[dict[str, Any]], str | None]:
        """Run summaries, newest first, and the next page's cursor: read from the store's summaries (its lists
        hold millions), the runs this process runs as they are now."""
        if self.store is None:
            return [r.summary() for r in self.list_runs(status=status, workflow=workflow, limit=limit)
                    if trigger is None or trigger_kind(r.trigger) == trigger], None
        self.store.flush(1.0)  # the runs this process just started or ended are in the lists too
        rows, more = self.store.page(status=status, workflow=workflow, trigger=trigger, principal=isolated(),
                                     limit=limit, cursor=cursor)
        live = {row["run_id"]: handle.record.summary() for row in rows
                if (handle := self.engine.runs.get(row["run_id"])) is not None}
        return [live.get(row["run_id"], row) for row in rows], more

    def prune_runs(self, older_than_seconds: float) -> int:
        """Delete the runs that ended longer ago than this (with their journals); never one under way."""
        if self.store is None:
            return 0
        before, pruned = time.time() - older_than_seconds, 0
        while (batch := self.store.prune(before)) > 0:
            pruned += batch
        return pruned

    # -- human input ----------------------------------------------------------------------------------

    def waiting_question(self, run_id: str, node_path: str) -> Question | None:
        """The question a node of a run in this process waits on, if it does."""
        return self.questions.waiting(run_id, node_path) if self.get_run(run_id) is not None else None

    async def respond(self, run_id: str, node_path: str, answer: Any, *, by: str = "api",
                      declined: bool = False) -> RunRecord:
        """Answer the question a waiting `human` node asked: checked against its schema, journaled, on disk
        before this returns, and the node woken (`declined`: the person refused; the node fails, an approval
        is rejected). Raises UnknownName(run), NotWaiting or AnswerInvalid."""
        if self.get_run(run_id) is None:  # unknown, or another principal's
            raise UnknownName("run", run_id, None)
        return await self._answers.respond(run_id, node_path, answer, by=by, declined=declined)

    async def cancel(self, run_id: str) -> bool:
        """Ask a run (or a network run) to stop, wherever it runs; False when it was not running."""
        if self.get_run(run_id) is None and self.network_status(run_id) is None:
            return False  # unknown, or another principal's
        if run_id.startswith(NETWORK_ID_PREFIX):
            if (network := self.get_network(run_id)) is not None:
                return network.cancel()
            if self.store is None or (record := self.store.get(run_id)) is None or record.done:
                return False
            if self.engine.network_owner is not None:  # the engine runs it: cancelled there
                return await self.engine.cancel(run_id)
            self.store.request_cancel(run_id)  # the process running it hears, through the store
            return True
        return await self.engine.cancel(run_id)

    def close(self) -> None:
        """Close the store (for short-lived callers with no runs in flight, like the CLI)."""
        if self.store is not None:
            self.store.close()

    async def aclose(self, *, suspend: bool = False) -> None:
        """Stop every run and close. `suspend=True` (a server shutting down) leaves runs `running` in the
        store and gives up this process's lease, so the next server resumes them at once."""
        await self.schedules.stop_loop()
        await self.notifications.stop_loop()
        if self._retention_task is not None:
            self._retention_task.cancel()
            await asyncio.gather(self._retention_task, return_exceptions=True)
        if self._signals_task is not None:
            self._signals_task.cancel()
            if self._signals_task.get_loop() is asyncio.get_running_loop():
                await asyncio.gather(self._signals_task, return_exceptions=True)  # it closes its connection
        for network in self._networks.values():
            network.detach() if suspend else network.cancel()
        await self.engine.aclose(suspend=suspend)
        await self.services.aclose()
        if self.store is not None:
            self.store.close()


def _downstream(plan: Plan, node_id: str) -> list[str]:
    """`node_id` and every top-level node that depends on it, through edges or condition gates."""
    shape = plan.graph.shape
    found, frontier = {node_id}, [node_id]
    while frontier:
        current = frontier.pop()
        for other in shape.order:
            if other not in found and (current in shape.deps[other]
                                       or any(gate == current for gate, _ in shape.gates.get(other, ()))):
                found.add(other)
                frontier.append(other)
    return sorted(found)

