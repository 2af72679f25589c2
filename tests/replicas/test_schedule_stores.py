"""Schedules and their firings on both run stores (SQLite in a data folder, a real redis-server): revisions,
the cursor's compare-and-set that decides each slot once among racing processes, firings and counts."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

import pytest

from ice_mcp.store.base import RunStorage
from ice_mcp.store.schedules import Firing, Outcome, ScheduleRecord, StaleRevision
from ice_mcp.store.sqlite import RunStore

SLOT = 1_767_225_600.25  # 2026-01-01T00:00:00.25Z: not a round number of seconds


def definition(schedule_id: str = "nightly", target: str = "report", **changes: object) -> ScheduleRecord:
    schedule = ScheduleRecord(id=schedule_id, target=target, target_kind="workflow",
                              spec={"cron": "0 3 * * *", "timezone": "Europe/Paris"}, inputs={"day": "today"},
                              policy={"overlap": "skip", "catchup": "one"})
    for name, value in changes.items():
        setattr(schedule, name, value)
    return schedule


def firing(slot: float, outcome: Outcome = "started", schedule_id: str = "nightly", **changes: object) -> Firing:
    made = Firing(schedule_id=schedule_id, slot=slot, outcome=outcome,
                  run_id=f"run-{slot}" if outcome == "started" else None, fired_at=slot + 0.5, replica="r1")
    for name, value in changes.items():
        setattr(made, name, value)
    return made


def test_saving_creates_then_replaces_the_definition_and_counts_revisions(store: RunStorage,
                                                                          other: RunStorage) -> None:
    before = store.now()
    created = store.save_schedule(definition(cursor=SLOT, running=["run-0"], counts={"started": 2}))
    assert created.revision == 1 and created.created_at == created.updated_at
    assert before - 1 <= created.created_at <= store.now() + 1
    assert (created.cursor, created.running, created.counts) == (SLOT, ["run-0"], {"started": 2})
    assert other.schedule("nightly") == created  # kept at once, for another process

    assert store.advance("nightly", SLOT, SLOT + 60, [firing(SLOT + 60)], running=["run-1"])
    changed = definition(target="report2", spec={"every": "5m"}, inputs={"day": "x"}, policy={}, paused=True,
                         note="maintenance", origin="declared", cursor=None, running=[], counts={})
    updated = other.save_schedule(changed, if_revision=1)
    assert updated.revision == 2 and updated.created_at == created.created_at
    assert updated.updated_at >= created.updated_at
    # The definition is replaced; where it is (cursor, running runs, counts) stays as stored.
    assert (updated.target, updated.spec, updated.inputs, updated.policy, updated.paused, updated.note,
            updated.origin) == ("report2", {"every": "5m"}, {"day": "x"}, {}, True, "maintenance", "declared")
    assert (updated.cursor, updated.running, updated.counts) == (SLOT + 60, ["run-1"], {"started": 3})
    assert store.schedule("nightly") == updated
    assert changed.revision == 0  # the record handed in is not changed

    assert store.save_schedule(definition(), if_revision=None).revision == 3  # no check asked for


def test_a_stale_revision_writes_nothing(store: RunStorage, other: RunStorage) -> None:
    store.save_schedule(definition())
    store.save_schedule(definition(note="second"))
    kept = store.schedule("nightly")
    with pytest.raises(StaleRevision) as caught:
        other.save_schedule(definition(target="elsewhere", paused=True), if_revision=1)
    assert caught.value.code == "stale_revision" and "revision 2" in caught.value.message
    assert caught.value.details["revision"] == 2
    assert store.schedule("nightly") == kept and store.schedules(target="elsewhere") == []
    with pytest.raises(StaleRevision):  # a schedule that does not exist has no revision to match
        store.save_schedule(definition("new"), if_revision=1)
    assert store.schedule("new") is None and [s.id for s in store.schedules()] == ["nightly"]


def test_schedules_are_listed_by_id_and_target_and_deleted_with_their_firings(store: RunStorage,
                                                                             other: RunStorage) -> None:
    for schedule_id, target in (("c", "report"), ("a", "report"), ("b", "digest")):
        store.save_schedule(definition(schedule_id, target))
    assert [s.id for s in other.schedules()] == ["a", "b", "c"]
    assert [s.id for s in other.schedules(target="report")] == ["a", "c"]
    assert other.schedules(target="none") == []

    assert store.advance("a", None, SLOT, [firing(SLOT, schedule_id="a")])
    assert store.add_firing(firing(SLOT + 1, "buffered", schedule_id="a"))
    assert other.delete_schedule("a") is True
    assert store.schedule("a") is None and store.firings("a") == []
    assert other.delete_schedule("a") is False
    # A new schedule under the old id starts from nothing: its slots are free again.
    store.save_schedule(definition("a"))
    assert store.schedule("a").revision == 1 and store.schedule("a").counts == {}  # type: ignore[union-attr]
    assert store.advance("a", None, SLOT, [firing(SLOT, schedule_id="a")])
    assert [s.id for s in store.schedules()] == ["a", "b", "c"]


def test_advance_is_a_compare_and_set_of_the_cursor(store: RunStorage, other: RunStorage) -> None:
    store.save_schedule(definition())
    assert not store.advance("missing", None, SLOT, [firing(SLOT, schedule_id="missing")])
    assert store.firings("missing") == []

    assert not store.advance("nightly", SLOT - 60, SLOT, [firing(SLOT)])  # the cursor is None, not SLOT - 60
    assert store.schedule("nightly").cursor is None and store.firings("nightly") == []  # type: ignore[union-attr]

    assert store.advance("nightly", None, SLOT, [firing(SLOT - 60, "missed", count=3), firing(SLOT)],
                         running=["run-a"])
    after = other.schedule("nightly")
    assert after is not None and after.cursor == SLOT and after.running == ["run-a"]
    assert after.counts == {"missed": 3, "started": 1}

    # Someone read the cursor before it moved: its claim fails and writes nothing.
    assert not other.advance("nightly", None, SLOT + 60, [firing(SLOT + 60)], running=["run-b"])
    assert not other.advance("nightly", SLOT + 1e-6, SLOT + 60, [firing(SLOT + 60)])
    assert store.schedule("nightly") == after and len(store.firings("nightly")) == 2

    # An empty claim moves the cursor only (every slot in between was skipped by policy); None keeps `running`.
    assert other.advance("nightly", SLOT, SLOT + 120, [])
    moved = store.schedule("nightly")
    assert moved is not None and moved.cursor == SLOT + 120 and moved.running == ["run-a"]
    assert moved.counts == after.counts


def test_advance_onto_a_decided_slot_writes_nothing(store: RunStorage) -> None:
    store.save_schedule(definition())
    assert store.add_firing(firing(SLOT + 60, "started"))  # a manual trigger took the slot already
    before = store.schedule("nightly")
    assert not store.advance("nightly", None, SLOT + 60, [firing(SLOT), firing(SLOT + 60, "skipped_overlap")],
                             running=["x"])
    assert store.schedule("nightly") == before
    assert [f.slot for f in store.firings("nightly")] == [SLOT + 60]
    # The same slot twice in one claim is refused too.
    assert not store.advance("nightly", None, SLOT, [firing(SLOT), firing(SLOT, "skipped_overlap")])
    assert store.schedule("nightly") == before and len(store.firings("nightly")) == 1


def test_a_firing_for_another_schedule_is_a_programming_error(store: RunStorage) -> None:
    store.save_schedule(definition())
    with pytest.raises(ValueError):
        store.advance("nightly", None, SLOT, [firing(SLOT, schedule_id="other")])
    assert store.schedule("nightly").cursor is None  # type: ignore[union-attr]


def test_racing_processes_decide_every_slot_exactly_once(store: RunStorage, other: RunStorage) -> None:
    store.save_schedule(definition())
    threads, rounds = 8, 50
    won: list[list[float]] = [[] for _ in range(threads)]
    outcomes: tuple[Outcome, Outcome] = ("started", "skipped_overlap")
    start = threading.Barrier(threads)

    def fire(index: int) -> None:
        mine = (store, other)[index % 2]
        start.wait()
        for _ in range(rounds):
            current = mine.schedule("nightly")
            assert current is not None
            slot = SLOT if current.cursor is None else current.cursor + 60.25
            if mine.advance("nightly", current.cursor, slot,
                            [firing(slot, replica=f"t{index}", outcome=outcomes[index % 2])]):
                won[index].append(slot)

    workers = [threading.Thread(target=fire, args=(i,)) for i in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()

    decided = sorted(slot for slots in won for slot in slots)
    assert len(decided) >= rounds  # every round some thread wins: at least one claim per round of the slowest
    # Slots of a quarter second stay exact in a float: one claim per slot, none missing, none twice.
    assert decided == [SLOT + 60.25 * i for i in range(len(decided))]
    final = other.schedule("nightly")
    assert final is not None and final.cursor == decided[-1]
    kept = store.firings("nightly", limit=10_000)
    assert [f.slot for f in kept] == decided[::-1]
    assert {(f.slot, f.replica) for f in kept} == {(slot, f"t{i}") for i, slots in enumerate(won) for slot in slots}
    started = sum(len(slots) for i, slots in enumerate(won) if i % 2 == 0)
    assert final.counts == {k: v for k, v in {"started": started,
                                               "skipped_overlap": len(decided) - started}.items() if v}


def test_add_firing_takes_a_slot_once(store: RunStorage, other: RunStorage) -> None:
    assert not store.add_firing(firing(SLOT))  # no schedule
    store.save_schedule(definition(cursor=SLOT))
    assert store.add_firing(firing(SLOT - 3600, "started"), running=["run-m"])
    assert not other.add_firing(firing(SLOT - 3600, "skipped_overlap"), running=["never"])
    after = other.schedule("nightly")
    assert after is not None and after.cursor == SLOT  # outside the cursor
    assert after.running == ["run-m"] and after.counts == {"started": 1}
    assert [(f.slot, f.outcome) for f in store.firings("nightly")] == [(SLOT - 3600, "started")]
    assert store.add_firing(firing(SLOT + 7, "buffered"))  # no `running` given: kept
    assert store.schedule("nightly").running == ["run-m"]  # type: ignore[union-attr]


def test_update_firing_is_a_compare_and_set_of_the_outcome(store: RunStorage, other: RunStorage) -> None:
    store.save_schedule(definition())
    assert store.advance("nightly", None, SLOT, [firing(SLOT, "buffered")])
    assert store.schedule("nightly").counts == {"buffered": 1}  # type: ignore[union-attr]

    assert not store.update_firing("nightly", SLOT + 1, expected="buffered", outcome="started")  # no such slot
    assert not store.update_firing("gone", SLOT, expected="buffered", outcome="started")
    assert not store.update_firing("nightly", SLOT, expected="missed", outcome="started", run_id="r")
    unchanged = store.firings("nightly")
    assert [(f.outcome, f.run_id, f.fired_at) for f in unchanged] == [("buffered", None, SLOT + 0.5)]

    before = store.now()
    assert other.update_firing("nightly", SLOT, expected="buffered", outcome="started", run_id="run-b",
                               running=["run-b"])
    assert not store.update_firing("nightly", SLOT, expected="buffered", outcome="buffer_dropped")  # lost the race
    (updated,) = store.firings("nightly")
    assert (updated.slot, updated.outcome, updated.run_id, updated.replica) == (SLOT, "started", "run-b", "r1")
    assert before - 1 <= updated.fired_at <= store.now() + 1
    schedule = store.schedule("nightly")
    assert schedule is not None and schedule.counts == {"started": 1} and schedule.running == ["run-b"]

    # Without a run id the one kept stays; without `running` the list stays.
    assert store.update_firing("nightly", SLOT, expected="started", outcome="skipped_overlap")
    (again,) = store.firings("nightly")
    assert (again.outcome, again.run_id) == ("skipped_overlap", "run-b")
    assert store.schedule("nightly").counts == {"skipped_overlap": 1}  # type: ignore[union-attr]
    assert store.schedule("nightly").running == ["run-b"]  # type: ignore[union-attr]


def test_firings_come_newest_first_limited_and_filtered(store: RunStorage, other: RunStorage) -> None:
    store.save_schedule(definition())
    outcomes = ["started", "skipped_overlap", "missed", "started", "buffered", "started", "paused"]
    slots = [SLOT + 60 * i for i in range(len(outcomes))]
    # Written out of order: the order comes from the slots.
    assert store.advance("nightly", None, slots[3], [firing(slots[i], outcomes[i]) for i in (3, 0, 2)])
    assert store.advance("nightly", slots[3], slots[-1], [firing(slots[i], outcomes[i]) for i in (6, 1, 5, 4)])
    newest = other.firings("nightly", limit=100)
    assert [f.slot for f in newest] == slots[::-1] and [f.outcome for f in newest] == outcomes[::-1]
    assert newest[0] == Firing("nightly", slots[6], "paused", None, slots[6] + 0.5, "r1", 1)
    assert [f.slot for f in other.firings("nightly")] == slots[::-1]  # 10 by default: all seven
    assert [f.slot for f in other.firings("nightly", limit=2)] == [slots[6], slots[5]]
    assert [f.slot for f in other.firings("nightly", outcome="started")] == [slots[5], slots[3], slots[0]]
    assert [f.slot for f in other.firings("nightly", outcome="started", limit=2)] == [slots[5], slots[3]]
    assert other.firings("nightly", outcome="buffer_dropped") == []
    assert other.firings("nightly", limit=0) == [] and other.firings("elsewhere") == []


def test_many_firings_filtered_across_pages(store: RunStorage) -> None:
    store.save_schedule(definition())
    many = [firing(SLOT + i, "started" if i % 100 == 0 else "missed") for i in range(1000)]
    assert store.advance("nightly", None, SLOT + 999, many)
    assert store.schedule("nightly").counts == {"started": 10, "missed": 990}  # type: ignore[union-attr]
    assert [f.slot for f in store.firings("nightly", outcome="started", limit=5)] == [
        SLOT + 900, SLOT + 800, SLOT + 700, SLOT + 600, SLOT + 500]


def test_one_slots_firing_is_read_by_its_exact_slot(store: RunStorage, other: RunStorage) -> None:
    store.save_schedule(definition())
    assert store.advance("nightly", None, SLOT + 60, [firing(SLOT, "started"), firing(SLOT + 60, "missed")])
    assert store.add_firing(firing(0.1 + 0.2, "started"))
    found = other.firing("nightly", SLOT + 60)
    assert found is not None and (found.slot, found.outcome) == (SLOT + 60, "missed")
    assert other.firing("nightly", 0.1 + 0.2) is not None and other.firing("nightly", 0.3) is None
    assert other.firing("nightly", SLOT + 30) is None and other.firing("elsewhere", SLOT) is None


def test_floats_round_trip_exactly(store: RunStorage, other: RunStorage) -> None:
    odd = [SLOT, 0.1 + 0.2, 1_767_225_600.123456789, 2.0**-30, 1e300, 1_767_225_601.0]
    store.save_schedule(definition(cursor=SLOT))
    assert other.schedule("nightly").cursor == SLOT  # type: ignore[union-attr]
    cursor: float | None = SLOT
    for value in odd[1:]:
        assert other.advance("nightly", cursor, value, [firing(value, fired_at=value * 3)])
        read = store.schedule("nightly")
        assert read is not None and read.cursor == value and repr(read.cursor) == repr(value)
        cursor = read.cursor  # compare-and-set with what was read back
    kept = {f.slot: f.fired_at for f in store.firings("nightly", limit=100)}
    assert kept == {value: value * 3 for value in odd[1:]}
    assert store.update_firing("nightly", 0.1 + 0.2, expected="started", outcome="skipped_overlap")
    assert not store.update_firing("nightly", 0.3, expected="skipped_overlap", outcome="started")  # 0.3 != 0.1+0.2
    assert [f.outcome for f in store.firings("nightly", limit=100) if f.slot == 0.1 + 0.2] == ["skipped_overlap"]


def test_the_clock_and_the_scheduler_beat(store: RunStorage, other: RunStorage) -> None:
    assert abs(store.now() - time.time()) < 5
    first, second = store.now(), store.now()
    assert second >= first
    assert store.scheduler_alive_at() is None
    store.note_scheduler(SLOT)
    assert other.scheduler_alive_at() == SLOT
    other.note_scheduler(SLOT - 10)  # a late, older beat never sets it back
    assert store.scheduler_alive_at() == SLOT
    other.note_scheduler(SLOT + 0.5)
    assert store.scheduler_alive_at() == SLOT + 0.5


def test_every_save_and_delete_moves_the_generation_other_processes_watch(store: RunStorage,
                                                                          other: RunStorage) -> None:
    seen = [other.schedules_generation()]
    created = store.save_schedule(definition())
    seen.append(other.schedules_generation())
    store.save_schedule(definition(paused=True), if_revision=created.revision)  # pause, resume and update save
    seen.append(other.schedules_generation())
    assert store.advance("nightly", None, SLOT, [firing(SLOT)])  # firings are the loops' own: no change
    seen.append(other.schedules_generation())
    with pytest.raises(StaleRevision):
        store.save_schedule(definition(), if_revision=1)  # refused: nothing written, nothing moved
    seen.append(other.schedules_generation())
    assert store.delete_schedule("nightly")
    seen.append(other.schedules_generation())
    assert seen[1] != seen[0] and seen[2] != seen[1] and seen[3] == seen[2] == seen[4] and seen[5] != seen[4]


def test_an_older_sqlite_file_gains_the_schedule_tables(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite3"
    old = sqlite3.connect(path)
    old.executescript("CREATE TABLE runs (run_id TEXT PRIMARY KEY, workflow TEXT NOT NULL, status TEXT NOT NULL,"
                      " started_at REAL, idempotency_key TEXT, record TEXT NOT NULL);")
    old.close()
    store = RunStore(path)
    try:
        assert store.schedules() == [] and store.scheduler_alive_at() is None
        assert store.save_schedule(definition()).revision == 1
        assert store.advance("nightly", None, SLOT, [firing(SLOT)])
    finally:
        store.close()
    reopened = RunStore(path)
    try:
        assert reopened.schedule("nightly").cursor == SLOT  # type: ignore[union-attr]
    finally:
        reopened.close()
