"""Big request bodies are decoded in a worker thread and still decoded right: the same values, the same
structured parse error for a malformed one, and the same OAuth scope (a body orjson refused no longer passes
as ice:read). No timing here: bench/http_body.py measures the event loop's latency."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import httpx2
import pytest
from jsonrpcserver import Result, Success
from mcp_helpers import http_server, make_options

from ice_mcp.orchestrator import Orchestrator
from ice_mcp.server.auth.authenticators import needed_scope
from ice_mcp.server.web import bodies
from ice_mcp.server.web.rpc import PARSE_ERROR, handle_rpc

HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
LEGACY = "2025-11-25"
ROWS: list[dict[str, Any]] = [{"week": i % 52, "amount": i * 1.5, "name": f"row{i}", "tags": ["a", "b"]} for i in range(40_000)]  # ~3 MB: under the 4 MiB cap


@pytest.fixture
def decoder_threads(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[int, bool]]]:
    """(size, decoded off the main thread?) for every body `bodies.decode` decodes."""
    seen: list[tuple[int, bool]] = []
    original = bodies.decode

    def spied(body: bytes | str) -> Any:
        seen.append((len(body), threading.current_thread() is not threading.main_thread()))
        return original(body)

    monkeypatch.setattr(bodies, "decode", spied)
    yield seen


def test_decode_is_json_loads() -> None:
    for text in ['{"a": NaN, "b": -Infinity}', '{"s": "\\ud800"}', '{"n": 1e400}', '[{"k": {"k": [1, 2.5]}}]',
                 '{"a": 1, "a": 2}', '"\\u0000"', "null"]:
        assert repr(bodies.decode(text)) == repr(json.loads(text))
    bad_bodies: list[str | bytes] = ["{", '{"a": 1,}', "1" * 5000, "[" * 5000 + "]" * 5000, b'"\xff"']
    for bad in bad_bodies:
        with pytest.raises((ValueError, RecursionError)) as raised:
            json.loads(bad)
        with pytest.raises(raised.type):
            bodies.decode(bad)
    assert bodies.try_decode("{") is None


async def test_a_big_rpc_body_is_decoded_off_the_loop(decoder_threads: list[tuple[int, bool]]) -> None:
    async def tally(caller: str | None, rows: list[dict[str, Any]]) -> Result:
        return Success({"rows": len(rows), "last": rows[-1], "amount": sum(row["amount"] for row in rows)})

    body = json.dumps({"jsonrpc": "2.0", "id": "big", "method": "tally", "params": {"rows": ROWS}}).encode()
    assert len(body) > 4 * bodies.OFF_LOOP_BYTES
    answer = await handle_rpc(body, {"tally": tally})
    assert answer == {"jsonrpc": "2.0", "id": "big",
                      "result": {"rows": len(ROWS), "last": ROWS[-1], "amount": sum(row["amount"] for row in ROWS)}}
    assert decoder_threads == [(len(body), True)]

    small = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tally", "params": {"rows": ROWS[:3]}}).encode()
    assert (await handle_rpc(small, {"tally": tally}) or {})["result"]["rows"] == 3
    assert decoder_threads[-1] == (len(small), False)  # a small body: decoded inline

    malformed = body[:-2]
    assert await handle_rpc(malformed, {"tally": tally}) == {
        "jsonrpc": "2.0", "error": {"code": PARSE_ERROR, "message": "Parse error"}, "id": None}
    assert decoder_threads[-1] == (len(malformed), True)


async def test_big_rpc_bodies_keep_every_check() -> None:
    async def nothing(caller: str | None, **params: Any) -> Result:
        return Success(None)

    padding = {"rows": ROWS}
    for request, code in (
        ({"jsonrpc": "2.0", "id": 1, "method": "nothing", "params": {**padding, "bad": "\ud800"}}, -32602),
        ({"jsonrpc": "2.0", "id": 1, "method": "nothing\ud800", "params": padding}, -32600),
        ({"jsonrpc": "1.0", "id": 1, "method": "nothing", "params": padding}, -32600),  # the JSON-RPC schema
        ({"jsonrpc": "2.0", "id": 1, "method": "nothing", "params": padding, "extra": 1}, -32600),
        ([{"jsonrpc": "2.0", "id": 1, "method": "nothing", "params": padding}], -32600),
    ):
        body = json.dumps(request).encode()
        assert len(body) > bodies.OFF_LOOP_BYTES
        answer = await handle_rpc(body, {"nothing": nothing}) or {}
        assert answer["error"]["code"] == code, (request if isinstance(request, list) else request["method"], answer)
    small = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "nothing", "params": None}).encode()
    assert ((await handle_rpc(small, {"nothing": nothing})) or {})["error"]["code"] == -32600  # params: null


async def test_a_big_mcp_body_is_decoded_right(orc: Orchestrator, decoder_threads: list[tuple[int, bool]]) -> None:
    async with http_server(orc, make_options(), json_response=True) as url, \
            httpx2.AsyncClient(base_url=url, timeout=60) as http:
        opened = await http.post("/mcp", headers=HEADERS, json={
            "jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
        session = {**HEADERS, "Mcp-Session-Id": opened.headers["mcp-session-id"], "MCP-Protocol-Version": LEGACY}
        await http.post("/mcp", headers=session, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
        body = json.dumps({"jsonrpc": "2.0", "id": "big", "method": "tools/call",
                           "params": {"name": "tool_echo", "arguments": {"value": ROWS}}}).encode()
        reply = await http.post("/mcp", headers=session, content=body)
        assert reply.status_code == 200 and reply.json()["id"] == "big"
        assert _echoed(reply.json()["result"]["structuredContent"]) == ROWS
        assert (len(body), True) in decoder_threads  # the session's duplicate-id check decoded it off the loop

        malformed = await http.post("/mcp", headers=session, content=body[:-2])
        assert malformed.status_code == 400
        error = malformed.json()["error"]
        assert error["code"] == PARSE_ERROR and error["message"].startswith("Parse error")
        assert (len(body) - 2, True) in decoder_threads


def _echoed(content: Any) -> Any:
    """The value `tool_echo` gave back, wherever the tool's envelope keeps it."""
    if isinstance(content, dict):
        if set(content) == {"value"}:
            return content["value"]
        for child in content.values():
            if (found := _echoed(child)) is not None:
                return found
    return None


def test_the_oauth_scope_is_read_from_what_the_endpoints_accept() -> None:
    def tool_scope(name: str) -> str:
        return "ice:run"

    def rpc_scope(method: str) -> str:
        return "ice:run" if method == "workflow.run" else "ice:read"

    for number in ("NaN", "-Infinity", "1e400"):  # orjson refused these; the endpoints' decoders accept them
        call = f'{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"w","arguments":{{"x":{number}}}}}}}'
        assert needed_scope("/mcp", bodies.try_decode(call), tool_scope, rpc_scope) == "ice:run"
        run = f'{{"jsonrpc":"2.0","id":1,"method":"workflow.run","params":{{"name":"w","inputs":{{"x":{number}}}}}}}'
        assert needed_scope("/rpc", bodies.try_decode(run), tool_scope, rpc_scope) == "ice:run"
    assert needed_scope("/mcp", bodies.try_decode("{not json"), tool_scope, rpc_scope) == "ice:read"
