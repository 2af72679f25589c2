"""A pool of sandbox worker processes, so parallel code nodes use every core.

Threads sharing one wasmtime engine add no throughput; processes do. Each
worker loads the cached module once and runs one job at a time. A worker that
dies, hangs past its job's deadline or sends garbage is killed and replaced;
the host process never runs guest code itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Final

from ice_mcp.errors import IceError
from ice_mcp.sandbox import errors as E
from ice_mcp.sandbox import ipc
from ice_mcp.sandbox.cache import CacheLayout
from ice_mcp.sandbox.errors import SandboxError
from ice_mcp.sandbox.runner import Job

# A worker gets this long past the job's own deadline before it is presumed stuck.
WATCHDOG_GRACE_SECONDS: Final = 5.0
START_TIMEOUT_SECONDS: Final = 60.0


def bootstrap(entry: str) -> str:
    """`python -c` source that imports only the sandbox's own modules, then runs `entry`.

    Importing `ice_mcp.sandbox.worker` the usual way would run `ice_mcp/__init__.py`,
    which loads the whole orchestrator (~0.6 s). Stand-in parent packages with the real
    paths let the worker import what it needs, nothing else.
    """
    package = Path(__file__).resolve().parents[1]
    return (
        "import sys, types\n"
        f"for name, path in (('ice_mcp', {str(package)!r}), ('ice_mcp.sandbox', {str(package / 'sandbox')!r})):\n"
        "    module = types.ModuleType(name)\n"
        "    module.__path__ = [path]\n"
        "    sys.modules[name] = module\n"
        f"{entry}\n"
    )


class WorkerDied(IceError):
    """The worker process ended or broke the protocol mid-run."""

    code = E.UNAVAILABLE


@dataclass(slots=True, eq=False)  # identity, so workers can live in a set
class Worker:
    process: asyncio.subprocess.Process
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    jobs_done: int = 0

    @property
    def alive(self) -> bool:
        return self.process.returncode is None

    async def _read(self) -> dict[str, Any]:
        header = await self.reader.readexactly(ipc.HEADER.size)
        (size,) = ipc.HEADER.unpack(header)
        if size > ipc.MAX_FRAME:
            raise ValueError(f"worker frame of {size} bytes is too large")
        return ipc.decode(await self.reader.readexactly(size))

    async def call(self, job: Job) -> dict[str, Any]:
        self.writer.write(ipc.encode({"job": asdict(job)}))
        await self.writer.drain()
        outcome = await self._read()
        self.jobs_done += 1
        return outcome

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.process.kill()


async def spawn_worker(layout: CacheLayout) -> Worker:
    """Start one worker and wait until it has loaded the runtime."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-I",  # no user site, no PYTHON* variables, no current folder on the path
        "-c",
        bootstrap("from ice_mcp.sandbox.worker import main; sys.exit(main())"),
        str(layout.root),
        layout.driver.name,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        limit=ipc.MAX_FRAME,
    )
    assert process.stdout is not None and process.stdin is not None
    worker = Worker(process, process.stdout, process.stdin)
    try:
        hello = await asyncio.wait_for(worker._read(), START_TIMEOUT_SECONDS)
    except (asyncio.IncompleteReadError, TimeoutError, ValueError) as e:
        worker.kill()
        await process.wait()
        raise SandboxError(E.UNAVAILABLE, f"a sandbox worker failed to start: {e!r}") from None
    if not hello.get("ready"):
        worker.kill()
        await process.wait()
        raise SandboxError(E.UNAVAILABLE, str(hello.get("message", "a sandbox worker failed to start")))
    return worker


@dataclass(slots=True)
class WorkerPool:
    """At most `size` workers; a job waits for an idle one."""

    layout: CacheLayout
    size: int
    _idle: list[Worker] = field(default_factory=list)
    _all: set[Worker] = field(default_factory=set)
    _slots: asyncio.Semaphore | None = None
    _closed: bool = False
    _reapers: set[asyncio.Future[int]] = field(default_factory=set)
    workers_started: int = 0

    def _semaphore(self) -> asyncio.Semaphore:
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.size)
        return self._slots

    async def start(self) -> None:
        """Start every worker now rather than on first use."""
        missing = self.size - len(self._all)
        workers = await asyncio.gather(*(self._spawn() for _ in range(missing)))
        self._idle.extend(workers)

    async def _spawn(self) -> Worker:
        worker = await spawn_worker(self.layout)
        self.workers_started += 1
        self._all.add(worker)
        return worker

    async def _acquire(self) -> Worker:
        while self._idle:
            worker = self._idle.pop()
            if worker.alive:
                return worker
            self._all.discard(worker)
        return await self._spawn()

    def _release(self, worker: Worker, healthy: bool) -> None:
        if healthy and worker.alive and not self._closed:
            self._idle.append(worker)
        else:
            self._discard(worker)
        self._semaphore().release()

    def _discard(self, worker: Worker) -> None:
        worker.kill()
        self._all.discard(worker)
        # Reap it in the background so no zombie or open pipe is left behind.
        reaper = asyncio.ensure_future(worker.process.wait())
        self._reapers.add(reaper)
        reaper.add_done_callback(self._reapers.discard)

    async def run(self, job: Job) -> dict[str, Any]:
        if self._closed:
            raise SandboxError(E.UNAVAILABLE, "the sandbox is closed")
        # A guest has no side effects, so a run whose worker died is safely run once more.
        for attempt in range(2):
            try:
                return await self._run_once(job)
            except WorkerDied as e:
                if attempt:
                    raise SandboxError(E.UNAVAILABLE, f"the sandbox worker died while running the code ({e})") from None
        raise AssertionError("unreachable")

    async def _run_once(self, job: Job) -> dict[str, Any]:
        await self._semaphore().acquire()
        try:
            worker: Worker | None = await self._acquire()
        except BaseException:
            self._semaphore().release()
            raise
        assert worker is not None
        watchdog = job.timeout_seconds + WATCHDOG_GRACE_SECONDS
        task = asyncio.ensure_future(asyncio.wait_for(worker.call(job), watchdog))
        healthy = False
        try:
            outcome = await asyncio.shield(task)
            healthy = True
            return outcome
        except asyncio.CancelledError:
            if not task.done():
                # The caller gave up; the worker finishes its bounded run, then rejoins the pool.
                running = worker
                task.add_done_callback(lambda t: self._release(running, not t.cancelled() and t.exception() is None))
                worker = None  # released by the callback
            raise
        except TimeoutError:
            raise SandboxError(
                E.TIMEOUT, f"the code ran longer than {job.timeout_seconds:g} s", {"limit_seconds": job.timeout_seconds}
            ) from None
        except (asyncio.IncompleteReadError, ConnectionError, ValueError) as e:
            raise WorkerDied(type(e).__name__) from None
        finally:
            if worker is not None:
                self._release(worker, healthy)

    def kill_all(self) -> None:
        """Stop every worker now, without waiting (for a pool whose event loop is gone)."""
        self._closed = True
        for worker in self._all:
            worker.kill()
        self._idle.clear()
        self._all.clear()

    async def aclose(self) -> None:
        self._closed = True
        workers = list(self._all)
        self._idle.clear()
        self._all.clear()
        for worker in workers:
            with contextlib.suppress(Exception):
                worker.writer.close()
        for worker in workers:
            try:
                await asyncio.wait_for(worker.process.wait(), 2)
            except TimeoutError:
                worker.kill()
                await worker.process.wait()
