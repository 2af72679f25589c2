"""On `--engine temporal` each schedule is a Temporal Schedule `ice-sched:{id}` on a real dev server, used as the
clock: its ticks start the slots' runs with no firing loop running, pause and trigger go through its handle,
the catch-up window is always explicit, and the reconciler repairs drift at start."""

from __future__ import annotations

import asyncio
import time
import uuid
from datetime import UTC, datetime, timedelta

from temporal_cluster import Cluster
from temporalio.client import (
    Client,
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleOverlapPolicy,
    ScheduleSpec,
)
from temporalio.service import RPCError, RPCStatusCode

from ice_mcp.engines.temporal.client import connect
from ice_mcp.engines.temporal.clock import PREFIX, SCHEDULE_TICK, TemporalClock, open_clock
from ice_mcp.orchestrator import Orchestrator

STAMP = {"name": "stamp", "nodes": [{"id": "s", "type": "tool", "tool_name": "render_template",
                                     "tool_args": {"template": "{{ trigger.kind }} {{ trigger.slot }}"}}],
         "outputs": {"text": "{{ s.text }}"}}


async def clock_of(orc: Orchestrator) -> tuple[TemporalClock, Client]:
    assert orc.store is not None
    client = await connect(orc.settings, orc.store)
    clock = await open_clock(client, orc.settings.temporal_task_queue, orc.schedules)
    orc.schedules.mirror = clock
    return clock, client


def instant_text(slot: float) -> str:
    return datetime.fromtimestamp(slot, UTC).isoformat().replace("+00:00", "Z")


def started(orc: Orchestrator, schedule_id: str) -> list[str]:
    assert orc.store is not None
    return [f.run_id for f in orc.store.firings(schedule_id, limit=100, outcome="started") if f.run_id]


async def settled_runs(orc: Orchestrator, run_ids: list[str]) -> list[str]:
    texts = []
    for run_id in run_ids:
        handle = orc.watch(run_id)
        assert handle is not None
        record = await handle.wait(30)
        assert record.status == "succeeded", record.error
        texts.append(str((record.outputs or {})["text"]))
    return texts


async def test_temporal_ticks_start_the_slots_and_pause_and_trigger_go_through_the_handle(cluster: Cluster) -> None:
    orc = cluster.client
    orc.register_blueprint(STAMP)
    clock, client = await clock_of(orc)
    assert orc.schedules.loop is None  # no firing loop here: only Temporal's ticks can start runs
    schedule_id = f"tick-{uuid.uuid4().hex[:6]}"
    orc.schedules.create(workflow="stamp", inputs={}, spec={"every_seconds": 1}, schedule_id=schedule_id)
    await orc.schedules.mirrored()
    handle = client.get_schedule_handle(PREFIX + schedule_id)
    described = await handle.describe()
    assert described.schedule.policy.catchup_window == timedelta(days=1)  # explicit, never Temporal's year
    assert described.schedule.policy.overlap == ScheduleOverlapPolicy.SKIP
    assert [i.every for i in described.schedule.spec.intervals] == [timedelta(seconds=1)]
    action = described.schedule.action
    assert isinstance(action, ScheduleActionStartWorkflow) and action.workflow == SCHEDULE_TICK
    assert action.args and len(action.args) == 1  # the schedule's id only: no blueprint travels with it

    deadline = time.monotonic() + 20
    while len(started(orc, schedule_id)) < 3:
        assert time.monotonic() < deadline, "Temporal's ticks did not start three slots"
        await asyncio.sleep(0.1)
    texts = await settled_runs(orc, started(orc, schedule_id)[:3])
    assert all(t.startswith("schedule ") and t.endswith("Z") for t in texts) and len(set(texts)) == 3

    orc.schedules.pause(schedule_id, "maintenance")
    await orc.schedules.mirrored()
    state = (await handle.describe()).schedule.state
    assert state.paused and state.note == "maintenance"
    await asyncio.sleep(0.5)
    before = len(started(orc, schedule_id))
    await asyncio.sleep(2.5)
    assert len(started(orc, schedule_id)) == before  # paused: Temporal sends no ticks, no run starts

    actions = (await handle.describe()).info.num_actions
    fired = await orc.schedules.trigger(schedule_id)  # through the handle: Temporal's tick starts it
    assert fired["run_id"]
    assert (await handle.describe()).info.num_actions == actions + 1
    [text] = await settled_runs(orc, [fired["run_id"]])
    assert text == f"schedule {fired['slot']}"

    # A backfill through the handle: the slots are claimed in the store, Temporal's backfill ticks start them.
    orc.schedules.resume(schedule_id)  # the paused slots become one `paused` row: those before its last have none
    await orc.schedules.mirrored()
    assert orc.store is not None
    decided = [f.slot for f in orc.store.firings(schedule_id, limit=100) if f.slot % 1 == 0]  # not the trigger
    first, last = min(decided), max(decided)
    missed = [slot for slot in range(int(first), int(last) + 1) if orc.store.firing(schedule_id, slot) is None]
    assert len(missed) >= 2, "the pause left slots without a run"
    actions = (await handle.describe()).info.num_actions
    filled = await orc.schedules.backfill(schedule_id, instant_text(missed[0]), instant_text(missed[-1]))
    assert [s["slot"] for s in filled["started"]] == [instant_text(slot) for slot in missed]
    assert (await handle.describe()).info.num_actions >= actions + len(missed)  # Temporal's ticks did it
    texts = await settled_runs(orc, [s["run_id"] for s in filled["started"]])
    assert texts == [f"schedule {instant_text(slot)}" for slot in missed]

    orc.schedules.delete(schedule_id)
    await orc.schedules.mirrored()
    try:
        await handle.describe()
        raise AssertionError("the Temporal Schedule outlived its schedule")
    except RPCError as exc:
        assert exc.status == RPCStatusCode.NOT_FOUND
    await clock.aclose()


async def test_the_reconciler_repairs_drift_between_the_store_and_temporal(cluster: Cluster) -> None:
    orc = cluster.client
    orc.register_blueprint(STAMP)
    tag = uuid.uuid4().hex[:6]
    missing, drifted, rrule = f"missing-{tag}", f"drifted-{tag}", f"rrule-{tag}"
    # Kept while no server mirrored them (as `ice-mcp schedules create` on the data folder does).
    orc.schedules.create(workflow="stamp", inputs={}, spec={"every_seconds": 3600}, schedule_id=missing)
    orc.schedules.create(workflow="stamp", inputs={}, spec={"cron": "0 9 * * MON", "timezone": "Europe/Paris"},
                         policy={"overlap": "allow_all", "catchup": {"window_seconds": 600}}, schedule_id=drifted)
    orc.schedules.create(workflow="stamp", inputs={}, spec={"rrule": "RRULE:FREQ=DAILY;BYHOUR=9"}, schedule_id=rrule)
    clock, client = await clock_of(orc)
    queue = clock.task_queue
    stale = Schedule(action=ScheduleActionStartWorkflow(SCHEDULE_TICK, drifted, id=PREFIX + drifted, task_queue=queue),
                     spec=ScheduleSpec(cron_expressions=["0 8 * * *"]))
    await client.create_schedule(PREFIX + drifted, stale)
    orphan = f"orphan-{tag}"
    await client.create_schedule(PREFIX + orphan, Schedule(
        action=ScheduleActionStartWorkflow(SCHEDULE_TICK, orphan, id=PREFIX + orphan, task_queue=queue),
        spec=ScheduleSpec(cron_expressions=["0 8 * * *"])))
    deadline = time.monotonic() + 20
    while True:  # the dev server lists a new schedule after a moment
        listed = {s.id async for s in await client.list_schedules()}
        if {PREFIX + drifted, PREFIX + orphan} <= listed:
            break
        assert time.monotonic() < deadline
        await asyncio.sleep(0.2)

    assert orc.store is not None
    done = await clock.reconcile(orc.store.schedules())
    assert done["created"] >= 1 and done["updated"] >= 1 and done["deleted"] >= 1 and done["server_timed"] >= 1
    described = await client.get_schedule_handle(PREFIX + drifted).describe()
    fixed = described.schedule
    assert fixed.spec.time_zone_name == "Europe/Paris"
    # Temporal's next action times are the schedule's own next fires (Mondays 09:00 in Paris).
    ours = [f["at"] for f in orc.schedules.get(drifted)["next_fires"]]
    theirs = [t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ") for t in described.info.next_action_times]
    assert theirs and theirs == ours[:len(theirs)]
    assert fixed.policy.overlap == ScheduleOverlapPolicy.ALLOW_ALL
    assert fixed.policy.catchup_window == timedelta(seconds=600)
    assert (await client.get_schedule_handle(PREFIX + missing).describe()).schedule.spec.intervals
    for gone in (orphan, rrule):  # an orphan deleted; an RRULE is timed by the servers' loop, not Temporal
        try:
            await client.get_schedule_handle(PREFIX + gone).describe()
            raise AssertionError(f"{gone} should have no Temporal Schedule")
        except RPCError as exc:
            assert exc.status == RPCStatusCode.NOT_FOUND
    again = await clock.reconcile(orc.store.schedules())  # in step now: nothing to repair
    assert again["created"] == again["updated"] == 0
    for schedule_id in (missing, drifted, rrule):
        orc.schedules.delete(schedule_id)
    await orc.schedules.mirrored()
    await clock.aclose()
