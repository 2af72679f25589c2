"""The run-store contract for webhooks, deliveries, notification targets and the outbox, on both stores, with a
second connection standing for another process."""

from __future__ import annotations

import threading

from ice_mcp.store.base import RunStorage
from ice_mcp.store.hooks import HookRecord, HookSecret
from ice_mcp.store.outbox import NotifyTarget, OutboxEntry


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
