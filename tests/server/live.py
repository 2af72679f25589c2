"""A real server subprocess for hostile-input tests, and a second client that times /healthz meanwhile."""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import httpx2
from mcp_helpers import (
    ROOT,
    free_port,
    serve_subprocess,
    stop_process,
    subprocess_env,
    wait_for_healthz,
    write_blueprints,
)

# What the issue asks: the server keeps answering /healthz within 100 ms during any hostile call.
HEALTHZ_LIMIT_S = 0.100
SLOWEST_PROBE_FACTOR = 3  # the worst single probe, in limits


class HealthWatch:
    """Latencies of /healthz probes sent by a second client, in a process of its own (so the test's own
    work cannot delay them), while a hostile call is in flight."""

    def __init__(self, receiver: Connection) -> None:
        self._receiver = receiver
        self._active = True
        self._latencies: list[float] = []
        self._failures: list[str] = []

    def _drain(self) -> None:
        while self._active and self._receiver.poll():
            self.record(*self._receiver.recv())

    def record(self, latency: float, failure: str) -> None:
        self._latencies.append(latency)
        if failure:
            self._failures.append(failure)

    @property
    def latencies(self) -> list[float]:
        self._drain()
        return self._latencies

    @property
    def failures(self) -> list[str]:
        self._drain()
        return self._failures

    @property
    def worst(self) -> float:
        return max(self.latencies, default=0.0)

    def assert_responsive(self, limit: float = HEALTHZ_LIMIT_S) -> None:
        assert not self.failures, f"/healthz failed during the hostile call: {self.failures[:3]}"
        assert self.latencies, "no /healthz probe completed while the call was in flight"
        # One probe in ten may meet a scheduling hiccup of a loaded 2-core machine; a blocked loop delays them all.
        slow = [x for x in self.latencies if x >= limit]
        probes = [round(x * 1000) for x in sorted(self.latencies)[-5:]]
        assert len(slow) <= len(self.latencies) // 10 and self.worst < SLOWEST_PROBE_FACTOR * limit, (
            f"{len(slow)} of {len(self.latencies)} /healthz probes took {limit * 1000:.0f} ms or more, the worst "
            f"{self.worst * 1000:.0f} ms; probes: {probes}"
        )


def _prober(commands: Connection, results: Connection) -> None:
    """The prober process: for each (url, interval) it receives, GET url every interval seconds and send back
    (latency, failure) until it receives None; then send "done"."""
    with httpx2.Client(timeout=5.0) as client:
        while (command := commands.recv()) is not None:
            url, interval = command
            while not commands.poll(interval):
                started = time.perf_counter()
                failure = ""
                try:
                    response = client.get(url)
                    if response.status_code != 200:
                        failure = f"status {response.status_code}"
                except httpx2.HTTPError as exc:
                    failure = f"{type(exc).__name__}: {exc}"
                results.send((time.perf_counter() - started, failure))
            if commands.recv() is not None:
                raise RuntimeError("the prober expected a stop")
            results.send("done")


class _Prober:
    """One prober process per test process, started on first use (a process start takes a while)."""

    process: Any = None
    commands: Connection
    results: Connection

    @classmethod
    def ready(cls) -> type[_Prober]:
        if cls.process is None or not cls.process.is_alive():
            context = multiprocessing.get_context("spawn")  # no fork of a process running threads and loops
            cls.commands, child_commands = context.Pipe()
            child_results, cls.results = context.Pipe()
            cls.process = context.Process(target=_prober, args=(child_commands, child_results), daemon=True)
            cls.process.start()
        return cls


@contextlib.contextmanager
def healthz_watch(base_url: str, interval: float = 0.02) -> Iterator[HealthWatch]:
    """Probe `base_url`/healthz from a process of its own until the block ends."""
    prober = _Prober.ready()
    prober.commands.send((f"{base_url}/healthz", interval))
    watch = HealthWatch(prober.results)
    try:
        # The first probe opens the prober's connection: wait for it, and count only the probes after it.
        if not prober.results.poll(30):
            raise RuntimeError("the /healthz prober did not answer")
        prober.results.recv()
        yield watch
    finally:
        prober.commands.send(None)
        while True:  # everything up to the prober's "done" belongs to this watch
            if not prober.results.poll(30):
                raise RuntimeError("the /healthz prober stopped answering")
            item = prober.results.recv()
            if item == "done":
                break
            watch.record(*item)
        watch._active = False  # what the pipe carries next is another watch's


@contextlib.contextmanager
def live_server(workspace: Path, *args: str, env: dict[str, str] | None = None) -> Iterator[str]:
    """`ice-mcp serve --http` as a real subprocess with the test blueprints; yields its base URL."""
    folder = write_blueprints(workspace / "blueprints")
    with serve_subprocess(
        "--blueprints", str(folder), *args, env={**subprocess_env(workspace), **(env or {})}
    ) as url:
        yield url


class ServerProcess:
    """`ice-mcp serve --http` as a subprocess a test can SIGKILL and start again on the same data folder."""

    def __init__(self, workspace: Path, *args: str, env: dict[str, str] | None = None) -> None:
        self.args = args
        self.env = {**subprocess_env(workspace), **(env or {})}
        self.proc: subprocess.Popen[bytes] | None = None
        self.url = ""
        self.log = workspace / "server.log"

    def start(self) -> str:
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "ice_mcp", "serve", "--http", "--port", str(port), *self.args],
                cwd=ROOT, env=self.env, stdout=subprocess.DEVNULL, stderr=log,
            )
        wait_for_healthz(self.proc, self.url, self.log)
        return self.url

    def kill(self) -> None:
        """SIGKILL, and reap the process (a zombie would still look alive to the next server)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def stop(self) -> None:
        if self.proc is not None:
            stop_process(self.proc)

    def rpc(self, method: str, **params: Any) -> Any:
        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
        reply = httpx2.post(f"{self.url}/rpc", json=body, timeout=30).json()
        if "error" in reply:
            raise AssertionError(f"{method} failed: {reply['error']}")
        return reply["result"]


def folder_servers(root: Path, blueprints: list[dict[str, Any]], names: tuple[str, ...] = ("a", "b"),
                   env: dict[str, str] | None = None, state: str | None = None) -> list[ServerProcess]:
    """Servers (not started yet) on one data folder (`root/data`), or on the store at `state` (a URL), each with
    a workspace of its own, with `blueprints` registered from `root/blueprints`."""
    folder = root / "blueprints"
    folder.mkdir(exist_ok=True)
    for blueprint in blueprints:
        (folder / f"{blueprint['name']}.json").write_text(json.dumps(blueprint))
    servers = []
    for name in names:
        workspace = root / name
        workspace.mkdir()
        where = ["--data-dir", str(root / "data")] if state is None else ["--state", state]
        servers.append(ServerProcess(workspace, *where, "--blueprints", str(folder), env=env))
    return servers


def wait_until(check: Callable[[], Any], timeout: float, what: str) -> Any:
    """What `check` returns once it is truthy, polled every 50 ms; AssertionError naming `what` after `timeout` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if result := check():
            return result
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")
