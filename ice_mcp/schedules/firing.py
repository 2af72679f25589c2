"""The firing loop: every server on a run store decides each due slot of every schedule once, with no leader.

A tick reads a schedule, decides the slots due after its cursor (catch-up, overlap), starts their runs with
the slot's idempotency key `sched:{id}:{slot}` (the same run whichever process starts it) and records the
firings with the store's compare-and-set `advance`: a process that read a stale cursor writes nothing and
cancels a run only it started. The loop sleeps until the next due slot; it never polls faster than it must.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from ice_mcp.desks import TargetStarter
from ice_mcp.errors import IceError, RateLimited
from ice_mcp.schedules.timing import (
    SchedulePolicy,
    ScheduleSpec,
    instant,
    jitter,
    parse_policy,
    parse_spec,
    slot_text,
    slots_after,
    slots_between,
)
from ice_mcp.store.base import Leases, RunRecords, ScheduleStore, threadsafe_set, watch_changes
from ice_mcp.store.records import ACTIVE, NETWORK_ID_PREFIX
from ice_mcp.store.schedules import Firing, Outcome, ScheduleRecord

if TYPE_CHECKING:
    from ice_mcp.settings import Settings
    from ice_mcp.store.base import Owner

logger = logging.getLogger(__name__)
ON_TIME_SECONDS = 5.0  # a slot found later than this after it was due is a missed one: catch-up decides
IDLE_SECONDS = 30.0  # with nothing due sooner, look again (a safety net: changes are watched for, below)
WATCH_SECONDS = 0.5  # how often a sleeping loop reads the store's schedule generation (others' changes)
NOTIFIED_WATCH_SECONDS = 5.0  # the same, a safety net only, on a store that tells of changes (PostgreSQL's NOTIFY)
BUSY_SECONDS = 0.5  # while a buffered slot waits for a run to end
MAX_SKEW_SECONDS = 1.0  # more between this machine's clock and the store's is worth a warning
RETRY_SECONDS = 5.0  # after a failed tick (the store away)
MAX_BUFFER = 1000  # buffer_all keeps at most this many slots waiting
MAX_DUE = 100_000  # slots looked at in one tick (a 1 s schedule down for a day is 86,400)


class FiringStore(ScheduleStore, RunRecords, Leases, Protocol):
    """What the firing loop reads and writes: schedules and their firings, and the runs they started (their
    records, and whether their owners still hold their leases)."""


class FiringHost(TargetStarter, Protocol):
    """What the firing loop asks of its orchestrator: a slot's run (or network run) started and looked up, the
    runs an overlap policy stops cancelled, who this process is and how long its leases last."""

    @property
    def settings(self) -> Settings: ...
    @property
    def owner(self) -> Owner: ...
    async def cancel(self, run_id: str) -> bool: ...


def slot_key(schedule_id: str, slot: float) -> str:
    """The idempotency key of a slot's run: from the nominal slot, never from the clock."""
    return f"sched:{schedule_id}:{slot_text(slot)}"


async def start_slot(orc: FiringHost, schedule: ScheduleRecord, slot: float, previous: float | None,
                     **extra: bool) -> str:
    """Start (or attach to, whoever started it) the run of one slot; templates see it as `trigger` (`extra`:
    `manual` for a trigger, `backfill`). Returns its run id."""
    trigger = {"kind": "schedule", "schedule_id": schedule.id, "slot": slot_text(slot),
               "previous_slot": slot_text(previous), **extra}
    key = slot_key(schedule.id, slot)
    if schedule.target_kind == "network":
        return orc.start_network(schedule.target, idempotency_key=key, trigger=trigger, from_client=False,
                                 caller=schedule.principal).network_id
    handle = await orc.start(schedule.target, schedule.inputs, idempotency_key=key, trigger=trigger,
                             caller=schedule.principal)
    return handle.run_id


def previous_slot(spec: ScheduleSpec, slot: float) -> float | None:
    """The nominal slot before `slot` (whether it ran or not), looked for up to a year back."""
    if spec.every_seconds is not None:
        previous = slot - spec.every_seconds
        return previous if spec.start_at is None or previous >= spec.start_at.timestamp() else None
    for window in (3600.0, 86400.0, 32 * 86400.0, 366 * 86400.0):
        earlier = slots_between(spec, instant(slot - window), instant(slot - 1e-6), MAX_DUE)
        if earlier:
            return earlier[-1].timestamp()
    return None


@dataclass(slots=True)
class Decision:
    """What one tick decided for a schedule: the firings to record and the runs to start for them."""

    firings: list[Firing] = field(default_factory=list)
    starts: list[float] = field(default_factory=list)  # slots whose run starts now
    cancel: list[str] = field(default_factory=list)  # runs to stop first (cancel_other, terminate_other)


class FiringLoop:
    """One process's part in firing its store's schedules. `clock` is the store's clock unless a test sets one."""

    def __init__(self, orc: FiringHost, store: FiringStore, *, clock: Callable[[], float] | None = None,
                 sleep: Callable[[float], Awaitable[Any]] | None = None) -> None:
        self._orc, self._store = orc, store
        self._clock = clock or store.now
        self._sleep = sleep
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._skew_told = False
        self._planned = 0.0  # when the loop means to look again (store clock); a poke before that wakes it
        self._generation: int | None = None  # the store's schedule generation the last tick saw
        self._tick_began = time.monotonic()
        self._watch_seconds = WATCH_SECONDS

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="ice_mcp schedules")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    def poke(self, at: float | None = None) -> None:
        """A schedule changed here: look again now if its next slot (`at`) comes before the planned wake."""
        if at is None or at < self._planned:
            self._wake.set()

    async def _run(self) -> None:
        unwatch = watch_changes(self._store, "schedules", None, threadsafe_set(self._wake))
        self._watch_seconds = WATCH_SECONDS if unwatch is None else NOTIFIED_WATCH_SECONDS
        try:
            await self._loop()
        finally:
            if unwatch is not None:
                unwatch()

    async def _loop(self) -> None:
        while True:
            try:
                wake_at = await self.tick()
            except IceError as exc:  # the store is away: try again soon, say so once a tick
                logger.warning("schedules: %s", exc.message)
                wake_at = self._clock() + RETRY_SECONDS
            except Exception:  # a bug must not stop every schedule of this server for good
                logger.exception("schedules: the firing loop failed; it goes on")
                wake_at = self._clock() + RETRY_SECONDS
            self._planned = wake_at
            self._wake.clear()
            if self._sleep is not None:
                await self._sleep(max(0.0, wake_at - self._clock()))
                continue
            await self._wait(wake_at)

    async def _wait(self, wake_at: float) -> None:
        """Until `wake_at`, a poke from this process, or a schedule changed by another process on the store
        (its generation moved): a schedule made on a replica that dies at once is still fired by the others."""
        if self._watch_seconds > WATCH_SECONDS and self._changed():  # told during the tick
            return
        while (delay := wake_at - self._clock()) > 0:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=min(delay, self._watch_seconds))
                return
            if self._changed():
                return

    def _changed(self) -> bool:
        try:
            generation = self._store.schedules_generation()
        except IceError:  # the store is away: the planned tick says so
            return False
        return generation != self._generation

    async def tick(self) -> float:
        """Decide every due slot of every schedule now; returns when to look again (store clock seconds)."""
        self._generation = self._store.schedules_generation()  # read first: a change during the tick is seen
        now = self._clock()
        self._store.note_scheduler(now)
        if abs(now - time.time()) > MAX_SKEW_SECONDS and not self._skew_told:
            self._skew_told = True  # slots follow the store's clock; this machine's is off, which logs mislead
            logger.warning("schedules: this machine's clock is %.1f s off the run store's; slots follow the store's",
                           time.time() - now)
        wake_at = now + IDLE_SECONDS
        self._tick_began = time.monotonic()
        schedules = self._store.schedules()
        if schedules:  # each process starts at its own place in the list: replicas race less for one schedule
            turn = int(hashlib.sha256(self._orc.owner.owner_id.encode()).hexdigest(), 16) % len(schedules)
            schedules = schedules[turn:] + schedules[:turn]
        for schedule in schedules:
            try:
                wake_at = min(wake_at, await self.fire(schedule, now))
            except IceError as exc:  # its workflow is gone, its inputs no longer fit...: the others go on
                logger.warning("schedule %s: %s", schedule.id, exc.message)
            except Exception:
                logger.exception("schedule %s: firing failed", schedule.id)
            await asyncio.sleep(0)  # the store calls block: let requests in between schedules, not after all
        return wake_at

    async def fire(self, schedule: ScheduleRecord, now: float) -> float:
        """Decide `schedule`'s due slots as of `now`, retrying when another process decided first."""
        if self._has_work(schedule, now):  # read it again: another process may have decided it since the list
            fresh = self._store.schedule(schedule.id)
            if fresh is None:
                return now + IDLE_SECONDS
            schedule = fresh
        for _ in range(5):
            result = await self._fire_once(schedule, now)
            if result is not None:
                return result
            fresh = self._store.schedule(schedule.id)
            if fresh is None:
                return now + IDLE_SECONDS
            schedule = fresh
        return now + BUSY_SECONDS

    def _has_work(self, schedule: ScheduleRecord, now: float) -> bool:
        if schedule.paused:
            return False
        if schedule.counts.get("buffered") or (schedule.running and schedule.policy.get("pause_on_failure")):
            return True
        return bool(slots_between(parse_spec(schedule.spec), instant(schedule.decided_until), instant(now), 1))

    async def _fire_once(self, schedule: ScheduleRecord, now: float) -> float | None:
        spec, policy = parse_spec(schedule.spec), parse_policy(schedule.policy)
        running = self._active(schedule.running)
        if await self._pause_on_failure(schedule, policy):
            return now + IDLE_SECONDS
        if schedule.paused:
            return now + IDLE_SECONDS
        if await self._start_buffered(schedule, running) is False:
            return None
        after = schedule.decided_until
        due = [s.timestamp() for s in slots_between(spec, instant(after), instant(now), MAX_DUE)]
        if due and due[-1] + self._jitter(spec, schedule.id, due[-1]) > now:
            due.pop()  # jitter stays below the gap to the next slot: only the newest may not be due yet
        if not due:
            return self._next_wake(spec, policy, schedule, after, now, running)
        decision = self._decide(schedule, spec, policy, due, running, now)
        for run_id in decision.cancel:
            await self._orc.cancel(run_id)
        started: dict[float, str] = {}
        limited: set[float] = set()
        for slot in decision.starts:
            try:
                started[slot] = await start_slot(self._orc, schedule, slot, previous_slot(spec, slot))
            except RateLimited:  # the workflow's limits turned it away: recorded, not retried
                limited.add(slot)
        fired_at = now + (time.monotonic() - self._tick_began)  # when its run started, on the store's clock
        for firing in decision.firings:
            firing.run_id = started.get(firing.slot, firing.run_id)
            if firing.slot in started:
                firing.fired_at = fired_at
            elif firing.slot in limited and firing.outcome == "started":
                firing.outcome = "rate_limited"
        keep = [r for r in running if r not in decision.cancel] + list(started.values())
        if not self._store.advance(schedule.id, schedule.cursor, due[-1], decision.firings, running=keep):
            await self._lost(schedule.id, started)
            return None
        return self._next_wake(spec, policy, schedule, due[-1], now, keep)

    def _decide(self, schedule: ScheduleRecord, spec: ScheduleSpec, policy: SchedulePolicy, due: list[float],
                running: list[str], now: float) -> Decision:
        decision = Decision()
        me = self._orc.owner.owner_id
        following = slots_after(spec, instant(due[-1]), 1)
        if following:
            last_gap = following[0].timestamp() - due[-1]
        else:  # the schedule has ended: the gap before its last slot stands for the one after it
            before = due[-2] if len(due) > 1 else previous_slot(spec, due[-1])
            last_gap = due[-1] - before if before is not None else ON_TIME_SECONDS * 2
        nexts = [*due[1:], due[-1] + last_gap]
        # On time: found within a few seconds of its time, and within half the gap to the next slot.
        on_time = [s for s, n in zip(due, nexts, strict=True)
                   if now - s <= ON_TIME_SECONDS + spec.jitter_seconds  # surely late otherwise: no jitter to work out
                   and now - (s + self._jitter(spec, schedule.id, s)) <= min(ON_TIME_SECONDS, (n - s) / 2)]
        on_time_set = set(on_time)
        late = [s for s in due if s not in on_time_set]
        catchup = policy.catchup
        in_window = [s for s in late if now - s <= catchup.window_seconds]
        chosen: list[float] = []
        if catchup.mode == "all":
            chosen = in_window[-catchup.max_runs:]
        elif catchup.mode == "latest" and in_window and not on_time:
            chosen = in_window[-1:]  # the newest slot stands for the backlog; an on-time one already does
        chosen_set = set(chosen)
        missed = [s for s in late if s not in chosen_set]
        if missed:
            decision.firings.append(Firing(schedule.id, missed[-1], "missed", fired_at=now, replica=me,
                                           count=len(missed)))
        active = list(running)
        buffered: int | None = None  # read from the store only when a slot may wait
        for slot in [*chosen, *on_time]:
            outcome: Outcome = "started"
            if active and policy.overlap == "skip":
                outcome = "skipped_overlap"
            elif active and policy.overlap in ("buffer_one", "buffer_all", "cancel_other"):
                limit = 1 if policy.overlap != "buffer_all" else MAX_BUFFER
                if buffered is None:
                    buffered = self._buffered_count(schedule.id)
                outcome = "buffered" if buffered < limit else "buffer_dropped"
                buffered += outcome == "buffered"
                if policy.overlap == "cancel_other":
                    decision.cancel.extend(r for r in active if r not in decision.cancel)
            elif active and policy.overlap == "terminate_other":
                decision.cancel.extend(r for r in active if r not in decision.cancel)
                active = []
            decision.firings.append(Firing(schedule.id, slot, outcome, fired_at=now, replica=me))
            if outcome == "started":
                decision.starts.append(slot)
                if policy.overlap != "allow_all":
                    active = [*active, f"slot:{slot}"]  # the run this slot starts counts for the next slots
        return decision

    def _buffered_count(self, schedule_id: str) -> int:
        return len(self._store.firings(schedule_id, limit=MAX_BUFFER + 1, outcome="buffered"))

    async def _start_buffered(self, schedule: ScheduleRecord, running: list[str]) -> bool | None:
        """With no run of the schedule left, start its oldest buffered slot. False: another process did."""
        if running or not schedule.counts.get("buffered"):
            return None
        waiting = self._store.firings(schedule.id, limit=MAX_BUFFER + 1, outcome="buffered")
        if not waiting:
            return None
        slot = waiting[-1].slot  # newest first: the last is the oldest
        run_id = await start_slot(self._orc, schedule, slot, previous_slot(parse_spec(schedule.spec), slot))
        if not self._store.update_firing(schedule.id, slot, expected="buffered", outcome="started", run_id=run_id,
                                         running=[run_id]):
            await self._lost(schedule.id, {slot: run_id})
            return False
        schedule.running = [run_id]
        running.append(run_id)
        return True

    async def _lost(self, schedule_id: str, started: dict[float, str]) -> None:
        """Another process decided these slots first: a run it did not record is one only we started."""
        recorded = {f.run_id for f in self._store.firings(schedule_id, limit=MAX_BUFFER)}
        for run_id in started.values():
            if run_id not in recorded:
                await self._orc.cancel(run_id)

    async def _pause_on_failure(self, schedule: ScheduleRecord, policy: SchedulePolicy) -> bool:
        if not policy.pause_on_failure or schedule.paused:
            return False
        for run_id in schedule.running:
            if (status := self._status(run_id)) in ("failed", "timed_out", "over_budget"):
                schedule.paused, schedule.note = True, f"paused after run {run_id} ended {status}"
                self._store.save_schedule(schedule, if_revision=schedule.revision)
                return True
        return False

    def _active(self, run_ids: list[str]) -> list[str]:
        active = []
        for run_id in run_ids:
            if run_id.startswith(NETWORK_ID_PREFIX):
                if self._network_active(run_id):
                    active.append(run_id)
                continue
            # Ended if either says so: this process's copy (its own run ends before the store hears) or the
            # store's (a copy of another process's run may lag behind it); unknown to both: being created.
            here, stored = self._orc.get_run(run_id), self._store.get(run_id)
            if not any(record is not None and record.status not in ACTIVE for record in (here, stored)):
                active.append(run_id)
        return active

    def _status(self, run_id: str) -> str | None:
        """A run's (or network run's) status, here or in the store."""
        if (network := self._orc.network_status(run_id)) is not None:
            return str(network["status"])
        record = self._orc.get_run(run_id)
        return record.status if record is not None else None

    def _network_active(self, network_id: str) -> bool:
        """A network run is not resumed when its server dies: running only while its server lives."""
        if (here := self._orc.get_network(network_id)) is not None:
            return not here.done
        stored = self._store.run(network_id)
        return (stored is not None and not stored.record.done
                and self._store.owner_alive(stored.owner, self._orc.owner, self._orc.settings.lease_seconds))

    def _jitter(self, spec: ScheduleSpec, schedule_id: str, slot: float) -> float:
        if not spec.jitter_seconds:
            return 0.0
        following = slots_after(spec, instant(slot), 1)
        return jitter(spec, schedule_id, instant(slot), following[0] if following else None)

    def _next_wake(self, spec: ScheduleSpec, policy: SchedulePolicy, schedule: ScheduleRecord, after: float,
                   now: float, running: list[str]) -> float:
        following = slots_after(spec, instant(max(after, now)), 1)
        wake = now + IDLE_SECONDS
        if following:
            slot = following[0].timestamp()
            wake = min(wake, slot + self._jitter(spec, schedule.id, slot))
        if running and (schedule.counts.get("buffered") or policy.pause_on_failure):
            wake = min(wake, now + BUSY_SECONDS)
        return wake
