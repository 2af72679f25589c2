"""A real redis-server on a free loopback port for the memory tests, stopped after the session."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
import uuid
from collections.abc import AsyncIterator, Iterator

import pytest

from ice_mcp.memory import MemoryStore, open_memory


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    binary = shutil.which("redis-server")
    if binary is None:
        missing = "redis-server is not installed (scripts/setup_llm.sh installs it)"
        if os.environ.get("CI"):
            pytest.fail(missing)  # in CI a missing install step must not pass as skipped tests
        pytest.skip(missing)
    port = free_port()
    process = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 10
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2) as sock:
                sock.sendall(b"PING\r\n")
                if sock.recv(16).startswith(b"+PONG"):
                    break
        except OSError:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            raise RuntimeError("redis-server did not start")
        time.sleep(0.05)
    yield f"redis://127.0.0.1:{port}/0"
    process.terminate()
    try:
        process.wait(timeout=5)
    except subprocess.TimeoutExpired:
        process.kill()


@pytest.fixture(params=["memory", "redis"])
async def store(request: pytest.FixtureRequest) -> AsyncIterator[MemoryStore]:
    """Each test runs on both backends; Redis keys get a fresh prefix per test."""
    if request.param == "memory":
        memory = open_memory("memory")
    else:
        url = request.getfixturevalue("redis_url")
        memory = open_memory(url, prefix=f"test:{uuid.uuid4().hex}:")
    yield memory
    await memory.aclose()
