"""An orchestrator's schedules: created, read, changed, paused, triggered and deleted, checked before anything is kept.

The run store is the source of truth (every process on it sees the same schedules); the firing loop
(`firing.py`) starts their runs. Answers are plain JSON, as the built-in tools return them.
"""

from __future__ import annotations

import asyncio
import builtins
import logging
import re
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

from ice_mcp.blueprint.issues import nearest
from ice_mcp.blueprint.models import SCHEDULE_ID
from ice_mcp.desks import NamedTargets, visible
from ice_mcp.errors import IceError, every_problem
from ice_mcp.principals import acting_id, may_see
from ice_mcp.schedules.firing import (
    MAX_DUE,
    FiringHost,
    FiringLoop,
    FiringStore,
    previous_slot,
    start_slot,
)
from ice_mcp.schedules.timing import (
    ScheduleInvalid,
    ScheduleSpec,
    instant,
    parse_instant,
    parse_policy,
    parse_spec,
    preview,
    slot_text,
    slots_after,
    slots_between,
)
from ice_mcp.store.schedules import Firing, ScheduleRecord, TargetKind

if TYPE_CHECKING:
    from ice_mcp.blueprint.models import DeclaredSchedule

logger = logging.getLogger(__name__)
SCHEDULE_ID_TEXT = re.compile(SCHEDULE_ID)
TICK_WAIT_SECONDS = 10.0  # a trigger handed to Temporal starts here if its tick has not come by then
MAX_BACKFILL = 1000  # slots one backfill may start


def _fires(spec: ScheduleSpec, after: float, count: int) -> list[dict[str, str]]:
    return list(preview(spec, count=count, start=instant(after))["fires"])


def _under(path: str, exc: ScheduleInvalid) -> list[dict[str, str]]:
    """A spec's or policy's problems, their paths under the argument's name."""
    problems = exc.details.get("errors") or [{"path": "", "message": exc.message}]
    return [{"path": f"{path}.{p['path']}".rstrip("."), "message": p["message"]} for p in problems]


class Mirror(Protocol):
    """Where else the schedules live (Temporal Schedules on `--engine temporal`), kept in step with the store."""

    def changed(self, schedule: ScheduleRecord) -> None: ...
    def deleted(self, schedule_id: str) -> None: ...
    async def settled(self) -> None: ...
    async def trigger(self, schedule_id: str) -> bool: ...
    async def backfill(self, schedule_id: str, start: datetime, end: datetime) -> bool: ...
    async def aclose(self) -> None: ...


class ScheduleHost(FiringHost, NamedTargets, Protocol):
    """What the schedule desk asks of its orchestrator: all its firing loop asks, the workflows and networks a
    schedule may name, and the run store its schedules are kept in."""

    @property
    def store(self) -> FiringStore | None: ...


class Schedules:
    """The schedule desk of one orchestrator; `loop` is this process's part in firing them, `mirror` the
    Temporal Schedules that tick for them on the temporal engine."""

    def __init__(self, orc: ScheduleHost) -> None:
        self._orc = orc
        self.loop: FiringLoop | None = None
        self.mirror: Mirror | None = None
        self.clock: Callable[[], float] | None = None  # the store's clock unless a test sets one

    def now(self) -> float:
        return self.clock() if self.clock is not None else self.store.now()

    @property
    def store(self) -> FiringStore:
        if self._orc.store is None:
            raise IceError("schedules are kept in the run store, and this orchestrator has none", code="no_store")
        return self._orc.store

    def start_loop(self) -> FiringLoop:
        """Take part in firing this store's schedules (every server does, stdio included)."""
        if self.loop is None:
            self.loop = FiringLoop(self._orc, self.store, clock=self.now)
            self.loop.start()
        return self.loop

    async def stop_loop(self) -> None:
        if self.loop is not None:
            await self.loop.stop()
            self.loop = None
        if self.mirror is not None:
            await self.mirror.aclose()
            self.mirror = None

    # -- reading ----------------------------------------------------------------------------------

    @staticmethod
    def preview(spec: Mapping[str, Any], count: int = 10, start: str | None = None) -> dict[str, Any]:
        """The next `count` fires of a spec from `start` (default now), in words, with warnings. Needs no state."""
        parsed = parse_spec(spec)
        begin = parse_instant(start) if start is not None else datetime.now(UTC)
        return preview(parsed, count=count, start=begin)

    def get(self, schedule_id: str) -> dict[str, Any]:
        schedule = self._schedule(schedule_id)
        spec = parse_spec(schedule.spec)
        return {**self._summary(schedule, spec, 10),
                "firings": [self._firing(f) for f in self.store.firings(schedule_id, limit=10)],
                "scheduler_alive_at": slot_text(self.store.scheduler_alive_at())}

    def list(self, workflow: str | None = None) -> dict[str, Any]:
        return {"schedules": [self._summary(s, parse_spec(s.spec), 3) for s in self.store.schedules(target=workflow)
                              if may_see(s.principal)],
                "scheduler_alive_at": slot_text(self.store.scheduler_alive_at())}

    def history(self, schedule_id: str, limit: int = 50, outcome: str | None = None) -> dict[str, Any]:
        self._schedule(schedule_id)
        return {"firings": [self._firing(f) for f in self.store.firings(schedule_id, limit=limit, outcome=outcome)]}

    def run_ids(self, schedule_id: str) -> builtins.list[str]:
        """The runs a schedule started, newest slot first (from its firings)."""
        self._schedule(schedule_id)
        return [f.run_id for f in self.store.firings(schedule_id, limit=1000) if f.run_id]

    # -- changing ---------------------------------------------------------------------------------

    def create(self, *, workflow: str | None = None, network: str | None = None, inputs: Mapping[str, Any] | None,
               spec: Mapping[str, Any], policy: Mapping[str, Any] | None = None, schedule_id: str | None = None,
               origin: str = "runtime", replace: bool = False) -> dict[str, Any]:
        """Check everything, then keep the schedule; `replace` (declared schedules) updates one of the same id."""
        saved, parsed = self._keep(workflow=workflow, network=network, inputs=inputs, spec=spec, policy=policy,
                                   schedule_id=schedule_id, origin=origin, replace=replace)
        return self._summary(saved, parsed, 3)

    def _keep(self, *, workflow: str | None, network: str | None, inputs: Mapping[str, Any] | None,
              spec: Mapping[str, Any], policy: Mapping[str, Any] | None, schedule_id: str | None, origin: str,
              replace: bool) -> tuple[ScheduleRecord, ScheduleSpec]:
        """`create` without its answer (the next fires in words): a declared schedule kept at start needs none."""
        if bool(workflow) == bool(network):
            path = "network" if workflow else "workflow"
            raise ScheduleInvalid("a schedule runs either a `workflow` or a `network`: name one",
                                  details={"errors": [{"path": path, "message": "one of workflow, network"}]})
        kind: TargetKind = "network" if network else "workflow"
        target = network or workflow or ""
        schedule_id = schedule_id or f"s_{uuid.uuid4().hex[:12]}"
        parsed, policy_doc, prepared = self._checked(kind, target, inputs or {}, spec, policy, schedule_id)
        existing = self.store.schedule(schedule_id)
        if existing is not None and not replace:
            raise IceError(f"a schedule {schedule_id!r} exists: update or delete it", code="schedule_exists",
                           details={"id": schedule_id})
        record = existing or ScheduleRecord(id=schedule_id, target=target, target_kind=kind, spec={},
                                            principal=acting_id())
        record.target, record.target_kind, record.spec, record.inputs, record.policy, record.origin = (
            target, kind, parsed.model_dump(mode="json", exclude_none=True), prepared, policy_doc, origin)
        if existing is None:
            record.cursor = self._start_cursor(parsed)
        saved = self.store.save_schedule(record)
        self._poke(saved, parsed)
        return saved, parsed

    def declare(self, name: str, wanted_schedules: Sequence[DeclaredSchedule], kind: TargetKind = "workflow"
                ) -> builtins.list[str]:
        """Keep the schedules a blueprint or network manifest named `name` declares (`schedules:`), by their
        stable ids, and delete those it no longer declares; unchanged ones are left as they are. Needs a run
        store (without one: nothing)."""
        if self._orc.store is None:
            return []
        declared = {s.id: s for s in self.store.schedules(target=name)
                    if s.origin == "declared" and s.target_kind == kind}
        kept: builtins.list[str] = []
        for index, wanted in enumerate(wanted_schedules):
            schedule_id = wanted.id or (name if index == 0 else f"{name}.{index + 1}")
            current = declared.pop(schedule_id, None)
            spec, policy, inputs = self._checked(kind, name, wanted.inputs, wanted.spec, wanted.policy, schedule_id)
            if current is None or (current.spec, current.policy, current.inputs) != (
                    spec.model_dump(mode="json", exclude_none=True), policy, inputs):
                self._keep(workflow=name if kind == "workflow" else None,
                           network=name if kind == "network" else None, inputs=wanted.inputs, spec=wanted.spec,
                           policy=wanted.policy, schedule_id=schedule_id, origin="declared", replace=True)
            kept.append(schedule_id)
        for gone in declared:
            self._delete(gone)
        return kept

    def update(self, schedule_id: str, *, spec: Mapping[str, Any] | None = None,
               policy: Mapping[str, Any] | None = None, inputs: Mapping[str, Any] | None = None,
               if_revision: int | None = None) -> dict[str, Any]:
        schedule = self._schedule(schedule_id)
        parsed, policy_doc, prepared = self._checked(
            schedule.target_kind, schedule.target, schedule.inputs if inputs is None else inputs,
            schedule.spec if spec is None else spec, schedule.policy if policy is None else policy, schedule_id)
        schedule.spec = parsed.model_dump(mode="json", exclude_none=True)
        schedule.policy, schedule.inputs = policy_doc, prepared
        saved = self.store.save_schedule(schedule, if_revision=schedule.revision if if_revision is None else if_revision)
        self._poke(saved, parsed)
        return self._summary(saved, parsed, 3)

    def pause(self, schedule_id: str, note: str | None = None) -> dict[str, Any]:
        schedule = self._schedule(schedule_id)
        schedule.paused, schedule.note = True, note
        saved, spec = self.store.save_schedule(schedule), parse_spec(schedule.spec)
        self._poke(saved, spec)
        return self._summary(saved, spec, 3)

    def resume(self, schedule_id: str, catch_up: bool = False) -> dict[str, Any]:
        """Go on firing; without `catch_up` the slots passed while paused are one `paused` record, not runs."""
        schedule = self._schedule(schedule_id)
        spec = parse_spec(schedule.spec)
        if not catch_up:
            now = self.now()
            passed = slots_between(spec, instant(schedule.decided_until), instant(now), MAX_DUE)
            if passed:
                last = passed[-1].timestamp()
                firing = Firing(schedule_id, last, "paused", fired_at=now, replica=self._orc.owner.owner_id,
                                count=len(passed))
                # False when the loop moved the cursor meanwhile: then those slots were decided there.
                self.store.advance(schedule_id, schedule.cursor, last, [firing])
        schedule = self._schedule(schedule_id)  # as it is now, cursor and all
        schedule.paused, schedule.note = False, None
        saved = self.store.save_schedule(schedule)
        self._poke(saved, spec)
        return self._summary(saved, spec, 3)

    async def trigger(self, schedule_id: str) -> dict[str, Any]:
        """A run now, outside the slots (its firing's slot is now). The slot is claimed first; on Temporal the
        schedule handle's trigger starts it (here if its tick is late)."""
        schedule = self._schedule(schedule_id)
        now = self.now()
        self.store.add_firing(Firing(schedule_id, now, "started", fired_at=now, replica=self._orc.owner.owner_id))
        if self.mirror is not None and await self._mirrored(self.mirror.trigger(schedule_id)):
            if (run_id := (await self._started_by_ticks(schedule_id, [now])).get(now)) is not None:
                return {"schedule_id": schedule_id, "slot": slot_text(now), "run_id": run_id}
        run_id = await self._start_claimed(schedule, now)
        return {"schedule_id": schedule_id, "slot": slot_text(now), "run_id": run_id}

    async def on_tick(self, schedule_id: str, scheduled_at: float) -> None:
        """Temporal's clock ticked for a schedule: start its claimed triggers, then decide its due slots as the
        firing loop does (the store's compare-and-set keeps each slot to one run, whoever decides first)."""
        schedule = self.store.schedule(schedule_id)
        if schedule is None:
            return
        # A trigger's claim is among the newest firings; a backfill's tick comes at its slot's own time.
        claims = [f for f in self.store.firings(schedule_id, limit=10, outcome="started") if f.run_id is None]
        backfilled = self.store.firing(schedule_id, scheduled_at)
        if backfilled is not None and backfilled.outcome == "started" and backfilled.run_id is None:
            claims.append(backfilled)
        for slot in sorted({f.slot for f in claims}):
            await self._start_claimed(schedule, slot)
        loop = self.loop or FiringLoop(self._orc, self.store, clock=self.now)
        await loop.fire(schedule, self.now())  # it reads the schedule again when a slot is due

    async def _start_claimed(self, schedule: ScheduleRecord, slot: float) -> str:
        """Start the run of a slot claimed by a trigger (any time) or a backfill (one of the spec's slots),
        whose firing has no run yet, and record it."""
        spec = parse_spec(schedule.spec)
        if slots_between(spec, instant(slot - 1e-6), instant(slot), 1):
            run_id = await start_slot(self._orc, schedule, slot, previous_slot(spec, slot), backfill=True)
        else:
            run_id = await start_slot(self._orc, schedule, slot, schedule.cursor, manual=True)
        fresh = self.store.schedule(schedule.id) or schedule
        self.store.update_firing(schedule.id, slot, expected="started", outcome="started", run_id=run_id,
                                 running=[*fresh.running, run_id] if run_id not in fresh.running else None)
        return run_id

    async def _mirrored(self, call: Awaitable[bool]) -> bool:
        """A call to Temporal's schedule; False (logged) when it has none for this schedule or is away."""
        try:
            return await call
        except Exception as exc:
            logger.warning("schedules: Temporal did not take the call: %s", exc)
            return False

    async def mirrored(self) -> None:
        """Until the schedule changes made here reached Temporal (on the temporal engine)."""
        if self.mirror is not None:
            await self.mirror.settled()

    async def backfill(self, schedule_id: str, start: str, end: str) -> dict[str, Any]:
        """Runs for the slots between `start` and `end` (inclusive) that have none yet and that the schedule
        has decided (later ones are its own to fire). Each slot is claimed first; on Temporal the schedule
        handle's backfill starts them (here if its ticks are late)."""
        schedule = self._schedule(schedule_id)
        spec = parse_spec(schedule.spec)
        begin, until = parse_instant(start), parse_instant(end)
        if until <= begin:
            raise ScheduleInvalid("`end` must come after `start`",
                                  details={"errors": [{"path": "end", "message": "before start"}]})
        slots = slots_between(spec, instant(begin.timestamp() - 1e-6), until, MAX_BACKFILL + 1)
        if len(slots) > MAX_BACKFILL:
            raise ScheduleInvalid(f"a backfill starts at most {MAX_BACKFILL} runs; this range has more",
                                  details={"errors": [{"path": "end", "message": "too many slots"}]})
        now, me = self.now(), self._orc.owner.owner_id
        past = [t for t in (s.timestamp() for s in slots) if t <= schedule.decided_until]
        claimed = [t for t in past if self.store.add_firing(Firing(schedule_id, t, "started", fired_at=now,
                                                                   replica=me))]
        runs: dict[float, str] = {}
        if claimed and self.mirror is not None and await self._mirrored(
                self.mirror.backfill(schedule_id, instant(claimed[0]), instant(claimed[-1]))):
            runs = await self._started_by_ticks(schedule_id, claimed)
        for slot in claimed:
            if slot not in runs:
                runs[slot] = await self._start_claimed(schedule, slot)
        return {"schedule_id": schedule_id, "slots": len(slots), "later_slots": len(slots) - len(past),
                "started": [{"slot": slot_text(slot), "run_id": runs[slot]} for slot in claimed]}

    async def _started_by_ticks(self, schedule_id: str, slots: builtins.list[float]) -> dict[float, str]:
        """The runs Temporal's ticks started for claimed slots, waited for up to TICK_WAIT_SECONDS."""
        runs: dict[float, str] = {}
        deadline = time.monotonic() + TICK_WAIT_SECONDS
        while len(runs) < len(slots) and time.monotonic() < deadline:
            for slot in slots:
                if slot not in runs and (found := self.store.firing(schedule_id, slot)) is not None and found.run_id:
                    runs[slot] = found.run_id
            if len(runs) < len(slots):
                await asyncio.sleep(0.05)
        if len(runs) < len(slots):
            logger.warning("schedule %s: Temporal's ticks started %d of %d slots in %.0f s: the rest start here",
                           schedule_id, len(runs), len(slots), TICK_WAIT_SECONDS)
        return runs

    def delete(self, schedule_id: str) -> dict[str, Any]:
        self._schedule(schedule_id)  # raises unknown_schedule (another principal's too) with the nearest id
        return {"id": schedule_id, "deleted": self._delete(schedule_id)}

    def _delete(self, schedule_id: str) -> bool:
        if self.mirror is not None:
            self.mirror.deleted(schedule_id)
        return self.store.delete_schedule(schedule_id)

    # -- helpers ----------------------------------------------------------------------------------

    def _checked(self, kind: TargetKind, target: str, inputs: Mapping[str, Any], spec: Mapping[str, Any],
                 policy: Mapping[str, Any] | None, schedule_id: str
                 ) -> tuple[ScheduleSpec, dict[str, Any], dict[str, Any]]:
        """Every problem at once: the id, the spec, the policy, the workflow (or network) and its inputs."""
        errors: list[dict[str, str]] = []
        parsed = policy_doc = None
        if not SCHEDULE_ID_TEXT.match(schedule_id):
            errors.append({"path": "id", "message": "1-64 letters, digits, '_', '.' or '-', starting with a letter or digit"})
        try:
            parsed = parse_spec(spec)
        except ScheduleInvalid as exc:
            errors.extend(_under("spec", exc))
        try:
            policy_doc = parse_policy(policy).model_dump(mode="json")
        except ScheduleInvalid as exc:
            errors.extend(_under("policy", exc))
        prepared: dict[str, Any] = dict(inputs)
        if kind == "network":
            if target not in self._orc.networks:
                suggestion = nearest(target, self._orc.networks)
                errors.append({"path": "network", "message": f"no network named {target!r}" + (
                    f"; did you mean {suggestion!r}?" if suggestion else " (a served folder's networks/ holds them)")})
            if inputs:
                errors.append({"path": "inputs", "message": "a network takes no inputs: its workflows' inputs are "
                                                            "in its manifest (templates there see `trigger`)"})
        else:
            try:
                plan = self._orc.workflow_plan(target)
            except IceError as exc:
                errors.append({"path": "workflow", "message": exc.message})
            else:
                prepared, problems = plan.prepare_inputs(inputs)
                errors.extend({"path": f"inputs.{p['path']}".rstrip("."), "message": p["message"]} for p in problems)
        if errors or parsed is None or policy_doc is None:
            first = errors[0] if errors else {"path": "", "message": "invalid schedule"}
            raise ScheduleInvalid(every_problem(f"{first['path']}: {first['message']}", len(errors)),
                                  details={"errors": errors})
        return parsed, policy_doc, prepared

    def _start_cursor(self, spec: ScheduleSpec) -> float:
        # A new schedule fires from now on (or from its start_at), never for slots before it existed.
        now = self.now()
        if spec.start_at is not None and spec.start_at.timestamp() > now:
            return spec.start_at.timestamp() - 1e-6
        return now

    def _schedule(self, schedule_id: str) -> ScheduleRecord:
        return visible("schedule", schedule_id, self.store.schedule(schedule_id), self.store.schedules)

    def _summary(self, schedule: ScheduleRecord, spec: ScheduleSpec, fires: int) -> dict[str, Any]:
        after = max(schedule.cursor or 0.0, self.now())
        return {
            "id": schedule.id, schedule.target_kind: schedule.target, "inputs": schedule.inputs, "spec": schedule.spec,
            "policy": schedule.policy, "state": {"paused": schedule.paused, "note": schedule.note},
            "revision": schedule.revision, "origin": schedule.origin,
            "created_at": slot_text(schedule.created_at), "updated_at": slot_text(schedule.updated_at),
            "next_fires": _fires(spec, after, fires),
            "counts": dict(schedule.counts), "running": list(schedule.running),
        }

    @staticmethod
    def _firing(firing: Firing) -> dict[str, Any]:
        return {"slot": slot_text(firing.slot), "outcome": firing.outcome, "run_id": firing.run_id,
                "fired_at": slot_text(firing.fired_at), "replica": firing.replica, "count": firing.count}

    def _poke(self, schedule: ScheduleRecord, spec: ScheduleSpec) -> None:
        """Tell Temporal (if it keeps the clock) and wake this process's loop, only if the schedule's next slot
        comes before it would look anyway (a burst of creates must not walk every schedule once per create)."""
        if self.mirror is not None:
            self.mirror.changed(schedule)
        if self.loop is not None:
            following = slots_after(spec, instant(schedule.decided_until), 1)
            if following:
                self.loop.poke(following[0].timestamp() + spec.jitter_seconds)

