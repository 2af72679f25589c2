"""The Temporal engine as an MCP server sees it: a run is started as a workflow (id = run id) for the workers
to run; its handle follows the journal the workers write to the shared store, and its end. A network is a
workflow too (id = network id), its runs child workflows: no server has to live for it to finish."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import temporalio.converter
from temporalio.client import Client, WorkflowFailureError, WorkflowHandle
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from ice_mcp.core.context import Spend
from ice_mcp.core.plan import Plan
from ice_mcp.engines.base import (
    EngineHost,
    HandedNetwork,
    Launch,
    LiveRuns,
    NetworkLaunch,
    RunHandle,
)
from ice_mcp.engines.remote_runs import follow_journal, take_record
from ice_mcp.engines.temporal.payloads import ClaimCheckCodec
from ice_mcp.engines.temporal.wire import (
    ANSWER_SIGNAL,
    NETWORK_WORKFLOW,
    RUN_WORKFLOW,
    Member,
    NetworkStart,
    RunStart,
    Tuning,
    temporal_owner,
)
from ice_mcp.errors import IceError, NotWaiting
from ice_mcp.settings import Settings
from ice_mcp.store.base import RunStorage, StoredRun
from ice_mcp.store.events import Event, EventLog, Listener
from ice_mcp.store.journal import Replay
from ice_mcp.store.records import NETWORK_ID_PREFIX, RunRecord
from ice_mcp.store.vocabulary import EventType

logger = logging.getLogger(__name__)
TAIL_SECONDS = 5.0  # how long an ended run's follower may take to read the last of its journal
CLOSE_WAIT_SECONDS = 10.0
CANCEL_WAIT_SECONDS = 10.0  # how long cancelling a run another server started waits for its end
MEMBER_POLL_SECONDS = 0.25  # how often a follower looks for a network's run, not yet started by its network


async def connect(settings: Settings, store: RunStorage) -> Client:
    """A Temporal client whose large payloads go by reference through the shared run store."""
    if not settings.temporal_address:
        raise IceError("the temporal engine needs the server's address: --temporal HOST:PORT (ICE_MCP_TEMPORAL)",
                       code="temporal_unavailable")
    converter = dataclasses.replace(temporalio.converter.default(),
                                    payload_codec=ClaimCheckCodec(store))
    try:
        return await Client.connect(settings.temporal_address, namespace=settings.temporal_namespace,
                                    data_converter=converter)
    except Exception as exc:  # connection refused, bad address, TLS: one readable error
        raise IceError(f"cannot reach Temporal at {settings.temporal_address}: {exc}",
                       code="temporal_unavailable") from None


def replay_events(replay: Replay | None) -> list[dict[str, Any]]:
    """A retry's reused outcomes as journal events (what `replay_from_events` folds back)."""
    events: list[dict[str, Any]] = []
    for path, outcome in (replay.outcomes.items() if replay is not None else ()):
        kind = {"succeeded": EventType.NODE_SUCCEEDED, "failed": EventType.NODE_FAILED,
                "skipped": EventType.NODE_SKIPPED}[outcome.status]
        events.append({"type": kind, "node_id": path, "attempt": outcome.attempts, "data": {
            "output": outcome.output, "error": outcome.error, "cost_usd": outcome.cost_usd,
            "usage": outcome.usage.as_dict(), "duration_ms": outcome.duration_ms}})
    return events



@dataclass(slots=True)
class TemporalEngine:
    """Runs on Temporal workers. `catalogue` gives a registered workflow's plan (for the documents a run
    sends along); the store keeps journals, records and caller spend for every server and worker."""

    settings: Settings
    store: RunStorage
    catalogue: Callable[[str], Plan]
    runs: LiveRuns
    observers: list[Listener] = field(default_factory=list)
    tuning: Tuning = field(default_factory=Tuning)
    name: str = "temporal"
    _client: Client | None = None
    _connecting: asyncio.Lock = field(default_factory=asyncio.Lock)
    _handing: set[asyncio.Task[bool]] = field(default_factory=set)  # networks being handed to Temporal
    _networks: dict[str, asyncio.Task[RunRecord]] = field(default_factory=dict)  # networks followed here

    @classmethod
    def for_orchestrator(cls, orc: EngineHost, runs: LiveRuns) -> TemporalEngine:
        if orc.store is None:
            raise IceError("the temporal engine needs a run store shared with its workers (persist_runs)",
                           code="temporal_unavailable")
        settings = orc.settings
        tuning = Tuning(heartbeat_seconds=settings.temporal_heartbeat_seconds)
        return cls(settings, orc.store, orc.workflow_plan, runs, observers=[orc.metrics.observe, orc.tell_watchers],
                   tuning=tuning)

    async def client(self) -> Client:
        async with self._connecting:
            if self._client is None:
                self._client = await connect(self.settings, self.store)
        return self._client

    # -- start and follow --------------------------------------------------------------------------------

    def launch(self, run: Launch) -> RunHandle:
        plan, record = run.plan, run.record
        holder = self.store.create(record, idempotency_key=run.idempotency_key, owner=self.owner_id,
                                   blueprint=plan.source_text(), version=record.workflow_version,
                                   retry_of=record.retry_of)
        stored = self.store.run(holder) if holder is not None else None
        if stored is not None:  # another server started a run with this idempotency key first
            self.store.forget_admission(record.workflow, record.run_id)  # not counted beside the key's run
            return self.follow(stored) or RunHandle(stored.record, EventLog(stored.record.run_id), None)
        caller, parent = run.caller, run.parent_spend
        caller_budget = self.settings.caller_budget_usd if caller is not None else None
        start = RunStart(record.run_id, plan.source(), record.to_dict(), workflows=self.documents(plan.source()),
                         globals=dict(run.globals), caller=caller, caller_budget_usd=caller_budget,
                         caller_spent_usd=self.store.spent(caller) if caller is not None else 0.0,
                         budget_left_usd=parent.remaining() if parent is not None else None,
                         replay=replay_events(run.replay), tuning=self.tuning)
        events = EventLog(record.run_id, [*self.observers, *run.listeners])
        task = asyncio.get_running_loop().create_task(self._start(record, events, start))
        handle = RunHandle(record, events, task, plan, stop=lambda: self._stop(record.run_id))
        self.runs.add(handle)
        return handle

    @property
    def owner_id(self) -> str:
        """Who runs Temporal runs, as the store's leases see it (an embedded server leaves them alone)."""
        return temporal_owner(self.settings.temporal_namespace, self.settings.temporal_task_queue)

    @property
    def network_owner(self) -> str:
        return self.owner_id  # a network is a workflow: no server's lease keeps it

    def documents(self, source: dict[str, Any]) -> dict[str, dict[str, Any]]:
        """Every registered workflow a blueprint may call (nested, recursive, agents' workflows), transitively."""
        found: dict[str, dict[str, Any]] = {}
        pending = _workflow_refs(source)
        while pending:
            name = pending.pop()
            if name in found:
                continue
            try:
                found[name] = self.catalogue(name).source()
            except IceError:
                continue  # the run fails readably at that node, as an embedded run would
            pending.extend(_workflow_refs(found[name]))
        return found

    async def _start(self, record: RunRecord, events: EventLog, start: RunStart) -> RunRecord:
        try:
            client = await self.client()
            workflow = await client.start_workflow(
                RUN_WORKFLOW, start, id=record.run_id, task_queue=self.settings.temporal_task_queue,
                id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING)
        except (IceError, RPCError) as exc:
            message = exc.message if isinstance(exc, IceError) else f"Temporal refused the run: {exc}"
            return self._ended(record, {"code": "temporal_unavailable", "message": message})
        return await self._follow(record, events, workflow)

    def follow(self, stored: StoredRun) -> RunHandle | None:
        """Follow a run another server started (a retried call's idempotency key found it)."""
        record = stored.record
        journal = [Event.from_dict(e) for e in self.store.events(record.run_id)]
        events = EventLog(record.run_id, list(self.observers), journal)

        async def follow() -> RunRecord:
            client = await self.client()
            workflow = client.get_workflow_handle(record.run_id)
            try:
                await workflow.describe()
            except RPCError as exc:
                if record.run_id.startswith(NETWORK_ID_PREFIX):
                    return record  # a network is never started here as a run: its record says where it stands
                if exc.status == RPCStatusCode.NOT_FOUND and _in_network(stored):
                    if (ended := await self._member_started(workflow, record.run_id)) is not None:
                        return take_record(record, ended)
                    return await self._follow(record, events, workflow)
                if exc.status != RPCStatusCode.NOT_FOUND or stored.blueprint is None:
                    return self._ended(record, {"code": "temporal_unavailable",
                                                "message": f"lost the run's workflow: {exc}"})
                # Its server died between keeping the run and starting its workflow: start it here.
                start = RunStart(record.run_id, stored.blueprint, record.to_dict(),
                                 workflows=self.documents(stored.blueprint), tuning=self.tuning)
                workflow = await client.start_workflow(
                    RUN_WORKFLOW, start, id=record.run_id, task_queue=self.settings.temporal_task_queue,
                    id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING)
            return await self._follow(record, events, workflow)

        handle = RunHandle(record, events, asyncio.get_running_loop().create_task(follow()), None,
                           stop=lambda: self._stop(record.run_id))
        self.runs.add(handle)
        return handle

    async def _member_started(self, workflow: WorkflowHandle[Any, Any], run_id: str) -> RunRecord | None:
        """A network's run is started by its network's workflow, as a child, once kept: wait for it (None), or
        for its record to end without it (the network was cancelled in between)."""
        while True:
            await asyncio.sleep(MEMBER_POLL_SECONDS)
            kept = self.store.get(run_id)
            if kept is None or kept.done:
                return kept
            try:
                await workflow.describe()
                return None
            except RPCError as exc:
                if exc.status != RPCStatusCode.NOT_FOUND:
                    raise

    async def _follow(self, record: RunRecord, events: EventLog, workflow: WorkflowHandle[Any, Any]) -> RunRecord:
        """Feed the journal's new events to the handle as an embedded run's follower does (one way to follow
        a run, for both engines) until the workflow ends; then take its final record."""
        following = asyncio.ensure_future(follow_journal(self.store, record, events))
        try:
            final = RunRecord.from_dict(await workflow.result())
        except WorkflowFailureError as exc:  # the workflow itself failed (not a node): end the record here
            following.cancel()
            return self._ended(record, {"code": "engine_error", "message": f"the Temporal workflow failed: {exc.cause}"})
        except RPCError as exc:
            following.cancel()
            return self._ended(record, {"code": "temporal_unavailable", "message": f"lost the run's workflow: {exc}"})
        except asyncio.CancelledError:
            following.cancel()
            raise
        take_record(record, final)  # the run's end, at once for whoever reads the record meanwhile
        # The workflow kept its whole journal before it returned: the follower reads it to the end (its
        # listeners hear every event before the handle ends), then the final record stands again.
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(TAIL_SECONDS):
                await following
        return take_record(record, final)

    # -- networks ----------------------------------------------------------------------------------------

    def launch_network(self, network: NetworkLaunch) -> HandedNetwork:
        """Start the network's workflow (its runs are its child workflows); what `ended` gives is its final
        record, from the workflow (or as this server failed to start it)."""
        record, caller, plans = network.record, network.caller, network.members.values()
        workflows: dict[str, dict[str, Any]] = {}
        for plan in plans:
            workflows.update(self.documents(plan.source()))
        start = NetworkStart(
            record.run_id, network.manifest, record.to_dict(),
            {wid: Member(plan.source(), plan.version, plan.estimate.model_dump()) for wid, plan in network.members.items()},
            workflows=workflows, globals=dict(network.manifest.get("global") or {}), caller=caller,
            caller_budget_usd=self.settings.caller_budget_usd if caller is not None else None,
            caller_spent_usd=self.store.spent(caller) if caller is not None else 0.0, tuning=self.tuning,
            trigger=dict(network.trigger))
        loop = asyncio.get_running_loop()
        started = loop.create_task(self._start_network(record, start))
        self._handing.add(started)
        started.add_done_callback(self._handing.discard)
        ended = self._networks[record.run_id] = loop.create_task(self._network_end(record, started))
        ended.add_done_callback(lambda _: self._networks.pop(record.run_id, None))
        return HandedNetwork(started, ended, lambda: self._stop_network(record.run_id, started))

    def _stop_network(self, network_id: str, started: asyncio.Task[bool]) -> bool:
        async def stop() -> None:
            await asyncio.shield(started)  # a cancel sent before its workflow exists would find nothing
            await self.cancel(network_id)

        asyncio.get_running_loop().create_task(stop())
        return True

    async def _start_network(self, record: RunRecord, start: NetworkStart) -> bool:
        try:
            client = await self.client()
            await client.start_workflow(NETWORK_WORKFLOW, start, id=record.run_id,
                                        task_queue=self.settings.temporal_task_queue,
                                        id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
                                        id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE)
        except WorkflowAlreadyStartedError:
            return True  # it ran, and closed: its end stands
        except (IceError, RPCError) as exc:
            message = exc.message if isinstance(exc, IceError) else f"Temporal refused the network: {exc}"
            self._network_failed(record, {"code": "temporal_unavailable", "message": message})
            return False
        return True

    async def _network_end(self, record: RunRecord, started: asyncio.Task[bool]) -> RunRecord:
        if not await asyncio.shield(started):  # (a server stopping still hands the network over)
            return self.store.get(record.run_id) or record
        workflow = (await self.client()).get_workflow_handle(record.run_id)
        try:
            return RunRecord.from_dict(await workflow.result())
        except WorkflowFailureError as exc:
            return self._network_failed(record, {"code": "engine_error",
                                                 "message": f"the network's Temporal workflow failed: {exc.cause}"})
        except RPCError as exc:  # this server lost Temporal: the network goes on, its record says how
            logger.warning("lost network %s's workflow: %s", record.run_id, exc)
            return self.store.get(record.run_id) or record

    def _network_failed(self, record: RunRecord, error: dict[str, Any]) -> RunRecord:
        """End the network's record as its workflow left it (or as it was kept), failed."""
        return self._ended(self.store.get(record.run_id) or record, error)

    def _ended(self, record: RunRecord, error: dict[str, Any]) -> RunRecord:
        record.status, record.error, record.finished_at = "failed", error, time.time()
        self.store.save(record)
        return record

    # -- cancel, spend, close ----------------------------------------------------------------------------

    def _stop(self, run_id: str) -> bool:
        asyncio.get_running_loop().create_task(self.cancel(run_id))
        return True

    async def cancel(self, run_id: str) -> bool:
        stored = self.store.get(run_id)
        handle = self.runs.get(run_id)
        if (stored is None or stored.done) and (handle is None or handle.done):
            return False
        workflow = (await self.client()).get_workflow_handle(run_id)
        try:
            await workflow.cancel()
        except RPCError:
            return False  # it ended meanwhile, or it is not a workflow of this cluster
        # Its end is awaited for a while only: with no worker up, a cancelled workflow never ends.
        with contextlib.suppress(Exception):
            async with asyncio.timeout(CANCEL_WAIT_SECONDS):
                await (handle.wait() if handle is not None else workflow.result())
        return True

    def caller_spend(self, caller: str, budget_usd: float) -> Spend:
        return Spend(budget_usd=budget_usd, cost_usd=self.store.spent(caller))

    async def hand_answer(self, run_id: str, answer: dict[str, Any]) -> None:
        """A `human` node's answer, as a signal to the run's workflow (it journals and takes it)."""
        try:
            await (await self.client()).get_workflow_handle(run_id).signal(ANSWER_SIGNAL, answer)
        except RPCError as exc:
            raise NotWaiting(f"run {run_id} cannot take an answer now: {exc}") from None

    def cancel_here(self, run_id: str) -> None:
        return None  # a Temporal run is cancelled through Temporal, never through the store's signals

    def recover(self) -> int:
        """Temporal resumes runs, and networks (workflows of runs), on its workers by itself."""
        return 0

    async def aclose(self, *, suspend: bool) -> None:
        if self._handing:  # a network this server took is Temporal's before the server goes
            await asyncio.wait(self._handing, timeout=CLOSE_WAIT_SECONDS)
        handles = [h for h in self.runs.values() if not h.done]
        if not suspend:  # stop the runs started here; a server stopping (suspend) leaves them to the workers
            await asyncio.gather(*(self.cancel(h.run_id) for h in handles),
                                 *(self.cancel(network_id) for network_id in list(self._networks)),
                                 return_exceptions=True)
        for ended in list(self._networks.values()):
            ended.cancel()
        for handle in handles:
            handle.detach()
        await asyncio.gather(*(h.wait() for h in handles), return_exceptions=True)


def _in_network(stored: StoredRun) -> bool:
    """A run of a network's, started by the network's workflow (its key is the network's)."""
    return (stored.idempotency_key or "").startswith(NETWORK_ID_PREFIX)


def _workflow_refs(document: Any) -> list[str]:
    """Names of the registered workflows a blueprint document refers to (nodes, loop bodies, branches, agents)."""
    names: list[str] = []
    stack = [document]
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            ref = value.get("workflow_ref")
            if isinstance(ref, str) and ref:
                names.append(ref)
            agent = value.get("agent")
            if isinstance(agent, dict):
                names.extend(w for w in agent.get("workflows") or () if isinstance(w, str))
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
    return names

