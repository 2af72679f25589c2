"""Hostile input: malformed and abusive requests to /mcp and /rpc never get a 500 or a traceback."""

from __future__ import annotations

import json
import random
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx2
from mcp_helpers import ADMIN, http_client, http_server, make_options, structured

from ice_mcp.orchestrator import Orchestrator

TOKEN = "fuzz-token"
MODERN = "2026-07-28"
BASE_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


@dataclass
class Case:
    path: str
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)
    auth: bool = True


def envelope_meta() -> dict[str, Any]:
    return {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
    }


def modern(method: Any, params: Any, request_id: Any = 1, **header_overrides: str) -> Case:
    body = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
    headers = {"MCP-Protocol-Version": MODERN, "Mcp-Method": str(method), **header_overrides}
    if isinstance(params, dict) and isinstance(params.get("name"), str):
        headers.setdefault("Mcp-Name", params["name"].encode("ascii", "replace").decode()[:200])
    return Case("/mcp", json.dumps(body).encode(), headers)


def hostile_values(rng: random.Random) -> Iterator[Any]:
    yield from [
        None,
        True,
        -1,
        2**70,
        1e308,
        "",
        "x" * 100_000,
        [],
        {},
        [[[[[]]]]],
        {"a": {"b": {"c": None}}},
    ]
    yield "\u0000\ud7ff\ufffd" * 50
    yield {"$ref": "#/definitions/loop"}
    yield "{{ inputs.__class__.__mro__ }}"
    yield "{% for x in range(10**9) %}{% endfor %}"
    for _ in range(20):
        yield rng.choice(
            [
                rng.random(),
                rng.randint(-(10**12), 10**12),
                "".join(rng.choices("ab{}%[]\"'\\", k=30)),
            ]
        )


def cases() -> Iterator[Case]:
    rng = random.Random(20261122)
    valid_tool = {"name": "workflow_steps", "arguments": {"word": "x"}, "_meta": envelope_meta()}
    # 1. Not JSON at all, or JSON that breaks parsers.
    raw = [
        b"",
        b"{",
        b"}",
        b"[",
        b"null",
        b"true",
        b"42",
        b'"str"',
        b"\xff\xfe\x00",
        b"{'a': 1}",
        b"NaN",
        b"[" * 100_000 + b"]" * 100_000,
        b'{"a":' * 50_000,
        b"1" * 200_000,
        b"1e999999",
        b'{"jsonrpc": "2.0"',
    ]
    for path in ("/mcp", "/rpc"):
        for body in raw:
            yield Case(path, body)
        for _ in range(60):
            yield Case(path, bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 300))))
    # 2. JSON-RPC envelopes with wrong types.
    weird = list(hostile_values(rng))
    for value in weird:
        for path in ("/mcp", "/rpc"):
            yield Case(
                path,
                json.dumps({"jsonrpc": "2.0", "id": 1, "method": value, "params": {}}).encode(),
            )
            yield Case(
                path, json.dumps({"jsonrpc": value, "id": 1, "method": "tools/list"}).encode()
            )
            yield Case(
                path,
                json.dumps(
                    {"jsonrpc": "2.0", "id": value, "method": "run.status", "params": value}
                ).encode(),
            )
    # 3. Unknown and reserved methods.
    for method in [
        "nope",
        "rpc.discover",
        "initialize",
        "tools/call",
        "../../etc",
        "x" * 5000,
        "network.execute",
        "workflow.run",
        "run.cancel",
        "notifications/cancelled",
        "subscriptions/listen",
        "logging/setLevel",
    ]:
        yield modern(method, {"_meta": envelope_meta()})
        yield Case(
            "/rpc", json.dumps({"jsonrpc": "2.0", "id": 9, "method": method, "params": {}}).encode()
        )
    # 4. Batches (removed from MCP; refused on /rpc).
    for size in (0, 1, 2, 50):
        batch = [
            {
                "jsonrpc": "2.0",
                "id": i,
                "method": "tools/list",
                "params": {"_meta": envelope_meta()},
            }
            for i in range(size)
        ]
        yield Case("/mcp", json.dumps(batch).encode(), {"MCP-Protocol-Version": MODERN})
        yield Case("/rpc", json.dumps(batch).encode())
    # 5. Real methods with hostile arguments.
    for value in weird:
        yield modern(
            "tools/call",
            {"name": "workflow_steps", "arguments": {"word": value}, "_meta": envelope_meta()},
        )
        yield modern(
            "tools/call", {"name": "workflow_steps", "arguments": value, "_meta": envelope_meta()}
        )
        yield modern(
            "tools/call",
            {
                "name": "blueprint_validate",
                "arguments": {"blueprint": value},
                "_meta": envelope_meta(),
            },
        )
        yield modern(
            "tools/call",
            {"name": "network_execute", "arguments": {"manifest": value}, "_meta": envelope_meta()},
        )
        yield modern(
            "tools/call",
            {
                "name": "run_result",
                "arguments": {"run_id": value, "wait_seconds": value},
                "_meta": envelope_meta(),
            },
        )
        yield modern(
            "resources/read",
            {"uri": value if isinstance(value, str) else "ice://runs/x", "_meta": envelope_meta()},
        )
        yield modern(
            "prompts/get",
            {"name": "explain_run", "arguments": {"run_id": value}, "_meta": envelope_meta()},
        )
        yield modern(
            "completion/complete", {"ref": value, "argument": value, "_meta": envelope_meta()}
        )
        yield modern("network.execute", {"manifest": value, "_meta": envelope_meta()})
        for method in (
            "network.execute",
            "workflow.run",
            "blueprint.validate",
            "run.status",
            "run.cancel",
        ):
            params = {
                "manifest": value,
                "name": value,
                "inputs": value,
                "blueprint": value,
                "run_id": value,
            }
            yield Case(
                "/rpc",
                json.dumps(
                    {"jsonrpc": "2.0", "id": 3, "method": method, "params": params}
                ).encode(),
            )
            yield Case(
                "/rpc",
                json.dumps(
                    {"jsonrpc": "2.0", "id": 4, "method": method, "params": [value]}
                ).encode(),
            )
    for name in [
        "workflow:steps",
        "workflow_",
        "workflow:",
        ":",
        "tool:../../x",
        "\u202eevil",
        "x" * 10_000,
        "blueprint_register",
    ]:
        yield modern("tools/call", {"name": name, "arguments": {}, "_meta": envelope_meta()})
    yield modern(
        "tools/call",
        {
            "name": "blueprint_register",
            "arguments": {"blueprint": "name: x\nnodes: *a"},
            "_meta": envelope_meta(),
        },
    )
    yield modern(
        "tools/call",
        {
            "name": "blueprint_run",
            "arguments": {"blueprint": "a: &a [*a]"},
            "_meta": envelope_meta(),
        },
    )
    billion = "a: &a ['lol','lol']\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)},*{chr(97 + i)}]\n" for i in range(9)
    )
    yield modern(
        "tools/call",
        {
            "name": "blueprint_validate",
            "arguments": {"blueprint": billion},
            "_meta": envelope_meta(),
        },
    )
    # 6. Huge bodies (over the 4 MiB limit) and long values under it.
    yield Case(
        "/mcp",
        b'{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"x":"'
        + b"a" * 5_000_000
        + b'"}}',
    )
    yield Case(
        "/rpc",
        b'{"jsonrpc":"2.0","id":1,"method":"run.status","params":{"run_id":"'
        + b"a" * 5_000_000
        + b'"}}',
    )
    yield modern(
        "tools/call",
        {
            "name": "workflow_steps",
            "arguments": {"word": "w" * 3_000_000},
            "_meta": envelope_meta(),
        },
    )
    # 7. Wrong headers.
    header_sets = [
        {"Content-Type": "text/plain"},
        {"Accept": "text/html"},
        {"Accept": ""},
        {"MCP-Protocol-Version": "1999-01-01"},
        {"MCP-Protocol-Version": MODERN, "Mcp-Method": "other"},
        {"Mcp-Session-Id": "forged-session"},
        {"Content-Type": "application/json; charset=utf-7"},
        {"Host": "evil.example.com"},
        {"Host": "127.0.0.1:1@evil"},
        {"Origin": "http://evil.example.com"},
        {"Origin": "null"},
        {"Origin": "http://127.0.0.1.evil.example"},
    ]
    for headers in header_sets:
        yield Case(
            "/mcp",
            json.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "tools/list",
                    "params": {"_meta": envelope_meta()},
                }
            ).encode(),
            headers,
        )
        yield Case(
            "/rpc",
            json.dumps(
                {"jsonrpc": "2.0", "id": 1, "method": "run.status", "params": {"run_id": "x"}}
            ).encode(),
            headers,
        )
    # 8. No token, wrong token, wrong scheme.
    for headers in [
        {},
        {"Authorization": "Bearer wrong"},
        {"Authorization": f"Basic {TOKEN}"},
        {"Authorization": "Bearer"},
        {"Authorization": f"Bearer {TOKEN}x"},
        {"Authorization": "Bearer " + "x" * 10_000},
    ]:
        for path in ("/mcp", "/rpc"):
            body = json.dumps(
                {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": valid_tool}
            ).encode()
            yield Case(path, body, headers, auth=False)
    # 9. Random mutations of a valid call.
    template = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": valid_tool})
    for _ in range(300):
        chars = list(template)
        for _ in range(rng.randint(1, 5)):
            chars[rng.randrange(len(chars))] = rng.choice('{}[]":,\\0a ')
        yield Case(
            rng.choice(["/mcp", "/rpc"]),
            "".join(chars).encode(),
            {"MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/call"},
        )


async def chunked() -> AsyncIterator[bytes]:
    yield b'{"jsonrpc":"2.0","id":1,"method":"run.status","params":{"run_id":"'
    for _ in range(50):
        yield b"a" * 100_000
    yield b'"}}'


def check(response: httpx2.Response, case: Case) -> str | None:
    """None when the answer is acceptable; else why not."""
    text = response.text
    if response.status_code >= 500:
        return f"{response.status_code} for {case.path} {case.body[:120]!r}"
    if "Traceback" in text or 'File "' in text:
        return f"traceback in answer for {case.body[:120]!r}"
    if response.status_code >= 400 or response.status_code in (202, 204):
        return None
    messages: list[Any] = []
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        messages = [
            json.loads(line[5:])
            for line in text.splitlines()
            if line.startswith("data:") and line[5:].strip()
        ]
    else:
        try:
            messages = [response.json()]
        except ValueError:
            return f"non-JSON 200 answer {text[:200]!r}"
    final = [m for m in messages if isinstance(m, dict) and ("error" in m or "result" in m)]
    if not final:
        return f"no JSON-RPC answer: {text[:200]!r}"
    error = final[-1].get("error")
    if error is not None and (
        not isinstance(error.get("code"), int) or not isinstance(error.get("message"), str)
    ):
        return f"malformed error {error!r}"
    return None


async def test_thousand_hostile_requests(orc: Orchestrator) -> None:
    all_cases = list(cases())
    assert len(all_cases) >= 1000
    problems: list[str] = []
    async with http_server(orc, make_options(), token=TOKEN) as url:
        async with httpx2.AsyncClient(base_url=url, timeout=60) as http:
            for case in all_cases:
                headers = {
                    **BASE_HEADERS,
                    **({"Authorization": f"Bearer {TOKEN}"} if case.auth else {}),
                    **case.headers,
                }
                try:
                    response = await http.post(case.path, content=case.body, headers=headers)
                except (
                    httpx2.HTTPError
                ) as exc:  # a refused oversized upload may close the connection
                    if len(case.body) < 4 * 1024 * 1024:
                        problems.append(f"connection error {exc!r} for {case.body[:80]!r}")
                    continue
                if (why := check(response, case)) is not None:
                    problems.append(why)
                if not case.auth:
                    assert response.status_code == 401
            for path in ("/mcp", "/rpc"):  # an oversized chunked body (no Content-Length)
                response = await http.post(
                    path,
                    content=chunked(),
                    headers={**BASE_HEADERS, "Authorization": f"Bearer {TOKEN}"},
                )
                assert response.status_code == 413
            assert (await http.get("/healthz")).status_code == 200
        async with http_client(url, token=TOKEN) as client:
            result = await client.call_tool("workflow_steps", {"word": "still here"})
            assert structured(result)["outputs"] == {"upper": "STILL HERE"}
        async with http_client(url, token=ADMIN, mode="legacy") as client:
            assert "workflow_steps" in {t.name for t in (await client.list_tools()).tools}
    assert not problems, "\n".join(problems[:30])
