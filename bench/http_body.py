"""Worst /healthz latency while the HTTP server reads and decodes one big JSON-RPC body (issue 26, item 3).

    .venv/bin/python bench/http_body.py                  # 50 MB, 5 runs per case, both body shapes
    .venv/bin/python bench/http_body.py --mb 50 --runs 7 --shape rows
    git archive HEAD ice_mcp | tar -x -C /tmp/old && .venv/bin/python bench/http_body.py --tree /tmp/old

A second process probes `GET /healthz` every 5 ms while this one POSTs the body; each case prints the
median over runs of the worst probe (and of the POST's own time). The cases:

- the real `ice-mcp serve --http`, whose body cap (4 MiB, answered 413) stays: a 50 MB body with
  Content-Length (refused before it is read), the same body chunked (read up to the cap, then refused),
  and the largest body it accepts, on /mcp and /rpc: the figure against the target;
- a server built with `create_http_app(max_body=...)` raised past 50 MB, so that the 50 MB body is read
  and decoded in full: once with every body decoded on the event loop (the size threshold set out of
  reach), once as the server does it.

`--tree DIR` serves an ice_mcp from DIR (an older commit: the before) with its own decoding only.
A body is a `tools/call` (/mcp, in a session) or a method call (/rpc) whose arguments carry the payload
(`rows`: a table of small objects; `text`: one string) and whose name matches nothing: the server decodes
all of it, then answers a quick error, so what is timed is the HTTP layer, not a workflow run.
Target: the worst probe under 100 ms; exits 1 if the real server misses it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

TARGET_MS = 100.0
MCP_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
INITIALIZE: dict[str, Any] = {
    "jsonrpc": "2.0", "id": 0, "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}},
}


# -- bodies -----------------------------------------------------------------------------------------


def payload(shape: str, size: int) -> Any:
    """About `size` bytes of JSON: a table of small objects (`rows`) or one string (`text`)."""
    if shape == "text":
        return "x" * size

    def rows(count: int) -> list[dict[str, Any]]:
        return [{"week": i % 52, "amount": i * 1.5, "name": f"row{i}"} for i in range(count)]

    sample = len(json.dumps(rows(1000), separators=(",", ":")))
    table = rows(size * 1000 // sample)
    scale = size / len(json.dumps(table, separators=(",", ":")))  # longer names further down the table
    return table[: int(len(table) * scale)] if scale < 1 else rows(int(len(table) * scale))


def body_for(path: str, shape: str, size: int) -> bytes:
    """A JSON-RPC request to `path` carrying about `size` bytes, for a tool (or method) that does not exist."""
    value = payload(shape, size)
    if path == "/rpc":
        message = {"jsonrpc": "2.0", "id": 1, "method": "bench.no_such_method", "params": {"value": value}}
    else:
        message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                   "params": {"name": "bench_no_such_tool", "arguments": {"value": value}}}
    return json.dumps(message, separators=(",", ":")).encode()


def fit(path: str, shape: str, limit: int) -> bytes:
    """The largest such body within `limit` bytes."""
    size = limit
    while len(body := body_for(path, shape, size)) > limit:
        size -= len(body) - limit + 64
    return body


# -- the /healthz prober (a process of its own: this one's work cannot delay its probes) --------------


def _probe(url: str, interval: float, stop: Any, results: Connection) -> None:
    import httpx2

    latencies: list[float] = []
    failures = 0
    with httpx2.Client(timeout=10) as client:
        client.get(url)  # opens the connection before the measured window
        results.send("ready")
        while not stop.wait(interval):
            started = time.perf_counter()
            try:
                failures += client.get(url).status_code != 200
            except httpx2.HTTPError:
                failures += 1
            latencies.append(time.perf_counter() - started)
    results.send((latencies, failures))


@contextlib.contextmanager
def probing(base: str, interval: float) -> Iterator[dict[str, Any]]:
    """Probe `base`/healthz until the block ends; the dict then holds the worst latency (ms) and counts."""
    context = multiprocessing.get_context("spawn")
    stop = context.Event()
    receiver, sender = context.Pipe(duplex=False)
    process = context.Process(target=_probe, args=(f"{base}/healthz", interval, stop, sender), daemon=True)
    process.start()
    if not receiver.poll(60) or receiver.recv() != "ready":
        raise RuntimeError("the /healthz prober did not start")
    seen: dict[str, Any] = {}
    try:
        yield seen
    finally:
        stop.set()
        latencies, failures = receiver.recv() if receiver.poll(60) else ([], -1)
        process.join(10)
        seen.update(worst=max(latencies, default=0.0) * 1000, probes=len(latencies), failures=failures)


# -- servers ----------------------------------------------------------------------------------------


def free_port() -> int:
    with contextlib.closing(socket.socket()) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_ready(proc: subprocess.Popen[bytes], base: str) -> None:
    import httpx2

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if httpx2.get(f"{base}/healthz", timeout=1).status_code == 200:
                return
        except httpx2.HTTPError:
            time.sleep(0.1)
    raise RuntimeError(f"the server at {base} did not start")


@contextlib.contextmanager
def server(kind: str, max_body: int, data: Path, tree: Path) -> Iterator[str]:
    """`cli`: the real `ice-mcp serve --http`; `inline` / `ours`: this file's `--serve` child. Either imports
    ice_mcp from `tree`."""
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(tree), "ICE_MCP_DATA_DIR": str(data / kind),
           "ICE_MCP_WORKSPACE": str(data)}
    if kind == "cli":
        command = [sys.executable, "-m", "ice_mcp", "serve", "--http", "--port", str(port), "--log-level", "WARNING"]
    else:
        command = [sys.executable, __file__, "--serve", kind, "--port", str(port), "--max-body", str(max_body)]
    proc = subprocess.Popen(command, cwd=tree, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_ready(proc, base)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def serve(kind: str, port: int, max_body: int) -> None:
    """Child process: the HTTP app with a raised body cap (`inline`: every body decoded on the event loop)."""
    import asyncio
    import gc
    import logging

    import uvicorn

    from ice_mcp.orchestrator import Orchestrator
    from ice_mcp.server import ServerOptions, create_http_app
    from ice_mcp.settings import Settings
    from ice_mcp.tools.registry import Registry

    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    if kind == "inline":
        from ice_mcp.server.web import bodies

        bodies.OFF_LOOP_BYTES = sys.maxsize  # every body decoded on the event loop, as before

    async def main() -> None:
        orc = Orchestrator(registry=Registry(), settings=Settings(persist_runs=False))
        app = create_http_app(orc, ServerOptions(), port=port, max_body=max_body)
        gc.collect()
        gc.freeze()  # as `ice-mcp serve` does
        config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)
        await uvicorn.Server(config).serve()

    asyncio.run(main())


# -- one measured POST ------------------------------------------------------------------------------


def open_session(http: Any, base: str) -> dict[str, str]:
    """Headers of an initialized legacy-era session on `base`/mcp."""
    reply = http.post(f"{base}/mcp", json=INITIALIZE, headers=MCP_HEADERS)
    reply.raise_for_status()
    headers = {**MCP_HEADERS, "Mcp-Session-Id": reply.headers["mcp-session-id"],
               "Mcp-Protocol-Version": INITIALIZE["params"]["protocolVersion"]}
    http.post(f"{base}/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
    return headers


def measure(base: str, path: str, body: bytes, *, chunked: bool, interval: float) -> dict[str, Any]:
    import httpx2

    with httpx2.Client(timeout=120) as http:
        headers = open_session(http, base) if path == "/mcp" else {"Content-Type": "application/json"}
        content: Any = body
        if chunked:
            content = (body[i:i + 65536] for i in range(0, len(body), 65536))
        with probing(base, interval) as seen:
            started = time.perf_counter()
            status: int | str
            try:
                status = http.post(f"{base}{path}", content=content, headers=headers).status_code
            except httpx2.HTTPError as exc:  # a refused upload may be cut off before it is all sent
                status = type(exc).__name__
            seen["post"] = (time.perf_counter() - started) * 1000
        seen["status"] = status
    return seen


def case(label: str, base: str, path: str, body: bytes, args: argparse.Namespace, *, chunked: bool = False) -> float:
    runs = [measure(base, path, body, chunked=chunked, interval=args.interval) for _ in range(args.runs)]
    worst = statistics.median(run["worst"] for run in runs)
    post = statistics.median(run["post"] for run in runs)
    statuses = sorted({str(run["status"]) for run in runs})
    failures = sum(run["failures"] for run in runs)
    each = ", ".join(f"{run['worst']:.0f}" for run in runs)
    print(f"  {label:58} {len(body) / 1e6:5.1f} MB  {path:4}  status {'/'.join(statuses):5}  "
          f"POST {post:6.0f} ms   worst /healthz {worst:6.1f} ms  [{each}]"
          + (f"  probe failures {failures}" if failures else ""), flush=True)
    return worst


def main(args: argparse.Namespace) -> int:
    sys.path.insert(0, str(ROOT))
    from ice_mcp.server.web.guard import DEFAULT_MAX_BODY

    tree = (args.tree or ROOT).resolve()
    size = int(args.mb * 1_000_000)
    raised = max(size * 2, DEFAULT_MAX_BODY)
    print(f"bench/http_body.py: {os.cpu_count()} CPU(s); ice_mcp from {tree}; /healthz probed every "
          f"{args.interval * 1000:.0f} ms; median of {args.runs} runs (each run's worst probe in brackets); "
          f"target {TARGET_MS:.0f} ms")
    # With another tree (an older ice_mcp), only its own way: it may have no switch to force decoding inline.
    kinds = [("ours", f"as the server at {tree} does")] if args.tree else [
        ("inline", "every body decoded on the event loop (before)"), ("ours", "as the server does (after)")]
    verdict = 0
    with tempfile.TemporaryDirectory(prefix="ice-bench-body-") as folder:
        data = Path(folder)
        for shape in args.shape:
            print(f"{shape}: {'a table of small objects' if shape == 'rows' else 'one long string'}")
            big = {path: body_for(path, shape, size) for path in ("/mcp", "/rpc")}
            with server("cli", DEFAULT_MAX_BODY, data, tree) as base:
                print(f" `ice-mcp serve --http` (its body cap: {DEFAULT_MAX_BODY / 2**20:.0f} MiB):")
                case("the big body, Content-Length: refused unread", base, "/mcp", big["/mcp"], args)
                case("the big body, chunked: read up to the cap, refused", base, "/mcp", big["/mcp"], args,
                     chunked=True)
                for path in ("/mcp", "/rpc"):
                    worst = case("the largest body it accepts, decoded", base, path,
                                 fit(path, shape, DEFAULT_MAX_BODY), args)
                    verdict |= worst >= TARGET_MS
            for kind, label in kinds:
                with server(kind, raised, data, tree) as base:
                    print(f" create_http_app(max_body={raised / 1e6:.0f} MB), {label}:")
                    for path in ("/mcp", "/rpc"):
                        case("the big body, read and decoded", base, path, big[path], args)
    return int(verdict)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=float, default=50.0, help="size of the big body in MB (default 50)")
    parser.add_argument("--runs", type=int, default=5, help="POSTs per case; the median is reported")
    parser.add_argument("--shape", choices=["rows", "text"], nargs="+", default=["rows", "text"])
    parser.add_argument("--interval", type=float, default=0.005, help="seconds between /healthz probes")
    parser.add_argument("--tree", type=Path, help="import ice_mcp from this folder instead of this checkout "
                        "(an older version: git archive HEAD ice_mcp | tar -x -C DIR)")
    parser.add_argument("--serve", choices=["inline", "ours"], help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--max-body", type=int, default=0, help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    if arguments.serve:
        serve(arguments.serve, arguments.port, arguments.max_body)
    else:
        sys.exit(main(arguments))
