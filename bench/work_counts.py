"""Load-independent measures beside the timed benches: Python calls and CPU time, ours against the same peers.

    .venv/bin/python bench/work_counts.py mcp       # per tools/call: workflow_noop vs the bare SDK noop (mcp_layer.py)
    .venv/bin/python bench/work_counts.py tracing   # per node of a 0 ms chain: tracing off vs on (tracing.py)
    .venv/bin/python bench/work_counts.py start     # a first stdio start: CPU to the tools/list answer (stdio_start.py)

On a shared machine wall-clock ratios move with the load; these do not (much): function calls counted by a profile
hook (exact and repeatable, so `git bisect run` can use them), CPU time of the thread or process (medians of
interleaved rounds). They are indicators to find what costs, not the targets: those stay the timed benches.
- mcp: in one process over the SDK's memory transport (client, server and the run in one thread), so the count
  includes the client's own work (its validation of a result against the tool's output schema too).
- tracing: the real SDK and OTLP/HTTP exporter to a receiver process, as bench/tracing.py (1 ms nodes); calls and
  CPU of the event loop's thread per node, and CPU of all threads (the exporter's and the span builder's work).
- start: `ice-mcp serve --templates` on a new data folder and the peer (stdio_peer.py), each start's CPU (all
  threads, from /proc) when its tools/list answer arrives.
"""

from __future__ import annotations

import argparse
import asyncio
import compileall
import gc
import glob
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]  # `import mcp` is the SDK, not mcp_layer
sys.path.insert(0, str(ROOT))


def _bench(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(f"bench_{name}", HERE / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Counter:
    """Python function calls while `on`: of this thread, or of every thread (those started after it is installed)."""

    def __init__(self, *, threads: bool) -> None:
        self.on = False
        self.calls = 0
        sys.setprofile(self._hook)
        if threads:
            threading.setprofile(self._hook)

    def _hook(self, frame: Any, event: str, arg: Any) -> None:
        if self.on and event == "call":
            self.calls += 1


def _thread_cpu_us() -> float:
    return time.thread_time() * 1e6


def _all_threads_cpu_us(pid: int | str = "self") -> float:
    total = 0
    for path in glob.glob(f"/proc/{pid}/task/*/schedstat"):
        try:
            total += int(Path(path).read_text().split()[0])
        except (OSError, ValueError, IndexError):
            pass  # a thread that ended meanwhile
    return total / 1000


async def mcp(args: argparse.Namespace) -> None:
    from mcp import Client

    from ice_mcp.server import ServerOptions, build_server

    layer = _bench("mcp_layer")
    counter = Counter(threads=True)
    servers = {"bare": (layer.bare_server(), "noop"),
               "ice": (build_server(layer.ice_orchestrator(), ServerOptions()), "workflow_noop")}
    calls: dict[str, float] = {}
    cpu: dict[str, list[float]] = {kind: [] for kind in servers}
    async with Client(servers["bare"][0], mode="legacy") as bare, Client(servers["ice"][0], mode="legacy") as ice:
        clients = {"bare": bare, "ice": ice}
        for kind, client in clients.items():
            for i in range(30):
                result = await client.call_tool(servers[kind][1], {"value": i})
                assert not result.is_error, result
            counter.calls, counter.on = 0, True
            for i in range(args.calls):
                await client.call_tool(servers[kind][1], {"value": i})
            counter.on = False
            calls[kind] = counter.calls / args.calls
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]
        gc.collect()
        gc.freeze()
        for _ in range(args.rounds):
            for kind, client in clients.items():
                started = _thread_cpu_us()
                for i in range(args.calls):
                    await client.call_tool(servers[kind][1], {"value": i})
                cpu[kind].append((_thread_cpu_us() - started) / args.calls)
    bare_cpu, ice_cpu = statistics.median(cpu["bare"]), statistics.median(cpu["ice"])
    print(f"per tools/call, in-process (memory transport, client included), load {os.getloadavg()[0]:.1f}")
    print(f"  Python calls   bare {calls['bare']:7.0f}   workflow_noop {calls['ice']:7.0f}   "
          f"ratio {calls['ice'] / calls['bare']:.2f}")
    print(f"  CPU µs median  bare {bare_cpu:7.0f}   workflow_noop {ice_cpu:7.0f}   ratio {ice_cpu / bare_cpu:.2f}"
          f"   ({args.rounds} rounds of {args.calls})")


async def tracing(args: argparse.Namespace) -> None:
    from ice_mcp import Orchestrator, Registry, Settings
    from ice_mcp.observability import tracing as spans

    bench = _bench("tracing")
    orc = Orchestrator(registry=Registry(), settings=Settings(data_dir=Path(tempfile.mkdtemp()), persist_runs=False),
                       builtin_tools=False)
    orc.registry.add_tool(bench.pause)
    orc.register_blueprint(bench.chain("chain", args.nodes, args.ms))
    receiver = subprocess.Popen([sys.executable, "-c", bench.RECEIVER], stdout=subprocess.PIPE, text=True)
    counter = Counter(threads=False)
    try:
        assert receiver.stdout is not None
        spans.configure({"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{int(receiver.stdout.readline())}"})
        for case in ("off", "on") * 2:  # warm-up
            spans.ENABLED = case == "on"
            await orc.run("chain", {})
        calls: dict[str, float] = {}
        for case in ("off", "on"):
            spans.ENABLED = case == "on"
            counter.calls, counter.on = 0, True
            await orc.run("chain", {})
            counter.on = False
            calls[case] = counter.calls / args.nodes
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]
        gc.collect()
        gc.freeze()
        loop_cpu: dict[str, list[float]] = {"off": [], "on": []}
        all_cpu: dict[str, list[float]] = {"off": [], "on": []}
        for _ in range(args.rounds):
            for case in ("off", "on"):
                spans.ENABLED = case == "on"
                loop_started, all_started = _thread_cpu_us(), _all_threads_cpu_us()
                await orc.run("chain", {})
                loop_cpu[case].append((_thread_cpu_us() - loop_started) / args.nodes)
                all_cpu[case].append((_all_threads_cpu_us() - all_started) / args.nodes)
        spans.ENABLED = True
        spans.shutdown()
    finally:
        receiver.kill()
        await orc.aclose()
    print(f"per node of a {args.nodes}-node chain of {args.ms:g} ms tool nodes, load {os.getloadavg()[0]:.1f}")
    for case in ("off", "on"):
        print(f"  tracing {case:3}  Python calls (loop thread) {calls[case]:5.0f}   CPU µs, loop thread "
              f"{statistics.median(loop_cpu[case]):6.1f}, all threads {statistics.median(all_cpu[case]):6.1f}")


def _start_once(command: list[str], folder: Path) -> float:
    """CPU ms of a fresh server when its tools/list answer arrives."""
    env = {**os.environ, "ICE_MCP_DATA_DIR": str(folder / "data"), "ICE_MCP_WORKSPACE": str(folder / "work")}
    start = _bench("stdio_start")
    proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            cwd=folder, env=env)
    assert proc.stdin is not None
    try:
        proc.stdin.write(json.dumps(start.INITIALIZE).encode() + b"\n")
        proc.stdin.flush()
        start.answer(proc, 1)
        proc.stdin.write(json.dumps(start.INITIALIZED).encode() + b"\n" + json.dumps(start.TOOLS_LIST).encode() + b"\n")
        proc.stdin.flush()
        start.answer(proc, 2)
        return _all_threads_cpu_us(proc.pid) / 1000
    finally:
        proc.stdin.close()
        proc.wait(timeout=60)


def start(args: argparse.Namespace) -> None:
    compileall.compile_dir(ROOT / "ice_mcp", quiet=1)  # as bench/stdio_start.py: no module compiled at each start
    commands = {"ours": [str(Path(sys.executable).with_name("ice-mcp")), "serve", "--templates"],
                "bare": [sys.executable, str(HERE / "stdio_peer.py")]}
    cpu: dict[str, list[float]] = {kind: [] for kind in commands}
    with tempfile.TemporaryDirectory(prefix="ice-bench-cpu-") as root:
        for command in commands.values():
            _start_once(command, Path(tempfile.mkdtemp(dir=root)))  # the OS file cache
        for run in range(args.runs):
            for kind in (("ours", "bare") if run % 2 == 0 else ("bare", "ours")):
                cpu[kind].append(_start_once(commands[kind], Path(tempfile.mkdtemp(dir=root))))
    ours, bare = statistics.median(cpu["ours"]), statistics.median(cpu["bare"])
    paired = statistics.median(o / b for o, b in zip(cpu["ours"], cpu["bare"], strict=True))
    print(f"first stdio start, CPU to the tools/list answer, median of {args.runs}, load {os.getloadavg()[0]:.1f}")
    print(f"  ice-mcp serve --templates {ours:6.0f} ms   bare SDK server {bare:6.0f} ms   ratio {ours / bare:.2f}"
          f" (of pairs {paired:.2f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("measure", choices=["mcp", "tracing", "start"])
    parser.add_argument("--calls", type=int, default=100, help="mcp: calls per round")
    parser.add_argument("--rounds", type=int, default=11, help="mcp, tracing: interleaved rounds")
    parser.add_argument("--nodes", type=int, default=200, help="tracing: nodes of the chain")
    parser.add_argument("--ms", type=float, default=1.0, help="tracing: each node's wait (bench/tracing.py's 1 ms)")
    parser.add_argument("--runs", type=int, default=9, help="start: starts of each server")
    args = parser.parse_args()
    if args.measure == "mcp":
        asyncio.run(mcp(args))
    elif args.measure == "tracing":
        asyncio.run(tracing(args))
    else:
        start(args)


if __name__ == "__main__":
    main()
