"""Schedules on `--engine temporal`: each schedule is a Temporal Schedule `ice-sched:{id}`, used as the clock only.

The run store stays the source of truth. A Temporal Schedule's action starts a tiny tick workflow on the
servers' own task queue (`{queue}-schedules`); its activity hands the tick to the server's schedule desk,
which decides the due slots exactly as the firing loop does (one compare-and-set per slot), so a slot runs
once whether Temporal's tick or a server's loop decides it first (the loop stays: it covers specs Temporal
times otherwise, and Temporal being away). No blueprint is put into a schedule's arguments (a stale
definition would keep firing). Pause, trigger and backfill go through the schedule handle (a trigger's or a
backfill's slots are claimed in the store first; a tick starts the claimed ones); a reconciler at start
repairs drift between the store and Temporal by the `ice-sched:` prefix.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
from collections.abc import Awaitable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol

from temporalio import activity, workflow
from temporalio.api.common.v1 import Payload
from temporalio.client import (
    Client,
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleAlreadyRunningError,
    ScheduleBackfill,
    ScheduleIntervalSpec,
    ScheduleOverlapPolicy,
    SchedulePolicy,
    ScheduleSpec,
    ScheduleState,
    ScheduleUpdate,
    ScheduleUpdateInput,
)
from temporalio.common import RetryPolicy, SearchAttributeKey
from temporalio.service import RPCError, RPCStatusCode
from temporalio.worker import Worker

if TYPE_CHECKING:
    from ice_mcp.store.schedules import ScheduleRecord

logger = logging.getLogger(__name__)
PREFIX = "ice-sched:"  # every Temporal Schedule of ours; the reconciler owns all with this prefix
SCHEDULE_TICK = "ice_mcp.schedule_tick"
TICK_ACTIVITY = "ice_mcp.schedule_tick_activity"
MIN_CATCHUP = 10.0  # Temporal's smallest catch-up window
DIGEST = "ice_mcp_made_from"  # the action's memo: a digest of what the schedule was made from
SCHEDULED_AT = SearchAttributeKey.for_datetime("TemporalScheduledStartTime")
OVERLAP = {"skip": ScheduleOverlapPolicy.SKIP, "buffer_one": ScheduleOverlapPolicy.BUFFER_ONE,
           "buffer_all": ScheduleOverlapPolicy.BUFFER_ALL, "cancel_other": ScheduleOverlapPolicy.CANCEL_OTHER,
           "terminate_other": ScheduleOverlapPolicy.TERMINATE_OTHER, "allow_all": ScheduleOverlapPolicy.ALLOW_ALL}


class TickDesk(Protocol):
    """What a tick needs of the server's schedule desk."""

    async def on_tick(self, schedule_id: str, scheduled_at: float) -> None: ...


def schedule_id_of(temporal_id: str) -> str:
    return temporal_id.removeprefix(PREFIX)


def temporal_spec(schedule: ScheduleRecord) -> ScheduleSpec | None:
    """The Temporal spec whose action times are the schedule's slots, or None when Temporal would fire at other
    times (an RRULE, a cron restricting both day fields, a fractional interval): the servers' loop fires those."""
    spec = schedule.spec
    start, end = _when(spec.get("start_at")), _when(spec.get("end_at"))
    if spec.get("cron"):
        fields = str(spec["cron"]).split()
        if len(fields) != 5 or (fields[2] != "*" and fields[4] != "*"):
            return None  # Temporal ANDs day-of-month and day-of-week; cron (and we) OR them
        return ScheduleSpec(cron_expressions=[str(spec["cron"])], time_zone_name=str(spec.get("timezone", "UTC")),
                            start_at=start, end_at=end)
    every = spec.get("every_seconds")
    if every is None or not float(every).is_integer() or (start is not None and not start.timestamp().is_integer()):
        return None
    anchor = int(start.timestamp()) if start is not None else 0
    return ScheduleSpec(intervals=[ScheduleIntervalSpec(every=timedelta(seconds=int(every)),
                                                        offset=timedelta(seconds=anchor % int(every)))],
                        start_at=start, end_at=end)


def temporal_schedule(schedule: ScheduleRecord, task_queue: str) -> Schedule | None:
    spec = temporal_spec(schedule)
    if spec is None:
        return None
    policy, catchup = schedule.policy, schedule.policy.get("catchup") or {}
    return Schedule(
        action=ScheduleActionStartWorkflow(SCHEDULE_TICK, schedule.id, id=PREFIX + schedule.id, task_queue=task_queue,
                                           execution_timeout=timedelta(minutes=10),
                                           memo={DIGEST: digest(schedule, task_queue)}),
        spec=spec,
        # Set every time: Temporal's default window is a year (a storm of catch-up after an outage).
        policy=SchedulePolicy(overlap=OVERLAP[str(policy.get("overlap", "skip"))],
                              catchup_window=timedelta(seconds=max(MIN_CATCHUP, float(
                                  catchup.get("window_seconds", 86400.0))))),
        state=ScheduleState(paused=schedule.paused, note=schedule.note or ""))


def digest(schedule: ScheduleRecord, task_queue: str) -> str:
    """What the Temporal Schedule was made from (Temporal reads cron back as calendars: this is compared)."""
    made_from = {"spec": schedule.spec, "overlap": schedule.policy.get("overlap"), "queue": task_queue,
                 "catchup": (schedule.policy.get("catchup") or {}).get("window_seconds")}
    return hashlib.sha256(json.dumps(made_from, sort_keys=True).encode()).hexdigest()[:24]


def _when(text: Any) -> datetime | None:
    return datetime.fromisoformat(str(text).replace("Z", "+00:00")) if text else None


@workflow.defn(name=SCHEDULE_TICK, sandboxed=False)
class ScheduleTick:
    """One action of a schedule: tell a server which nominal time Temporal fired for; the server decides."""

    @workflow.run
    async def run(self, schedule_id: str) -> None:
        scheduled = workflow.info().typed_search_attributes.get(SCHEDULED_AT) or workflow.now()
        await workflow.execute_activity(TICK_ACTIVITY, args=[schedule_id, scheduled.timestamp()],
                                        start_to_close_timeout=timedelta(seconds=60),
                                        retry_policy=RetryPolicy(maximum_attempts=5))


@dataclass
class TemporalClock:
    """The Temporal Schedules of one server's store, and the worker that takes their ticks to its desk."""

    client: Client
    task_queue: str
    desk: TickDesk
    _pending: set[asyncio.Task[None]] = field(default_factory=set)
    _worker: asyncio.Task[None] | None = None
    _stop: asyncio.Event = field(default_factory=asyncio.Event)

    def start(self) -> None:
        @activity.defn(name=TICK_ACTIVITY)
        async def tick(schedule_id: str, scheduled_at: float) -> None:
            await self.desk.on_tick(schedule_id, scheduled_at)

        worker = Worker(self.client, task_queue=self.task_queue, workflows=[ScheduleTick], activities=[tick],
                        graceful_shutdown_timeout=timedelta(seconds=2))

        async def serve() -> None:
            async with worker:
                await self._stop.wait()

        self._worker = asyncio.get_running_loop().create_task(serve(), name="ice_mcp schedule ticks")

    async def aclose(self) -> None:
        await self.settled()
        self._stop.set()
        if self._worker is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._worker, 10)

    # -- keeping Temporal in step with the store --------------------------------------------------------

    def changed(self, schedule: ScheduleRecord) -> None:
        """Create or update the schedule's Temporal Schedule (in the background; `settled()` awaits it)."""
        self._later(self.put(schedule))

    def deleted(self, schedule_id: str) -> None:
        self._later(self._delete(schedule_id))

    async def settled(self) -> None:
        """Until the changes handed over so far reached Temporal (failures are logged; the reconciler repairs)."""
        while self._pending:
            await asyncio.gather(*list(self._pending), return_exceptions=True)

    def _later(self, work: Awaitable[Any]) -> None:
        async def guarded() -> None:
            try:
                await work
            except Exception as exc:  # Temporal away: the servers' loop still fires; the next start reconciles
                logger.warning("schedules: Temporal not updated: %s", exc)

        task = asyncio.get_running_loop().create_task(guarded())
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def put(self, schedule: ScheduleRecord) -> bool:
        """Make `ice-sched:{id}` what the store says; False (and none kept) for a spec Temporal cannot time."""
        wanted = temporal_schedule(schedule, self.task_queue)
        if wanted is None:
            await self._delete(schedule.id)
            return False
        try:
            await self.client.create_schedule(PREFIX + schedule.id, wanted)
        except ScheduleAlreadyRunningError:
            await self._update(schedule, wanted)
        return True

    async def _update(self, schedule: ScheduleRecord, wanted: Schedule) -> None:
        handle = self.client.get_schedule_handle(PREFIX + schedule.id)
        was_paused: list[bool] = []

        def update(current: ScheduleUpdateInput) -> ScheduleUpdate:
            was_paused.append(current.description.schedule.state.paused)
            return ScheduleUpdate(schedule=wanted)

        await handle.update(update)
        # Pause and unpause go through the handle (with the note), as Temporal's own clients do.
        if schedule.paused and was_paused != [True]:
            await handle.pause(note=schedule.note or "paused")
        elif not schedule.paused and was_paused != [False]:
            await handle.unpause(note="resumed")

    async def _made_from(self, schedule: Schedule) -> str | None:
        action = schedule.action
        if not isinstance(action, ScheduleActionStartWorkflow) or _queue(schedule) != self.task_queue:
            return None
        raw = (action.memo or {}).get(DIGEST)
        if raw is None:
            return None
        if isinstance(raw, Payload):
            [raw] = await self.client.data_converter.decode([raw])
        return str(raw)

    async def _delete(self, schedule_id: str) -> None:
        with contextlib.suppress(RPCError):
            await self.client.get_schedule_handle(PREFIX + schedule_id).delete()

    async def trigger(self, schedule_id: str) -> bool:
        """A tick now, through the handle; False when the schedule has no Temporal Schedule."""
        handle = self.client.get_schedule_handle(PREFIX + schedule_id)
        return await _found(handle.trigger(overlap=ScheduleOverlapPolicy.ALLOW_ALL))

    async def backfill(self, schedule_id: str, start: datetime, end: datetime) -> bool:
        """Ticks for the slots from `start` to `end`, through the handle; False without a Temporal Schedule."""
        handle = self.client.get_schedule_handle(PREFIX + schedule_id)
        return await _found(handle.backfill(ScheduleBackfill(
            start_at=start - timedelta(seconds=1), end_at=end + timedelta(seconds=1),
            overlap=ScheduleOverlapPolicy.ALLOW_ALL)))

    async def reconcile(self, schedules: list[ScheduleRecord]) -> dict[str, int]:
        """Repair drift at start: create or fix the Temporal Schedules of the store's schedules and delete those
        `ice-sched:` ones whose schedule is gone. Returns what it did, by kind."""
        done = {"created": 0, "updated": 0, "deleted": 0, "unchanged": 0, "server_timed": 0}
        mine = {s.id: s for s in schedules}
        existing: set[str] = set()
        async for listed in await self.client.list_schedules():
            if listed.id.startswith(PREFIX):
                existing.add(schedule_id_of(listed.id))
        for gone in sorted(existing - set(mine)):
            # Only ours: another deployment on this namespace (another store) ticks on its own queue.
            described = await self.client.get_schedule_handle(PREFIX + gone).describe()
            if _queue(described.schedule) == self.task_queue:
                await self._delete(gone)
                done["deleted"] += 1
        for schedule_id, schedule in sorted(mine.items()):
            wanted = temporal_schedule(schedule, self.task_queue)
            if wanted is None:
                if schedule_id in existing:
                    await self._delete(schedule_id)
                    done["deleted"] += 1
                done["server_timed"] += 1
                continue
            try:  # describe, not the list: Temporal lists a new schedule only after a moment
                current = (await self.client.get_schedule_handle(PREFIX + schedule_id).describe()).schedule
            except RPCError as exc:
                if exc.status != RPCStatusCode.NOT_FOUND:
                    raise
                await self.put(schedule)
                done["created"] += 1
                continue
            if await self._made_from(current) == digest(schedule, self.task_queue) and (
                    current.state.paused == schedule.paused):
                done["unchanged"] += 1
            else:
                await self._update(schedule, wanted)
                done["updated"] += 1
        return done


async def _found(call: Awaitable[None]) -> bool:
    """A call on a schedule's handle; False when Temporal has no such schedule."""
    try:
        await call
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            return False
        raise
    return True


def _queue(schedule: Schedule) -> str | None:
    action = schedule.action
    return action.task_queue if isinstance(action, ScheduleActionStartWorkflow) else None


async def open_clock(client: Client, task_queue: str, desk: TickDesk) -> TemporalClock:
    """Start taking ticks on `{task_queue}-schedules` (the servers' queue, never the workers')."""
    clock = TemporalClock(client, f"{task_queue}-schedules", desk)
    clock.start()
    return clock
