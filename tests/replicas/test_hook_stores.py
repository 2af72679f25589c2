"""The run-store contract for webhooks, deliveries, notification targets and the outbox, on both stores, with a
second connection standing for another process."""

from __future__ import annotations

import threading

from ice_mcp.store.base import RunStorage
from ice_mcp.store.hooks import HookRecord, HookSecret
from ice_mcp.store.outbox import NotifyTarget, OutboxEntry
from ice_mcp.store.records import RunRecord


def test_hooks_are_kept_listed_and_deleted_with_their_deliveries(store: RunStorage, other: RunStorage) -> None:
    hook = HookRecord("gh", "report", "workflow", auth="github", inputs={"topic": "{{ trigger.body.t }}"},
                      secrets=[HookSecret("whsec_new"), HookSecret("whsec_old", 1_800_000_000.5)], created_at=5.0)
    store.save_hook(hook)
    store.save_hook(HookRecord("a", "nightly", "network"))
    assert other.hook("gh") == hook and [h.id for h in other.hooks()] == ["a", "gh"]
    assert other.hook("nope") is None
    assert store.note_delivery("gh", "d1", "run-1") == "run-1"
    assert other.note_delivery("gh", "d1", "run-2") == "run-1"  # the first run a delivery started stays
    assert other.delivery_run("gh", "d1") == "run-1" and other.delivery_run("gh", "d2") is None
    assert other.delete_hook("gh") and not store.delete_hook("gh")
    assert store.hook("gh") is None and store.delivery_run("gh", "d1") is None


def test_racing_deliveries_keep_one_run(store: RunStorage, other: RunStorage) -> None:
    kept: list[str] = []
    stores = [store, other] * 4
    threads = [threading.Thread(target=lambda s=s, n=n: kept.append(s.note_delivery("h", "same", f"run-{n}")))
               for n, s in enumerate(stores)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(set(kept)) == 1 and len(kept) == 8


def entry(event: str, target: str = "t1", at: float = 100.0) -> OutboxEntry:
    return OutboxEntry(event, target, {"type": "run.failed", "data": {"run_id": event}}, next_at=at, created_at=at)


def test_the_outbox_leases_each_due_entry_to_one_claimer(store: RunStorage, other: RunStorage) -> None:
    store.save_target(NotifyTarget("t1", "http://example.org/in", "whsec_x", ["failed"], workflow="w"))
    assert other.target("t1") is not None and [t.id for t in other.targets()] == ["t1"]
    store.enqueue([entry("e1"), entry("e2", at=150.0), entry("e3", at=500.0)])
    store.enqueue([entry("e1", at=0.0)])  # the same event and target again: kept as it was
    first = store.claim_due(200.0, 30.0)
    assert sorted(e.event_id for e in first) == ["e1", "e2"] and first[0].next_at == 100.0
    assert other.claim_due(200.0, 30.0) == []  # leased to the first claimer
    assert [e.event_id for e in other.claim_due(231.0, 30.0)] == ["e1", "e2"]  # the lease ran out: due again
    done = first[0]
    done.state, done.attempts = "delivered", [{"at": "t", "status": 200}]
    store.settle(done)
    retry = first[1]
    retry.next_at, retry.attempts = 600.0, [{"at": "t", "status": 500}]
    store.settle(retry)
    assert sorted(e.event_id for e in other.claim_due(599.0, 30.0)) == ["e3"]
    assert [e.event_id for e in other.claim_due(620.0, 30.0)] == ["e2"]  # e3 is leased until 629
    history = {e.event_id: e for e in other.outbox("t1")}
    assert history["e1"].state == "delivered" and history["e1"].attempts == [{"at": "t", "status": 200}]
    assert set(history) == {"e1", "e2", "e3"}
    assert other.delete_target("t1") and store.outbox("t1") == [] and store.claim_due(10_000.0, 30.0) == []


def queued_run(run_id: str, status: str, at: float) -> RunRecord:
    return RunRecord(run_id=run_id, workflow="w", inputs={}, status=status, started_at=at)


def test_the_admission_queue_admits_its_first_run_in_order(store: RunStorage, other: RunStorage) -> None:
    held = {"max_concurrent": 1, "per_minute": None}
    for n in range(3):
        store.save(queued_run(f"q{n}", "queued", 10.0 + n))
    assert store.flush()
    assert store.admit_next("w", {"q0": 10.0}, 100.0, **held) == ("q0", 0.0)  # nothing ahead, a free slot
    store.save(queued_run("q0", "running", 10.0))
    assert store.flush()
    assert other.admit_next("w", {"q2": 12.0}, 100.0, **held)[0] is None  # q0 runs
    assert store.admit_next("w", {"q1": 11.0}, 100.0, **held)[0] is None
    store.save(queued_run("q0", "succeeded", 10.0))
    assert store.flush()
    head, wait = other.admit_next("w", {"q2": 12.0}, 101.0, **held)
    assert head is None and wait >= 1.0  # q1, queued earlier in another process, goes first
    assert store.admit_next("w", {"q1": 11.0}, 101.0, **held) == ("q1", 0.0)
    store.save(queued_run("q1", "cancelled", 11.0))
    assert store.flush()
    assert other.admit_next("w", {"q2": 12.0}, 102.0, **held) == ("q2", 0.0)


def test_a_queued_run_that_ended_or_was_never_written_leaves_the_queue(store: RunStorage, other: RunStorage) -> None:
    held = {"max_concurrent": None, "per_minute": 1}
    assert store.admit_next("w", {"ghost": 5.0}, 100.0, **held) == ("ghost", 0.0)  # not written yet: counted
    store.save(queued_run("late", "queued", 7.0))
    store.save(queued_run("gone", "queued", 6.0))
    assert store.flush()
    assert other.admit_next("w", {"gone": 6.0, "late": 7.0}, 101.0, **held) == (None, 59.0)
    store.save(queued_run("gone", "cancelled", 6.0))
    assert store.flush()
    assert store.admit_next("w", {"late": 7.0}, 161.0, **held) == ("late", 0.0)


def test_an_admission_whose_run_was_never_made_stops_counting(store: RunStorage, other: RunStorage) -> None:
    assert store.admit("w", "raced", 100.0, max_concurrent=1, per_minute=1) is None
    assert other.admit("w", "next", 100.5, max_concurrent=1, per_minute=1) is not None
    store.forget_admission("w", "raced")  # its idempotency key had started a run elsewhere first
    assert other.admit("w", "next", 100.5, max_concurrent=1, per_minute=1) is None
