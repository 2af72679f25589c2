"""Schedules: how late slots fire with several servers on one store, and what an idle schedule costs.

1. Fire lag: N `ice-mcp serve --http` processes on one store (a redis-server the bench starts, or one
   shared data folder with --state sqlite) fire S schedules of `every_seconds: 1` (created through /rpc
   `schedule.create`, default policy: overlap `skip`) for T seconds, slots at whole seconds from
   `start_at` to `end_at`. Each slot's run is one node, the `stamp` tool of bench/schedule_tools.py,
   which notes when it ran in a file. Then every schedule's /rpc `schedule.history`:
   - fire lag = fired_at - slot of `started` firings (fired_at: when the firing loop started its run);
   - run lag = when the slot's node ran - slot (what a user sees: the tick's work for the schedules
     before it in the same tick, the run's start and its one node);
   - every slot decided once (one firing per slot, every slot of start_at..end_at, distinct run ids),
     and how many times each started slot's node ran.
2. Idle cost: one server with 0 and K schedules whose next slot is far away (`cron: "0 0 1 1 *"`), its
   CPU time (/proc/PID/stat utime + stime, all threads) over W seconds idle, and the difference per
   1000 schedules. The firing loop looks again every 30 s (IDLE_SECONDS), so W should span a few.
No peer to compare with is installed (APScheduler and the like are no dependency of ice_mcp): no ratio.
Run: `.venv/bin/python bench/schedules.py [--servers 3] [--schedules 100] [--seconds 30]
[--state redis|sqlite] [--idle 1000] [--idle-seconds 60] [--keep DIR]` (--idle 0: skip part 2; --seconds 0:
skip part 1; --keep: keep the servers' logs).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx2

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # ice_mcp_dev: in the checkout, not installed

from ice_mcp_dev.cluster import Child, McpServer, RedisProcess

TOOLS = Path(__file__).with_name("schedule_tools.py")
TICK = {"name": "tick", "nodes": [{"id": "stamp", "type": "tool", "tool_name": "stamp",
                                   "tool_args": {"schedule": "{{ trigger.schedule_id }}",
                                                 "slot": "{{ trigger.slot }}"}}]}
FAR = {"cron": "0 0 1 1 *"}  # once a year: never due during the bench
LEAD_SECONDS = 3.0  # the first slot comes this long after the schedules are created (plus 30 ms each)
SETTLE_SECONDS = 5.0  # after creating the idle schedules, before measuring
WAIT_SECONDS = 120.0  # after the last slot, how long the servers may take to decide every slot
CLOCK_TICK = os.sysconf("SC_CLK_TCK")


def iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat().replace("+00:00", "Z")


def unix(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (every thread), from /proc/PID/stat."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()  # after the command name, field 3 (state) comes first
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICK


def pct(values: Sequence[float], p: float) -> float:
    """The nearest-rank percentile (p in 0..100) of a non-empty sample."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]


def rpc(http: httpx2.Client, url: str, method: str, **params: Any) -> Any:
    reply = http.post(f"{url}/rpc", json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).json()
    if "error" in reply:
        raise RuntimeError(f"{method} failed: {reply['error']}")
    return reply["result"]


@dataclass
class Cluster:
    """A store (a redis-server, or one data folder) and servers on it; `stop` ends every child started."""

    root: Path
    kind: str
    tag: str
    children: list[Child] = field(default_factory=list)
    servers: list[McpServer] = field(default_factory=list)
    redis: RedisProcess | None = None

    def start(self, servers: int, stamps: Path) -> None:
        blueprints = self.root / "blueprints"
        blueprints.mkdir(parents=True, exist_ok=True)
        (blueprints / "tick.json").write_text(json.dumps(TICK))
        if self.kind == "redis":
            self.redis = RedisProcess(self.root / f"{self.tag}-redis")
            self.children.append(self.redis)
            self.redis.start()
            store = ["--state", self.redis.url()]
        else:
            store = ["--data-dir", str(self.root / f"{self.tag}-data")]
        for number in range(servers):
            home = self.root / f"{self.tag}-server{number}"
            home.mkdir()
            env = {**os.environ, "ICE_MCP_WORKSPACE": str(home), "ICE_MCP_DATA_DIR": str(home / "data"),
                   "ICE_BENCH_STAMPS": str(stamps)}
            server = McpServer(f"server {number}", self.root / "logs" / f"{self.tag}-{number}.log", 0,
                               [*store, "--tools", str(TOOLS), "--blueprints", str(blueprints)], env)
            self.children.append(server)
            self.servers.append(server)
            server.start()

    def stop(self) -> None:
        for child in reversed(self.children):  # servers first, the store last
            try:
                child.stop()
            except Exception as exc:  # go on stopping the others
                print(f"  (stopping {child.name}: {exc})", file=sys.stderr)

    def logs_tail(self) -> str:
        return "\n".join(f"--- {s.name}\n{s.tail(800)}" for s in self.servers)


# -- 1. fire lag ------------------------------------------------------------------------------------------

@dataclass
class Fired:
    histories: dict[str, list[dict[str, Any]]]
    stamps: list[tuple[str, str, float, int]]  # schedule, slot, when its node ran, pid
    first: float
    seconds: int
    create_seconds: float
    settle_seconds: float  # after the last slot, until every slot was decided
    ended: dict[str, int]  # runs of the workflow by status (cancelled, failed, still running; at most 500)
    odd: list[tuple[str, str, str | None, str | None]]  # a few of them: run id, status, schedule, slot


def fire(root: Path, kind: str, servers: int, schedules: int, seconds: int) -> Fired:
    root.mkdir(parents=True)
    stamps = root / "stamps.txt"
    stamps.touch()
    cluster = Cluster(root, kind, "fire")
    try:
        cluster.start(servers, stamps)
        urls = [s.url for s in cluster.servers]
        ids = [f"every{n:04d}" for n in range(schedules)]
        with httpx2.Client(timeout=120) as http:
            first = float(math.ceil(time.time() + LEAD_SECONDS + 0.03 * schedules))
            spec = {"every_seconds": 1, "start_at": iso(first), "end_at": iso(first + seconds - 1)}
            began = time.perf_counter()
            for n, schedule_id in enumerate(ids):
                rpc(http, urls[n % len(urls)], "schedule.create", workflow="tick", id=schedule_id, spec=spec)
            create_seconds = time.perf_counter() - began
            if time.time() > first:
                raise SystemExit(f"creating {schedules} schedules took {create_seconds:.1f} s: past the first slot")
            end = first + seconds - 1
            time.sleep(max(0.0, end + 1.0 - time.time()))
            settle = wait_decided(http, urls[0], ids, seconds, end + WAIT_SECONDS)
            time.sleep(2.0)  # the last runs' nodes
            limit = min(1000, seconds + 20)
            histories = {i: rpc(http, urls[n % len(urls)], "schedule.history", id=i, limit=limit)["firings"]
                         for n, i in enumerate(ids)}
            listed = {status: rpc(http, urls[0], "run.list", workflow="tick", status=status, limit=500)["runs"]
                      for status in ("cancelled", "failed", "running")}
            ended = {status: len(runs) for status, runs in listed.items()}
            odd = [(r["run_id"], r["status"], (r.get("trigger") or {}).get("schedule_id"),
                    (r.get("trigger") or {}).get("slot")) for runs in listed.values() for r in runs[:5]]
    except BaseException:
        print(cluster.logs_tail(), file=sys.stderr)
        raise
    finally:
        cluster.stop()
    marks = []
    for line in stamps.read_text().splitlines():
        schedule_id, slot, at, pid = line.split()
        marks.append((schedule_id, slot, float(at), int(pid)))
    return Fired(histories, marks, first, seconds, create_seconds, settle - (first + seconds - 1), ended,
                 odd)


def wait_decided(http: httpx2.Client, url: str, ids: list[str], seconds: int, deadline: float) -> float:
    """Until every schedule decided all its slots (its counts add up to `seconds`); returns when."""
    while True:
        listed = rpc(http, url, "schedule.list")["schedules"]
        decided = {s["id"]: sum(s["counts"].values()) for s in listed}
        if all(decided.get(i, 0) >= seconds for i in ids) or time.time() > deadline:
            return time.time()
        time.sleep(0.5)


def report_fire(result: Fired, kind: str, servers: int) -> None:
    schedules, seconds = len(result.histories), result.seconds
    expected = {iso(result.first + n) for n in range(seconds)}
    print(f"1. fire lag: {servers} x `ice-mcp serve --http` on {kind}, {schedules} schedules of every_seconds: 1 "
          f"for {seconds} s ({schedules * seconds} slots); created in {result.create_seconds:.1f} s via /rpc")
    outcomes: Counter[str] = Counter()
    replicas: Counter[str] = Counter()
    lags: list[float] = []
    by_schedule: dict[str, list[float]] = defaultdict(list)
    by_slot: dict[float, list[float]] = defaultdict(list)
    twice = missing = stray = 0
    run_ids: list[str] = []
    started: dict[tuple[str, str], str] = {}
    for schedule_id, firings in result.histories.items():
        slots = [f["slot"] for f in firings]
        twice += len(slots) - len(set(slots))
        stray += len(set(slots) - expected)
        decided = sum(f["count"] for f in firings)
        missing += max(0, seconds - decided)
        for f in firings:
            outcomes[f["outcome"]] += f["count"]
            replicas[f["replica"] or "?"] += f["count"]
            if f["outcome"] == "started":
                lag = unix(f["fired_at"]) - unix(f["slot"])
                lags.append(lag)
                run_ids.append(f["run_id"])
                started[(schedule_id, f["slot"])] = f["run_id"]
    slots_total = schedules * seconds
    once = twice == 0 and missing == 0 and stray == 0 and len(set(run_ids)) == len(run_ids)
    print(f"   slots {slots_total}; decided {sum(outcomes.values())}; started {outcomes['started']}; "
          f"other outcomes: {dict((o, n) for o, n in outcomes.items() if o != 'started') or 'none'}")
    print(f"   every slot decided exactly once: {'yes' if once else 'NO'} (slots decided twice {twice}, "
          f"undecided {missing}, outside start_at..end_at {stray}; run ids {len(run_ids)}, "
          f"distinct {len(set(run_ids))}); all decided {result.settle_seconds:.1f} s after the last slot")
    print(f"   slots decided per server: {sorted(replicas.values(), reverse=True)}")
    others = sorted((f["slot"], i, f["outcome"], f["count"]) for i, fs in result.histories.items() for f in fs
                    if f["outcome"] != "started")
    if others:
        when = Counter(round(unix(slot) - result.first) for slot, _, _, _ in others)
        print(f"   not started, by second of the run: {dict(sorted(when.items()))}; first: {others[:3]}")
        ran = {(sid, slot): at for sid, slot, at, _ in result.stamps}
        before = [round((unix(slot) - ran[(sid, iso(unix(slot) - 1))]) * 1000) for slot, sid, _, _ in others
                  if (sid, iso(unix(slot) - 1)) in ran]
        by = {(i, f["slot"]): f["replica"] for i, fs in result.histories.items() for f in fs}
        same = [by.get((sid, iso(unix(slot) - 1))) == by[(sid, slot)] for slot, sid, _, _ in others]
        print(f"   their previous slot's node had run this many ms before them: {before[:10]}; decided by the server "
              f"that decided the previous slot: {same[:10]}")
    if lags:
        ms = [x * 1000 for x in lags]
        print(f"   fire lag (fired_at - slot), started: p50 {pct(ms, 50):.1f} ms, p99 {pct(ms, 99):.1f} ms, "
              f"max {max(ms):.1f} ms")
    runs: Counter[tuple[str, str]] = Counter((s, slot) for s, slot, _, _ in result.stamps)
    ran_first: dict[tuple[str, str], float] = {}
    for s, slot, at, _ in result.stamps:
        key = (s, slot)
        ran_first[key] = min(at, ran_first.get(key, at))
    run_lags = []
    for key in started:
        if key in ran_first:
            lag = ran_first[key] - unix(key[1])
            run_lags.append(lag)
            by_schedule[key[0]].append(lag)
            by_slot[unix(key[1])].append(lag)
    never = sum(1 for key in started if key not in runs)
    extra = sum(n - 1 for n in runs.values() if n > 1)
    unstarted = sum(1 for key in runs if key not in started)
    print(f"   nodes run: {len(result.stamps)} for {len(started)} started slots; slots whose node ran more than "
          f"once {sum(1 for n in runs.values() if n > 1)} ({extra} extra runs), started slots never run {never}, "
          f"runs of slots not recorded as started {unstarted}")
    print(f"   runs of the workflow (run.list, at most 500 each): {result.ended}")
    if result.odd:
        recorded = {run_id: key for key, run_id in started.items()}
        print(f"     e.g. (run, status, schedule, slot, recorded as started for): "
              f"{[(*o, recorded.get(o[0])) for o in result.odd]}")
    if run_lags:
        ms = [x * 1000 for x in run_lags]
        print(f"   run lag (node ran - slot): p50 {pct(ms, 50):.1f} ms, p99 {pct(ms, 99):.1f} ms, "
              f"max {max(ms):.1f} ms")
        ordered = sorted(by_schedule)  # in id order (each server starts its walk at its own place in it)
        tenth = max(1, len(ordered) // 10)
        head = [x * 1000 for s in ordered[:tenth] for x in by_schedule[s]]
        tail = [x * 1000 for s in ordered[-tenth:] for x in by_schedule[s]]
        print(f"   run lag by position in a tick: first {tenth} schedule ids p50 {statistics.median(head):.1f} ms, "
              f"last {tenth} p50 {statistics.median(tail):.1f} ms")
        seconds_seen = sorted(by_slot)
        third = max(1, len(seconds_seen) // 3)
        early = [x * 1000 for t in seconds_seen[:third] for x in by_slot[t]]
        late = [x * 1000 for t in seconds_seen[-third:] for x in by_slot[t]]
        print(f"   run lag over time: first {third} s p50 {statistics.median(early):.1f} ms, "
              f"last {third} s p50 {statistics.median(late):.1f} ms")


# -- 2. CPU per idle schedule ------------------------------------------------------------------------------

@dataclass
class Idle:
    count: int
    server_ms_per_s: float
    redis_ms_per_s: float | None
    burst_ms: float  # the most CPU the server used in one second (its 30 s look at every schedule)
    create_seconds: list[float]  # each schedule.create call, in order


def idle(root: Path, kind: str, count: int, seconds: float) -> Idle:
    cluster = Cluster(root, kind, f"idle{count}")
    stamps = root / "idle-stamps.txt"
    try:
        cluster.start(1, stamps)
        server = cluster.servers[0]
        assert server.process is not None
        with httpx2.Client(timeout=120) as http:
            took = []
            for n in range(count):
                began = time.perf_counter()
                rpc(http, server.url, "schedule.create", workflow="tick", id=f"far{n:05d}", spec=FAR)
                took.append(time.perf_counter() - began)
            listed = rpc(http, server.url, "schedule.list")["schedules"]
            assert len(listed) == count, len(listed)
        time.sleep(SETTLE_SECONDS)
        pid = server.process.pid
        redis_pid = cluster.redis.process.pid if cluster.redis is not None and cluster.redis.process else None
        measured = sample(pid, redis_pid, seconds)
    except BaseException:
        print(cluster.logs_tail(), file=sys.stderr)
        raise
    finally:
        cluster.stop()
    return Idle(count, *measured, took)


def sample(pid: int, redis_pid: int | None, seconds: float) -> tuple[float, float | None, float]:
    """CPU ms per second of `pid` (and of redis-server) over `seconds`, and the largest 1-second burst."""
    redis_cpu: Callable[[], float] = (lambda: cpu_seconds(redis_pid)) if redis_pid else (lambda: 0.0)
    start, redis_start, began = cpu_seconds(pid), redis_cpu(), time.monotonic()
    previous, burst = start, 0.0
    while time.monotonic() - began < seconds:
        time.sleep(1.0)
        now = cpu_seconds(pid)
        burst, previous = max(burst, now - previous), now
    elapsed = time.monotonic() - began
    server = (cpu_seconds(pid) - start) * 1000 / elapsed
    redis = (redis_cpu() - redis_start) * 1000 / elapsed if redis_pid else None
    return server, redis, burst * 1000


def report_idle(results: list[Idle], kind: str, seconds: float) -> None:
    print(f"2. idle cost: 1 x `ice-mcp serve --http` on {kind}, schedules with cron \"0 0 1 1 *\", "
          f"CPU over {seconds:.0f} s idle (/proc/PID/stat, {CLOCK_TICK} ticks/s)")
    for r in results:
        redis = f", redis-server {r.redis_ms_per_s:.2f} ms/s" if r.redis_ms_per_s is not None else ""
        print(f"   {r.count:5d} schedules: server {r.server_ms_per_s:.2f} ms CPU/s{redis}; largest 1-s burst "
              f"{r.burst_ms:.0f} ms")
        if r.create_seconds:
            tenth = max(1, len(r.create_seconds) // 10)
            head, tail = r.create_seconds[:tenth], r.create_seconds[-tenth:]
            print(f"     created in {sum(r.create_seconds):.1f} s: schedule.create mean {statistics.mean(head) * 1000:.1f} "
                  f"ms for the first {tenth}, {statistics.mean(tail) * 1000:.1f} ms for the last {tenth}")
    base = next((r for r in results if r.count == 0), None)
    for r in results:
        if base is not None and r.count:
            per = (r.server_ms_per_s - base.server_ms_per_s) * 1000 / r.count
            print(f"   per 1000 idle schedules: {per:.2f} ms CPU per second (server, {r.count} vs 0)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--servers", type=int, default=3)
    parser.add_argument("--schedules", type=int, default=100)
    parser.add_argument("--seconds", type=int, default=30, help="slots per schedule (one a second); 0: skip part 1")
    parser.add_argument("--state", choices=["redis", "sqlite"], default="redis")
    parser.add_argument("--idle", type=int, default=1000, help="idle schedules of part 2 (0: skip part 2)")
    parser.add_argument("--idle-seconds", type=float, default=60.0)
    parser.add_argument("--keep", type=Path, help="work in this new folder and keep it (servers' logs), "
                                                 "instead of a temporary one")
    args = parser.parse_args()
    if args.seconds > 980:
        parser.error("--seconds: at most 980 (schedule.history answers 1000 firings)")
    print(f"bench/schedules.py: {os.cpu_count()} CPU(s), store {args.state}; no peer scheduler installed "
          "(APScheduler is no dependency), so no ratio", flush=True)
    with tempfile.TemporaryDirectory(prefix="ice-sched-") as folder:
        root = args.keep.resolve() if args.keep else Path(folder)
        if args.seconds:
            fired = fire(root / "fire", args.state, args.servers, args.schedules, args.seconds)
            report_fire(fired, args.state, args.servers)
            sys.stdout.flush()
        if args.idle:
            results = [idle(root / f"idle{k}", args.state, k, args.idle_seconds) for k in (0, args.idle)]
            report_idle(results, args.state, args.idle_seconds)


if __name__ == "__main__":
    main()
