"""The embedded engine: runs are asyncio tasks of this process on the runner, journaled in the run store,
owned through a lease that another process on the same store takes over when this one dies."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ice_mcp.engine.context import RunContext, Sleep, Spend
from ice_mcp.engine.events import Event, EventLog
from ice_mcp.engine.journal import replay_from_events
from ice_mcp.engine.records import RunRecord
from ice_mcp.engine.store import Owner, RunStore, StoredRun
from ice_mcp.engines.base import Launch, LiveRuns, RunHandle
from ice_mcp.errors import IceError, UnknownName

if TYPE_CHECKING:
    from ice_mcp.engine.context import WorkflowPlans
    from ice_mcp.engine.events import Listener
    from ice_mcp.engine.plan import Plan
    from ice_mcp.engine.questions import Questions
    from ice_mcp.engine.runner import Runner
    from ice_mcp.services import Services

logger = logging.getLogger(__name__)


@dataclass(slots=True)
class EmbeddedEngine:
    """Runs in this process. `plan_of` compiles a stored run's blueprint again (to resume it)."""

    services: Services
    runner: Runner
    workflows: WorkflowPlans
    plan_of: Callable[[StoredRun], Plan]
    store: RunStore | None
    owner: Owner
    runs: LiveRuns
    observers: list[Listener] = field(default_factory=list)  # told of every run's events (metrics, watchers)
    questions: Questions | None = None  # where `human` nodes wait for answers
    run_listeners: Callable[[RunRecord], list[Listener]] | None = None  # per run (its pending questions)
    sleep: Sleep = asyncio.sleep
    name: str = "embedded"
    _callers: dict[str, Spend] = field(default_factory=dict)
    _lease_task: asyncio.Task[None] | None = None
    _adopting: bool = False  # a server takes over the runs of servers that died; a one-shot CLI does not

    def launch(self, run: Launch) -> RunHandle:
        """Start (or resume, with a replay and the journal so far) a run's task; the store hears first."""
        plan, record, journal = run.plan, run.record, run.journal
        per_run = self.run_listeners(record) if self.run_listeners is not None else []
        events = EventLog(record.run_id, [*self.observers, *per_run, *run.listeners], journal)
        if self.store is not None:
            self.store.keep_journal(events, written=len(journal or ()))
            self._keep_lease()
        spend = Spend(budget_usd=plan.blueprint.budget_usd, parent=run.parent_spend)
        ctx = RunContext(record.run_id, self.services, events, spend, self.runner, self.workflows,
                         sleep=self.sleep, globals=dict(run.globals), replay=run.replay, questions=self.questions)
        if self.store is not None and journal is None:
            self.store.save(record, idempotency_key=run.idempotency_key, owner=self.owner.owner_id,
                            blueprint=plan.source_text(), version=record.workflow_version, retry_of=record.retry_of)
        task = asyncio.get_running_loop().create_task(self._execute(plan, record, ctx, run.idempotency_key))
        handle = RunHandle(record, events, task, plan)
        task.add_done_callback(lambda t: self._finalize(t, handle))
        self.runs.add(handle)
        return handle

    async def _execute(self, plan: Plan, record: RunRecord, ctx: RunContext, key: str | None) -> RunRecord:
        try:
            return await self.runner.execute(plan, record, ctx)
        finally:
            handle = self.runs.get(record.run_id)
            if handle is not None and handle.suspended:
                # The next server resumes it from its journal (its questions are asked again there).
                record.status, record.error = ("input_required" if record.questions else "running"), None
            elif self.store is not None:
                record.questions.clear()
                self.store.save(record, idempotency_key=key)
            if self.questions is not None:
                self.questions.forget(record.run_id)
            if handle is not None:
                handle.release()

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
        handle = self.runs.get(run_id)
        if handle is None or not handle.cancel():
            return False
        await handle.wait()
        return True

    def caller_spend(self, caller: str, budget_usd: float) -> Spend:
        """Kept in memory: every run of this process charges it as it goes."""
        spend = self._callers.get(caller)
        if spend is None:
            spend = self._callers[caller] = Spend(budget_usd=budget_usd)
        return spend

    # -- leases, resume ------------------------------------------------------------------------------

    def follow(self, stored: StoredRun) -> RunHandle | None:
        """A running run whose server died is resumed here (the same key resumes the same run)."""
        if not stored.record.done and self._adopt(stored.record.run_id, stored.owner):
            return self.runs.get(stored.record.run_id)
        return None

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
        if run_id in self.runs or not self.store.claim(run_id, previous_owner, self.owner):
            return False
        try:
            self._resume(run_id)
        except IceError as exc:  # its blueprint no longer compiles here: end it readably
            logger.warning("run %s could not be resumed: %s", run_id, exc.message)
            stored = self.store.run(run_id)
            if stored is not None:
                stored.record.status, stored.record.error = "failed", {**exc.as_dict(), "code": "resume_failed"}
                self.store.save(stored.record)
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
        record.status, record.error, record.outputs, record.finished_at = "running", None, None, None
        record.questions.clear()  # its human nodes ask again, with their first deadlines
        if self.questions is not None:
            self.questions.restore(run_id, (e.to_dict() for e in journal))
        self.store.save(record)
        return self.launch(Launch(plan, record, replay_from_events(e.to_dict() for e in journal),
                                  idempotency_key=stored.idempotency_key, journal=journal))

    def _keep_lease(self) -> None:
        """Heartbeat this process's lease while it runs anything (and, for a server, adopt orphans)."""
        if self.store is None or (self._lease_task is not None and not self._lease_task.done()):
            return
        self.store.register_owner(self.owner)
        self._lease_task = asyncio.get_running_loop().create_task(self._lease_loop(), name="ice_mcp-lease")

    async def _lease_loop(self) -> None:
        assert self.store is not None
        period = max(0.05, self.services.settings.lease_seconds / 3)
        while True:
            await asyncio.sleep(period)
            self.store.heartbeat(self.owner)
            if self._adopting:
                try:
                    self.adopt_orphans()
                except Exception:  # a store hiccup must not stop the heartbeat
                    logger.exception("adopting orphaned runs failed")

    async def aclose(self, *, suspend: bool) -> None:
        if self._lease_task is not None:
            self._lease_task.cancel()
        handles = self.runs.values()
        for handle in handles:
            handle.suspended = suspend and self.store is not None and not handle.done
            handle.cancel()
        await asyncio.gather(*(h.wait() for h in handles), return_exceptions=True)
        if suspend and self.store is not None:
            self.store.release_owner(self.owner)
