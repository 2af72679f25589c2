"""The embedded engine: runs are asyncio tasks of this process on the runner, journaled in the run store,
owned through a lease that another process on the same store takes over when this one dies. A run another
process on the store runs is followed through its journal (and cancelled through a signal)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ice_mcp.core.context import RunContext, Sleep, Spend
from ice_mcp.engines.admission import AdmissionLine
from ice_mcp.engines.base import (
    HandedNetwork,
    Launch,
    LiveRuns,
    NetworkLaunch,
    RunHandle,
    resume_failed,
)
from ice_mcp.engines.remote_runs import catch_up, follow_journal
from ice_mcp.errors import IceError, UnknownName
from ice_mcp.observability import tracing
from ice_mcp.store.base import Owner, RunStorage, StoredRun
from ice_mcp.store.events import Event, EventLog
from ice_mcp.store.journal import replay_from_events
from ice_mcp.store.records import NETWORK_ID_PREFIX, RunRecord

if TYPE_CHECKING:
    from ice_mcp.core.context import WorkflowPlans
    from ice_mcp.core.plan import Plan
    from ice_mcp.core.questions import Questions
    from ice_mcp.core.runner import Runner
    from ice_mcp.observability.metrics import PrometheusMetrics
    from ice_mcp.services import Services
    from ice_mcp.store.events import Listener

logger = logging.getLogger(__name__)
CANCEL_WAIT_SECONDS = 10.0  # how long cancelling a run of another process waits for it to end
SNAPSHOT_SECONDS = 1.0  # how often a shared store gets the live records (other replicas answer run_status)


@dataclass(slots=True)
class EmbeddedEngine:
    """Runs in this process. `plan_of` compiles a stored run's blueprint again (to resume it)."""

    services: Services
    runner: Runner
    workflows: WorkflowPlans
    plan_of: Callable[[StoredRun], Plan]
    store: RunStorage | None
    owner: Owner
    runs: LiveRuns
    max_runs: int | None = None  # runs executed at once; more wait for a slot
    observers: list[Listener] = field(default_factory=list)  # told of every run's events (metrics, watchers)
    questions: Questions | None = None  # where `human` nodes wait for answers
    run_listeners: Callable[[RunRecord], list[Listener]] | None = None  # per run (its pending questions)
    resume_network: Callable[[RunRecord], object] | None = None  # runs again a network taken over here
    meter: PrometheusMetrics | None = None  # counts the runs executed here (never those followed)
    sleep: Sleep = asyncio.sleep
    name: str = "embedded"
    network_owner: str | None = None  # the orchestrator runs networks, each workflow a run here
    _callers: dict[str, Spend] = field(default_factory=dict)
    _followed: dict[str, RunHandle] = field(default_factory=dict)  # runs of other processes followed here
    _snapshots: dict[str, int] = field(default_factory=dict)  # events a live run had at its last kept record
    _slots: asyncio.Semaphore | contextlib.nullcontext[None] = field(init=False)
    _line: AdmissionLine | None = field(init=False)  # runs `queued` by their workflow's limits wait here
    _lease_task: asyncio.Task[None] | None = None
    _adopting: bool = False  # a server takes over the runs of servers that died; a one-shot CLI does not

    def __post_init__(self) -> None:
        self._slots = asyncio.Semaphore(self.max_runs) if self.max_runs else contextlib.nullcontext()
        self._line = AdmissionLine(self.store) if self.store is not None else None

    def launch(self, run: Launch) -> RunHandle:
        """Start (or resume, with a replay and the journal so far) a run's task; the store hears first.
        A new run whose idempotency key another process on the store used first is that process's run."""
        plan, record, journal = run.plan, run.record, run.journal
        if self.store is not None and journal is None:
            holder = self.store.create(record, idempotency_key=run.idempotency_key, owner=self.owner.owner_id,
                                       blueprint=plan.source_text(), version=record.workflow_version,
                                       retry_of=record.retry_of)
            stored = self.store.run(holder) if holder is not None else None
            if stored is not None:
                self.store.forget_admission(record.workflow, record.run_id)  # not counted beside the key's run
                return self.follow(stored) or RunHandle(stored.record, EventLog(stored.record.run_id), None)
            if record.status == "queued" and (limits := plan.blueprint.limits) is not None and self._line is not None:
                if self._line.join(plan.name, record.run_id, record.started_at or 0.0, limits):
                    record.status = "running"
                    self.store.save(record)
        per_run = self.run_listeners(record) if self.run_listeners is not None else []
        meter = self.meter.listener(record) if self.meter is not None else None
        if meter is not None:
            per_run.append(meter)
        events = EventLog(record.run_id, [*self.observers, *per_run, *run.listeners], journal)
        if self.store is not None:
            self.store.keep_journal(events, written=len(journal or ()))
            self._keep_lease()
        spend = Spend(budget_usd=plan.blueprint.budget_usd, parent=run.parent_spend)
        ctx = RunContext(record.run_id, self.services, events, spend, self.runner, self.workflows,
                         sleep=self.sleep, globals=dict(run.globals), replay=run.replay, questions=self.questions,
                         trace_parent=record.traceparent if tracing.ENABLED else None)
        task = asyncio.get_running_loop().create_task(self._execute(plan, record, ctx, run.idempotency_key))
        handle = RunHandle(record, events, task, plan)
        if meter is not None:
            meter.handle = handle
        task.add_done_callback(lambda t: self._finalize(t, handle))
        self.runs.add(handle)
        return handle

    async def _execute(self, plan: Plan, record: RunRecord, ctx: RunContext, key: str | None) -> RunRecord:
        try:
            if record.status == "queued":
                await self._wait_turn(plan, record)
            async with self._slots:  # max_runs: a run waits here for a free slot
                return await self.runner.execute(plan, record, ctx)
        finally:
            handle = self.runs.get(record.run_id)
            if handle is not None and handle.suspended:
                # The next server resumes it from its journal (its questions are asked again there).
                if record.status != "queued":
                    record.status, record.error = ("input_required" if record.questions else "running"), None
            else:
                tracing.end_run(record)  # once, by the process that finished it (a suspended run goes on elsewhere)
                if self.store is not None:
                    record.questions.clear()
                    self.store.save(record, idempotency_key=key)
            if self.questions is not None:
                self.questions.forget(record.run_id)
            if handle is not None:
                handle.release()
            if self._line is not None:
                self._line.wake(record.workflow)

    async def _wait_turn(self, plan: Plan, record: RunRecord) -> None:
        """A queued run starts when the store admits it: its turn in the workflow's queue and a free slot."""
        limits = plan.blueprint.limits
        if self._line is not None and limits is not None and limits.on_limit == "queue":
            await self._line.wait_turn(plan.name, record.run_id, record.started_at or 0.0, limits)
        record.status, record.started_at = "running", time.time()  # it starts now; it was made when queued
        if self.store is not None:
            self.store.save(record)

    def _finalize(self, task: asyncio.Task[RunRecord], handle: RunHandle) -> None:
        # A run cancelled before its first step, or whose task died, never closed its record: close it here.
        handle.release()
        if handle.record.done or handle.suspended:
            return
        if task.cancelled():
            handle.record.status = "cancelled"
            handle.record.error = {"code": "cancelled", "message": "the run was cancelled before it started"}
        else:
            exc = task.exception()
            handle.record.status = "failed"
            handle.record.error = {"code": "internal_error", "message": f"{type(exc).__name__}: {exc}"}
        if self.store is not None:
            self.store.save(handle.record)

    async def cancel(self, run_id: str) -> bool:
        """Cancel a run here, or (a signal through the store) in the process that runs it, waiting for that
        one up to CANCEL_WAIT_SECONDS."""
        handle = self.runs.get(run_id)
        if handle is None and self.store is not None and (stored := self.store.run(run_id)) is not None:
            handle = self.follow(stored)
        if handle is None or not handle.cancel():
            return False
        await handle.wait(CANCEL_WAIT_SECONDS if self._followed.get(run_id) is handle else None)
        return True

    async def hand_answer(self, run_id: str, answer: dict[str, Any]) -> None:
        if self.store is not None:  # the server that runs it hears through the store's signals
            await asyncio.to_thread(self.store.send_answer, run_id, answer)

    def cancel_here(self, run_id: str) -> None:
        """Another process asked (through the store) for a run to stop: cancel it if it runs here."""
        handle = self.runs.get(run_id)
        if handle is not None and self._followed.get(run_id) is not handle:
            handle.cancel()

    def caller_spend(self, caller: str, budget_usd: float) -> Spend:
        """Every run of this process charges it as it goes; with a store, the charges go there at once
        (atomically, so every process on the store sees one total) and the total comes back."""
        spend = self._callers.get(caller)
        if spend is None:
            spend = self._callers[caller] = Spend(budget_usd=budget_usd)
            spend.kept = self._kept_spend(caller, spend)
        if self.store is not None:
            try:
                spend.cost_usd = self.store.spent(caller)
            except IceError as exc:  # the store is away: go on with what this process counted
                logger.warning("caller spend not read: %s", exc.message)
        return spend

    def _kept_spend(self, caller: str, spend: Spend) -> Callable[[float], float] | None:
        store = self.store
        if store is None:
            return None

        def add(usd: float) -> float:
            try:
                return store.add_spend(caller, usd)
            except IceError as exc:  # the store is away: keep counting here
                logger.warning("caller spend not kept: %s", exc.message)
                return spend.cost_usd

        return add

    # -- leases, resume ------------------------------------------------------------------------------

    def follow(self, stored: StoredRun) -> RunHandle | None:
        """A handle on a run under way kept in the store: one whose owner died is resumed here (the same
        key resumes the same run); one another live process runs is followed through its journal."""
        record = stored.record
        if record.done or self.store is None:
            return None
        here = self.runs.get(record.run_id)
        if here is not None:
            return here
        lease = self.services.settings.lease_seconds
        if not self.store.owner_alive(stored.owner, self.owner, lease) and self._adopt(record.run_id, stored.owner):
            return self.runs.get(record.run_id)
        return self._follow_elsewhere(stored)

    def _follow_elsewhere(self, stored: StoredRun) -> RunHandle:
        assert self.store is not None
        store, run_id = self.store, stored.record.run_id
        events = EventLog(run_id, events=[Event.from_dict(e) for e in store.events(run_id)])

        def stop() -> bool:
            try:
                store.request_cancel(run_id)
            except IceError as exc:
                logger.warning("could not ask for run %s to be cancelled: %s", run_id, exc.message)
                return False
            return True

        task = asyncio.get_running_loop().create_task(follow_journal(store, stored.record, events),
                                                      name=f"ice_mcp-follow-{run_id}")
        handle = RunHandle(stored.record, events, task, None, stop=stop,
                           catch_up=lambda: catch_up(store, stored.record, events))
        task.add_done_callback(lambda _task: self._unfollow(handle))
        self._followed[run_id] = handle
        self.runs.add(handle)
        return handle

    def _unfollow(self, handle: RunHandle) -> None:
        if self._followed.get(handle.run_id) is handle:
            del self._followed[handle.run_id]
        if not handle.record.done and self.runs.get(handle.run_id) is handle:
            self.runs.drop(handle.run_id)  # the store went away: the next look starts afresh

    def launch_network(self, network: NetworkLaunch) -> HandedNetwork:
        raise IceError("the embedded engine leaves networks to the orchestrator", code="unsupported")

    def recover(self) -> int:
        """Resume the runs of servers that died, and from now on take over the runs of any server whose
        lease runs out (inside the event loop)."""
        if self.store is None:
            return 0
        self._adopting = True
        self._keep_lease()
        return self.adopt_orphans()

    def adopt_orphans(self) -> int:
        """Resume every run whose owner is gone; returns how many this process took over."""
        if self.store is None:
            return 0
        return sum(self._adopt(run_id, owner) for run_id, owner in
                   self.store.orphaned_runs(self.owner, self.services.settings.lease_seconds))

    def _adopt(self, run_id: str, previous_owner: str | None) -> bool:
        assert self.store is not None
        self.store.register_owner(self.owner)
        here = self.runs.get(run_id)
        if ((here is not None and self._followed.get(run_id) is not here)
                or not self.store.claim(run_id, previous_owner, self.owner)):
            return False
        try:
            stored = self.store.run(run_id) if run_id.startswith(NETWORK_ID_PREFIX) else None
            if stored is not None and self.resume_network is not None:
                self.resume_network(stored.record)  # a network: it attaches to the runs of its workflows
            else:
                self._resume(run_id)
        except IceError as exc:  # its blueprint no longer compiles here: end it readably
            resume_failed(self.store, run_id, exc)
            return False
        return True

    def _resume(self, run_id: str) -> RunHandle:
        assert self.store is not None
        stored = self.store.run(run_id)
        if stored is None:
            raise UnknownName("run", run_id, None)
        plan = self.plan_of(stored)
        journal = [Event.from_dict(e) for e in self.store.events(run_id)]
        record = stored.record
        record.status = "queued" if record.status == "queued" else "running"  # a queued one waits its turn again
        record.error, record.outputs, record.finished_at = None, None, None
        record.questions.clear()  # its human nodes ask again, with their first deadlines
        if self.questions is not None:
            self.questions.restore(run_id, (e.to_dict() for e in journal))
        self.store.save(record)
        handle = self.launch(Launch(plan, record, replay_from_events(e.to_dict() for e in journal),
                                    idempotency_key=stored.idempotency_key, journal=journal))
        if self.store.cancel_requested(run_id):  # asked while its owner was gone
            handle.cancel()
        return handle

    def _keep_lease(self) -> None:
        """Heartbeat this process's lease while it runs anything (and, for a server, adopt orphans)."""
        if self.store is None or (self._lease_task is not None and not self._lease_task.done()):
            return
        self.store.register_owner(self.owner)
        self._lease_task = asyncio.get_running_loop().create_task(self._lease_loop(), name="ice_mcp-lease")

    async def _lease_loop(self) -> None:
        assert self.store is not None
        loop = asyncio.get_running_loop()
        period = max(0.05, self.services.settings.lease_seconds / 3)
        tick = min(period, SNAPSHOT_SECONDS) if self.store.shared else period
        next_beat = loop.time() + period
        while True:
            await asyncio.sleep(tick)
            if self.store.shared:
                self._snapshot_live_runs()
            if loop.time() < next_beat - tick / 2:
                continue
            next_beat = loop.time() + period
            self.store.heartbeat(self.owner)
            if self._adopting:
                try:
                    self.adopt_orphans()
                except Exception:  # a store hiccup must not stop the heartbeat
                    logger.exception("adopting orphaned runs failed")

    def _snapshot_live_runs(self) -> None:
        """Queue the records of live runs that moved on, so every replica's run_status shows their nodes."""
        assert self.store is not None
        live = {handle.run_id: handle for handle in self.runs.values()
                if not handle.done and self._followed.get(handle.run_id) is not handle}
        for run_id in [r for r in self._snapshots if r not in live]:
            del self._snapshots[run_id]
        for run_id, handle in live.items():
            if len(handle.events.events) != self._snapshots.get(run_id, 0):
                self._snapshots[run_id] = len(handle.events.events)
                self.store.save(handle.record)

    async def aclose(self, *, suspend: bool) -> None:
        if self._line is not None:
            await self._line.aclose()
        if self._lease_task is not None:
            self._lease_task.cancel()
            if self._lease_task.get_loop() is asyncio.get_running_loop():
                await asyncio.gather(self._lease_task, return_exceptions=True)
        for followed in list(self._followed.values()):
            followed.detach()  # stop following other processes' runs; they go on there
        handles = [h for h in self.runs.values() if self._followed.get(h.run_id) is not h]
        for handle in handles:
            handle.suspended = suspend and self.store is not None and not handle.done
            handle.cancel()
        await asyncio.gather(*(h.wait() for h in handles), return_exceptions=True)
        if suspend and self.store is not None:
            try:
                self.store.release_owner(self.owner)
            except IceError as exc:  # the store is away: the lease runs out by itself
                logger.warning("lease not released: %s", exc.message)
