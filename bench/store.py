"""The run store at 10k, 100k and 1M runs: run_list pages and run_status reads, against a floor.

1. Ours: a store (the data folder's SQLite, Redis with `--redis`, PostgreSQL with `--postgres`) filled with N
   finished runs through its own writer (records of three nodes, ten workflows, 5 % failed, 20 % started by a
   schedule, 10 % by a webhook); PostgreSQL with `--copy` is loaded with COPY instead (the same rows, faster).
   Then, 300 times each: `page()` newest first (first page of 50), filtered by workflow, by status `failed`,
   by trigger `webhook`, the 10th page by cursor; and `get(run_id)` of a random run (run_status's read).
   p50/p99 of each, and the bytes of a stored summary.
2. The floor (SQLite): the same first pages as bare `SELECT summary ... ORDER BY started_at DESC LIMIT 50`
   on the same file and indexes, and a bare `SELECT record ... WHERE run_id = ?`: the ratio ours / floor is
   what the store's own layer costs (parsing, cursors, the record's dataclass).
Run: `.venv/bin/python bench/store.py [--sizes 10000,100000,1000000] [--redis] [--postgres [--copy]] [--no-sqlite]`.
PostgreSQL is a server of its own (durable: fsync on), started by the bench like the tests start theirs.
"""

from __future__ import annotations

import argparse
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # ice_mcp_dev: in the checkout, not installed

from ice_mcp.store.base import RunStorage
from ice_mcp.store.records import NodeRecord, RunRecord
from ice_mcp.store.sqlite import open_store
from ice_mcp_dev.cluster import PostgresProcess, RedisProcess

SAMPLES = 300


def record(n: int, rng: random.Random) -> RunRecord:
    roll = rng.random()
    trigger = ({"kind": "schedule", "schedule_id": "nightly", "slot": "2026-11-26T02:00:00Z"} if roll < 0.2 else
               {"kind": "webhook", "hook_id": "gh", "delivery_id": f"d{n}"} if roll < 0.3 else None)
    failed = rng.random() < 0.05
    started = 1_700_000_000.0 + n
    nodes = {name: NodeRecord(status="succeeded", attempts=1, duration_ms=12.5, output={"rows": n % 97, "ok": True})
             for name in ("load", "summarise", "send")}
    return RunRecord(run_id=f"{n:032x}", workflow=f"w{n % 10}", inputs={"n": n, "week": n // 1000},
                     status="failed" if failed else "succeeded", outputs=None if failed else {"total": n * 3},
                     error={"code": "node_failed", "message": "node 'send' failed: 550 mailbox unavailable"}
                     if failed else None, cost_usd=0.0012, started_at=started, finished_at=started + 0.8,
                     duration_ms=800.0, nodes=nodes, trigger=trigger)


def fill(store: RunStorage, size: int) -> float:
    rng = random.Random(size)
    began = time.perf_counter()
    for n in range(size):
        store.save(record(n, rng))
        if n % 20_000 == 19_999:
            store.flush(None)
    store.flush(None)
    return time.perf_counter() - began


def fill_copy(store: Any, size: int) -> float:
    """The same runs as `fill`, into the PostgreSQL store's runs table with COPY (its writer's rows, in one go)."""
    from ice_mcp.store.postgres import _run_row

    rng = random.Random(size)
    began = time.perf_counter()
    columns = ("run_id, workflow, status, started_at, idempotency_key, record, owner, blueprint, version, retry_of,"
               " principal, trigger_kind, summary, finished_at")
    with store._conn() as conn:
        with conn.cursor() as cursor, cursor.copy(f"COPY runs ({columns}) FROM STDIN") as copy:
            for n in range(size):
                run = record(n, rng)
                copy.write_row(_run_row((run.run_id, run.workflow, run.status, run.started_at, None, run, None, None,
                                         None, None)))
        conn.execute("VACUUM ANALYZE runs")
    return time.perf_counter() - began


def timed(work: Callable[[], Any]) -> tuple[float, float]:
    times = []
    for _ in range(SAMPLES):
        began = time.perf_counter()
        work()
        times.append((time.perf_counter() - began) * 1000)
    times.sort()
    return statistics.median(times), times[int(len(times) * 0.99) - 1]


def tenth_page(store: RunStorage) -> None:
    cursor = None
    for _ in range(10):
        _, cursor = store.page(limit=50, cursor=cursor)


def measure(store: RunStorage, size: int) -> dict[str, tuple[float, float]]:
    rng = random.Random(1)
    return {
        "run_list": timed(lambda: store.page(limit=50)),
        "run_list workflow": timed(lambda: store.page(workflow="w3", limit=50)),
        "run_list failed": timed(lambda: store.page(status="failed", limit=50)),
        "run_list webhook": timed(lambda: store.page(trigger="webhook", limit=50)),
        "run_list page 10": timed(lambda: tenth_page(store)),
        "run_status": timed(lambda: store.get(f"{rng.randrange(size):032x}")),
    }


def floor(path: Path, size: int) -> dict[str, tuple[float, float]]:
    db = sqlite3.connect(path)
    rng = random.Random(1)

    def query(sql: str, *args: Any) -> Callable[[], Any]:
        return lambda: db.execute(sql, args).fetchall()

    order = " ORDER BY started_at DESC, rowid DESC LIMIT 50"
    return {
        "run_list": timed(query("SELECT summary FROM runs" + order)),
        "run_list workflow": timed(query("SELECT summary FROM runs WHERE workflow = ?" + order, "w3")),
        "run_list failed": timed(query("SELECT summary FROM runs WHERE status = ?" + order, "failed")),
        "run_list webhook": timed(query("SELECT summary FROM runs WHERE trigger_kind = ?" + order, "webhook")),
        "run_status": timed(lambda: db.execute("SELECT record FROM runs WHERE run_id = ?",
                                               (f"{rng.randrange(size):032x}",)).fetchall()),
    }


def summary_bytes(store: RunStorage) -> float:
    rows, _ = store.page(limit=200)
    return statistics.mean(len(str(row).encode()) for row in rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--redis", action="store_true", help="measure the Redis store too")
    parser.add_argument("--postgres", action="store_true", help="measure the PostgreSQL store too")
    parser.add_argument("--copy", action="store_true", help="load PostgreSQL with COPY, not through its writer")
    parser.add_argument("--no-sqlite", action="store_true", help="leave the SQLite store out")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="ice-bench-store-"))
    redis, postgres = None, None
    if args.redis:
        redis = RedisProcess(root / "redis")
        redis.start()
    if args.postgres:
        postgres = PostgresProcess(root / "postgres", durable=True)
        postgres.start()
    try:
        for size in (int(s) for s in args.sizes.split(",")):
            folder = root / f"sqlite-{size}"
            stores: list[tuple[str, RunStorage]] = [] if args.no_sqlite else [("sqlite", open_store(None, folder))]
            if redis is not None:
                stores.append(("redis", open_store(redis.url(size % 16), root)))
            if postgres is not None:
                stores.append(("postgresql", open_store(postgres.create_database(f"runs_{size}"), root)))
            for name, store in stores:
                seconds = fill_copy(store, size) if name == "postgresql" and args.copy else fill(store, size)
                print(f"\n{name}, {size:,} runs (filled in {seconds:.0f} s; summary ~{summary_bytes(store):.0f} B)")
                ours = measure(store, size)
                bare = floor(folder / "runs.sqlite3", size) if name == "sqlite" else {}
                print(f"  {'':18} {'p50 ms':>8} {'p99 ms':>8}" + (f" {'floor p99':>10} {'ratio':>6}" if bare else ""))
                for what, (p50, p99) in ours.items():
                    line = f"  {what:18} {p50:8.3f} {p99:8.3f}"
                    if what in bare:
                        line += f" {bare[what][1]:10.3f} {p99 / bare[what][1]:6.1f}x"
                    print(line)
                store.close()
    finally:
        if redis is not None:
            redis.stop()
        if postgres is not None:
            postgres.stop()


if __name__ == "__main__":
    main()
