"""MCP layer overhead: a bare SDK server with a trivial tool vs `workflow_noop`, same transport, same client.

    python bench/mcp_layer.py                 # stdio and HTTP p50 ratios, then 200 concurrent HTTP clients
    python bench/mcp_layer.py --calls 300 --clients 200 --per-client 5 --rounds 3

Prints the figures; exits non-zero if any call of the load run failed.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
# This file is named mcp.py: keep its folder off sys.path so `import mcp` finds the SDK.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import argparse  # noqa: E402
import asyncio  # noqa: E402
import contextlib  # noqa: E402
import os  # noqa: E402
import socket  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections.abc import AsyncIterator, Iterator  # noqa: E402
from typing import Any, TypedDict  # noqa: E402

NOOP = {
    "name": "noop",
    "description": "One node.",
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
FIVE = {
    "name": "five",
    "description": "Five nodes: a chain, a fan-out of two, a join.",
    "inputs": {"type": "object", "properties": {"value": {}}},
    "outputs": {"value": "{{ join.value }}"},
    "nodes": [
        {
            "id": "a",
            "type": "tool",
            "tool_name": "echo",
            "tool_args": {"value": "{{ inputs.value }}"},
        },
        {"id": "b", "type": "tool", "tool_name": "echo", "tool_args": {"value": "{{ a.value }}"}},
        {"id": "c1", "type": "tool", "tool_name": "echo", "tool_args": {"value": "{{ b.value }}"}},
        {"id": "c2", "type": "tool", "tool_name": "echo", "tool_args": {"value": "{{ b.value }}"}},
        {
            "id": "join",
            "type": "tool",
            "tool_name": "echo",
            "tool_args": {"value": "{{ [c1.value, c2.value] }}"},
        },
    ],
}


def echo(value: Any = None) -> dict[str, Any]:
    """Return the value."""
    return {"value": value}


# -- the two servers --------------------------------------------------------------------------


def bare_server() -> Any:
    """The SDK's low-level server with one trivial tool: the baseline."""
    import mcp_types as types
    from mcp.server import Server

    tool = types.Tool(name="noop", input_schema={"type": "object", "properties": {"value": {}}})

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[tool])

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        value = {"value": (params.arguments or {}).get("value")}
        import json

        return types.CallToolResult(
            content=[types.TextContent(type="text", text=json.dumps(value))],
            structured_content=value,
        )

    return Server("bare", on_list_tools=list_tools, on_call_tool=call_tool)


class Echoed(TypedDict):
    value: Any


def typed_server() -> Any:
    """The SDK's idiomatic server: MCPServer with a typed trivial tool (its return type gives an
    outputSchema, so the client validates every result, as it does for ours)."""
    from mcp.server import MCPServer

    def noop(value: Any = None) -> Echoed:
        """Return the value."""
        return {"value": value}

    server = MCPServer("typed")
    server.add_tool(noop, structured_output=True)
    return server


def ice_orchestrator() -> Any:
    from ice_mcp.orchestrator import Orchestrator
    from ice_mcp.settings import Settings
    from ice_mcp.tools.registry import Registry, ToolAnnotations

    workspace = Path(tempfile.mkdtemp(prefix="ice-bench-"))
    orc = Orchestrator(
        registry=Registry(), settings=Settings(persist_runs=False, workspace=workspace)
    )
    orc.registry.add_tool(echo, annotations=ToolAnnotations(read_only=True, idempotent=True))
    orc.register_blueprint(NOOP)
    orc.register_blueprint(FIVE)
    return orc


def serve(kind: str, transport: str, port: int) -> None:
    """Child process: run one server until killed."""
    import logging

    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    if kind == "bare":
        server = bare_server()
        if transport == "stdio":
            from mcp.server.stdio import stdio_server

            async def main() -> None:
                async with stdio_server() as (read, write):
                    await server.run(read, write, server.create_initialization_options())

            asyncio.run(main())
        else:
            import uvicorn

            app = server.streamable_http_app(host="127.0.0.1")
            uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)
        return
    if kind == "typed":
        typed = typed_server()
        if transport == "stdio":
            asyncio.run(typed.run_stdio_async())
        else:
            import uvicorn

            app = typed.streamable_http_app(host="127.0.0.1")
            uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)
        return
    from ice_mcp.server import ServerOptions, create_http_app, serve_stdio

    orc = ice_orchestrator()
    options = ServerOptions()
    if transport == "stdio":
        asyncio.run(serve_stdio(orc, options))
    else:
        import uvicorn

        app = create_http_app(orc, options, port=port)
        uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


# -- clients ----------------------------------------------------------------------------------


def free_port() -> int:
    with contextlib.closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def child_command(kind: str, transport: str, port: int = 0) -> list[str]:
    return [
        sys.executable,
        str(Path(__file__).resolve()),
        "--serve",
        kind,
        "--transport",
        transport,
        "--port",
        str(port),
    ]


@contextlib.contextmanager
def http_child(kind: str) -> Iterator[str]:
    import httpx2

    port = free_port()
    proc = subprocess.Popen(child_command(kind, "http", port), stdout=subprocess.DEVNULL, cwd=ROOT)
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        for _ in range(200):
            try:
                httpx2.get(url, timeout=1)
                break
            except httpx2.HTTPError:
                time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@contextlib.asynccontextmanager
async def connect(kind: str, transport: str, url: str | None = None) -> AsyncIterator[Any]:
    from mcp import Client, StdioServerParameters

    if transport == "stdio":
        command = child_command(kind, "stdio")
        params = StdioServerParameters(
            command=command[0], args=command[1:], cwd=str(ROOT), env=dict(os.environ)
        )
        async with Client(params, mode="legacy") as client:
            yield client
    else:
        async with Client(url, mode="legacy") as client:  # type: ignore[arg-type]
            yield client


async def warm(client: Any, tool: str) -> None:
    for i in range(30):
        result = await client.call_tool(tool, {"value": i})
        if result.is_error:
            raise RuntimeError(f"{tool} failed: {result.content}")


async def timed(client: Any, tool: str, value: int) -> float:
    start = time.perf_counter()
    result = await client.call_tool(tool, {"value": value})
    elapsed = (time.perf_counter() - start) * 1000
    if result.is_error:
        raise RuntimeError(f"{tool} failed: {result.content}")
    return elapsed


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


KINDS = ("bare", "typed", "ice")


async def compare(transport: str, calls: int) -> dict[str, float]:
    """p50 of each server, calls interleaved one by one so machine noise hits all alike."""
    async with contextlib.AsyncExitStack() as stack:
        clients = {}
        for kind in KINDS:
            url = stack.enter_context(http_child(kind)) if transport == "http" else None
            clients[kind] = await stack.enter_async_context(connect(kind, transport, url))
        tools = {"bare": "noop", "typed": "noop", "ice": "workflow_noop"}
        for kind, client in clients.items():
            await warm(client, tools[kind])
        samples: dict[str, list[float]] = {kind: [] for kind in KINDS}
        for i in range(calls):
            shift = i % len(KINDS)
            for kind in KINDS[shift:] + KINDS[:shift]:
                samples[kind].append(await timed(clients[kind], tools[kind], i))
    return {kind: statistics.median(values) for kind, values in samples.items()}


async def load(
    clients: int, per_client: int, kind: str = "ice", tool: str = "workflow_five"
) -> dict[str, float]:
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    errors = 0
    times: list[float] = []
    with http_child(kind) as url:
        http = create_mcp_http_client()
        http._transport = type(http._transport)(
            limits=__import__("httpx2").Limits(max_connections=clients)
        )

        async def one(i: int) -> None:
            nonlocal errors
            try:
                async with Client(
                    streamable_http_client(url, http_client=http), mode="2026-07-28", cache=None
                ) as c:  # type: ignore[arg-type]
                    for j in range(per_client):
                        start = time.perf_counter()
                        result = await c.call_tool(tool, {"value": [i, j]})
                        times.append((time.perf_counter() - start) * 1000)
                        content = result.structured_content or {}
                        ok = (
                            not result.is_error
                            and content.get("status", "succeeded") == "succeeded"
                        )
                        errors += 0 if ok else 1
            except Exception as exc:
                print(f"client {i}: {exc!r}", file=sys.stderr)
                errors += per_client

        start = time.perf_counter()
        await asyncio.gather(*(one(i) for i in range(clients)))
        elapsed = time.perf_counter() - start
        await http.aclose()
    return {
        "calls": clients * per_client,
        "seconds": elapsed,
        "throughput": len(times) / elapsed,
        "p50": pct(times, 0.50) if times else 0.0,
        "p99": pct(times, 0.99) if times else 0.0,
        "errors": errors,
    }


async def main(args: argparse.Namespace) -> int:
    print(f"MCP layer benchmark ({args.calls} sequential calls per server, legacy-era sessions, "
          f"{args.rounds} round(s) each: the round with the median ratio)")
    for transport in ("stdio", "http"):
        rounds = [await compare(transport, args.calls) for _ in range(args.rounds)]
        # On a busy machine one round can be far off: report the round whose ratio is the median.
        p50 = sorted(rounds, key=lambda r: r["ice"] / r["bare"])[len(rounds) // 2]
        print(
            f"  {transport:5}  bare low-level SDK noop p50 {p50['bare']:6.2f} ms   "
            f"MCPServer typed noop p50 {p50['typed']:6.2f} ms   workflow_noop p50 {p50['ice']:6.2f} ms   "
            f"ratio {p50['ice'] / p50['bare']:.2f} (vs low-level) / {p50['ice'] / p50['typed']:.2f} (vs MCPServer)"
            + (f"   [round ratios: {', '.join(format(r['ice'] / r['bare'], '.2f') for r in rounds)}]"
               if len(rounds) > 1 else "")
        )
    errors = 0
    for label, kind, tool in (
        ("bare SDK noop (ceiling of the SDK's HTTP stack here)", "bare", "noop"),
        ("workflow_five (a 5-node workflow)", "ice", "workflow_five"),
    ):
        result = await load(args.clients, args.per_client, kind, tool)
        errors += int(result["errors"])
        print(
            f"  load   {args.clients} concurrent HTTP clients x {args.per_client} calls, {label}: "
            f"{result['throughput']:.0f} calls/s, p50 {result['p50']:.1f} ms, p99 {result['p99']:.1f} ms, "
            f"errors {result['errors']}"
        )
    return 1 if errors else 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=1, help="compare this many times; report the median round")
    parser.add_argument("--clients", type=int, default=200)
    parser.add_argument("--per-client", type=int, default=5)
    parser.add_argument("--serve", choices=list(KINDS))
    parser.add_argument("--transport", choices=["stdio", "http"], default="stdio")
    parser.add_argument("--port", type=int, default=0)
    arguments = parser.parse_args()
    if arguments.serve:
        serve(arguments.serve, arguments.transport, arguments.port)
    else:
        sys.exit(asyncio.run(main(arguments)))
