"""Protocol edges against a real server subprocess: session floods, duplicate ids, Host parsing, /rpc
values that used to crash, Authorization read once, read-only (the workspace's path told to admins only), and
malformed lines over stdio.

Each hostile HTTP call runs while a second client times /healthz (it must answer within 100 ms)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx2
import pytest
from live import healthz_watch, live_server
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_helpers import ADMIN, ROOT, structured, subprocess_env, write_blueprints
from test_hostile import cases

LEGACY = "2025-11-25"
TOKEN = "live-token"
JSON_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": LEGACY,
        "capabilities": {},
        "clientInfo": {"name": "flood", "version": "1"},
    },
}
TOOLS = ("--tools", "mcp_fixture_tools")


def server_pid(url: str) -> int:
    """The pid of the `ice-mcp serve --http --port PORT` subprocess behind `url`."""
    port = str(urlsplit(url).port)
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"serve" in argv and b"--port" in argv and port.encode() in argv:
            return int(entry.name)
    raise AssertionError(f"no server process on port {port}")


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def sse_messages(text: str) -> list[dict[str, Any]]:
    return [json.loads(line[5:]) for line in text.splitlines() if line.startswith("data:") and line[5:].strip()]


def open_session(http: httpx2.Client, url: str, headers: dict[str, str] | None = None) -> str:
    response = http.post(f"{url}/mcp", json=INITIALIZE, headers={**JSON_HEADERS, **(headers or {})})
    assert response.status_code == 200, response.text
    session = response.headers["mcp-session-id"]
    done = http.post(
        f"{url}/mcp",
        json={"jsonrpc": "2.0", "method": "notifications/initialized"},
        headers={**JSON_HEADERS, "Mcp-Session-Id": session, "MCP-Protocol-Version": LEGACY, **(headers or {})},
    )
    assert done.status_code == 202, done.text
    return session


def session_call(
    http: httpx2.Client, url: str, session: str, request_id: Any, method: str, params: dict[str, Any]
) -> httpx2.Response:
    return http.post(
        f"{url}/mcp",
        json={"jsonrpc": "2.0", "id": request_id, "method": method, "params": params},
        headers={**JSON_HEADERS, "Mcp-Session-Id": session, "MCP-Protocol-Version": LEGACY},
        timeout=30,
    )


def mcp_client(url: str, *, local_address: str | None = None, token: str | None = None) -> Client:
    """An SDK client for `url`, optionally from another loopback address (another peer)."""
    http = httpx2.AsyncClient(
        transport=httpx2.AsyncHTTPTransport(local_address=local_address),
        headers={"Authorization": f"Bearer {token}"} if token else None,
        timeout=httpx2.Timeout(30, read=300),
        follow_redirects=True,
    )
    return Client(streamable_http_client(f"{url}/mcp", http_client=http), mode="legacy")  # type: ignore[arg-type]


def while_probed(watch: Any, minimum: int = 3) -> Iterator[int]:
    """Rounds of a quick hostile call, repeated until /healthz has been probed meanwhile."""
    rounds = 0
    while rounds == 0 or (len(watch.latencies) + len(watch.failures) < minimum and rounds < 1000):
        yield rounds
        rounds += 1


@pytest.fixture
def log_file(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "server.log"
    yield path
    text = path.read_text() if path.exists() else ""
    assert "Traceback" not in text, text[-3000:]


# -- sessions ----------------------------------------------------------------------------


async def test_session_flood_is_capped_and_another_client_still_connects(
    tmp_path: Path, log_file: Path
) -> None:
    env = {
        "ICE_MCP_MAX_SESSIONS_PER_CLIENT": "8",
        "ICE_MCP_MAX_SESSIONS": "64",
        "ICE_MCP_LOG_FILE": str(log_file),
    }
    attempts = 2000
    with live_server(tmp_path, *TOOLS, env=env) as url:
        pid = server_pid(url)
        with httpx2.Client(timeout=30) as http:
            open_session(http, url)  # warm up before the baseline
            before = rss_mb(pid)
            opened: list[str] = []
            with healthz_watch(url) as watch:
                for _ in range(attempts):
                    response = http.post(f"{url}/mcp", json=INITIALIZE, headers=JSON_HEADERS)
                    assert response.status_code == 200, response.text
                    opened.append(response.headers["mcp-session-id"])
            watch.assert_responsive()
            grown = rss_mb(pid) - before
            # The flood's oldest sessions were evicted (404), its newest still serve.
            ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
            headers = {**JSON_HEADERS, "MCP-Protocol-Version": LEGACY}
            old = http.post(f"{url}/mcp", json=ping, headers={**headers, "Mcp-Session-Id": opened[0]})
            assert old.status_code == 404
            live = [
                http.post(f"{url}/mcp", json=ping, headers={**headers, "Mcp-Session-Id": sid}).status_code
                for sid in opened[-8:]
            ]
            assert live == [200] * 8
        print(f"RSS after {attempts} session attempts from one client: +{grown:.1f} MB")
        assert grown < 40, f"server RSS grew {grown:.1f} MB over {attempts} session attempts"
        # Another peer, and the flooding peer itself, still get a working session.
        for address in ("127.0.0.2", "127.0.0.1"):
            async with mcp_client(url, local_address=address) as client:
                result = await client.call_tool("workflow_steps", {"word": "honest"})
                assert structured(result)["outputs"] == {"upper": "HONEST"}


def test_idle_session_expires(tmp_path: Path) -> None:
    env = {"ICE_MCP_SESSION_IDLE_SECONDS": "1"}
    with live_server(tmp_path, *TOOLS, env=env) as url, httpx2.Client(timeout=30) as http:
        session = open_session(http, url)
        assert session_call(http, url, session, 2, "ping", {}).status_code == 200
        time.sleep(2.5)
        gone = session_call(http, url, session, 3, "ping", {})
        assert gone.status_code == 404
        assert gone.json()["error"]["message"] == "Session not found"


def test_busy_sessions_are_not_evicted_and_the_refusal_is_clear(tmp_path: Path) -> None:
    env = {"ICE_MCP_MAX_SESSIONS_PER_CLIENT": "1"}
    with live_server(tmp_path, *TOOLS, env=env) as url, httpx2.Client(timeout=30) as http:
        session = open_session(http, url)
        slow = threading.Thread(
            target=session_call,
            args=(http, url, session, 5, "tools/call", {"name": "workflow_slow", "arguments": {"seconds": 3.0}}),
        )
        with healthz_watch(url) as watch:  # its prober process up first: starting one can outlast a short call
            slow.start()
            time.sleep(0.5)
            refused = http.post(f"{url}/mcp", json=INITIALIZE, headers=JSON_HEADERS)
            slow.join()
        watch.assert_responsive()
        assert refused.status_code == 429
        assert refused.json()["error"]["code"] == -32000
        assert "Too many open sessions" in refused.json()["error"]["message"]
        # Once the call is over the session is idle again and makes room.
        assert http.post(f"{url}/mcp", json=INITIALIZE, headers=JSON_HEADERS).status_code == 200


# -- duplicate ids, Host, /rpc values ------------------------------------------------------


def test_duplicate_id_in_flight_is_refused_and_the_first_is_answered(
    tmp_path: Path, log_file: Path
) -> None:
    with (
        live_server(tmp_path, *TOOLS, env={"ICE_MCP_LOG_FILE": str(log_file)}) as url,
        httpx2.Client(timeout=30) as first_http,
        httpx2.Client(timeout=30) as second_http,
    ):
        session = open_session(first_http, url)
        params = {"name": "workflow_slow", "arguments": {"seconds": 1.0}}
        answers: list[httpx2.Response] = []
        first = threading.Thread(
            target=lambda: answers.append(session_call(first_http, url, session, 7, "tools/call", params))
        )
        with healthz_watch(url) as watch:  # its prober process up first: starting one can outlast the call
            first.start()
            time.sleep(0.3)
            second = session_call(second_http, url, session, 7, "tools/call", params)
            first.join(timeout=30)
        watch.assert_responsive()
        assert second.status_code == 409
        error = second.json()
        assert error["id"] == 7 and error["error"]["code"] == -32600
        assert "already in flight" in error["error"]["message"]
        final = [m for m in sse_messages(answers[0].text) if m.get("id") == 7]
        assert final and final[-1]["result"]["structuredContent"]["status"] == "succeeded"
        # The id is free again once answered (when the SDK's handler returns, a moment after the answer).
        statuses = []
        for _ in range(50):
            statuses.append(session_call(first_http, url, session, 7, "ping", {}).status_code)
            if statuses[-1] != 409:
                break
            time.sleep(0.1)
        assert statuses[-1] == 200, statuses


def test_host_and_origin_are_parsed_strictly(tmp_path: Path) -> None:
    with live_server(tmp_path, *TOOLS) as url, httpx2.Client(timeout=30) as http:
        port = urlsplit(url).port
        bad_hosts = [
            f"localhost:{port}@evil.example",
            f"127.0.0.1:{port}/../evil",
            f"127.0.0.1:{port}?x",
            "127.0.0.1:99999",
            "127.0.0.1:",
            f"evil.example#127.0.0.1:{port}",
            f"[::1]x:{port}",
        ]
        with healthz_watch(url) as watch:
            for _round, host, path in (
                (r, h, p) for r in while_probed(watch) for h in bad_hosts for p in ("/mcp", "/rpc")
            ):
                response = http.post(
                    f"{url}{path}", json=INITIALIZE, headers={**JSON_HEADERS, "Host": host}
                )
                assert response.status_code == 421, (host, response.status_code)
                assert response.json()["error"]["message"] == "Invalid Host header"
            origin = http.post(
                f"{url}/mcp",
                json=INITIALIZE,
                headers={**JSON_HEADERS, "Origin": f"http://127.0.0.1:{port}@evil.example"},
            )
            # The workspace's path: the run view tells an admin, and no one else.
            viewer = http.get(f"{url}/ui/api/session").json()
            admin = http.get(f"{url}/ui/api/session", headers={"Authorization": f"Bearer {ADMIN}"}).json()
        watch.assert_responsive()
        assert origin.status_code == 403
        assert viewer["workspace"] is None and admin["workspace"] == str(tmp_path.resolve())
        ok = http.post(f"{url}/mcp", json=INITIALIZE, headers={**JSON_HEADERS, "Host": f"localhost:{port}"})
        assert ok.status_code == 200


def rpc_bodies() -> Iterator[tuple[str, str]]:
    """/rpc requests that used to raise: lone surrogates in each text param, huge wait_seconds."""
    lone = '"\\ud800x"'
    yield "run_id", f'{{"jsonrpc":"2.0","id":1,"method":"run.status","params":{{"run_id":{lone}}}}}'
    yield "run_id", f'{{"jsonrpc":"2.0","id":1,"method":"run.cancel","params":{{"run_id":{lone}}}}}'
    yield "idempotency_key", (
        '{"jsonrpc":"2.0","id":1,"method":"workflow.run","params":'
        f'{{"name":"noop","inputs":{{}},"idempotency_key":{lone}}}}}'
    )
    yield "manifest", f'{{"jsonrpc":"2.0","id":1,"method":"network.execute","params":{{"manifest":{lone}}}}}'
    yield "blueprint", f'{{"jsonrpc":"2.0","id":1,"method":"blueprint.validate","params":{{"blueprint":{lone}}}}}'
    yield "blueprint", f'{{"jsonrpc":"2.0","id":1,"method":"blueprint.validate","params":[{{"name":{lone}}}]}}'
    huge = "9" * 400
    yield "wait_seconds", (
        '{"jsonrpc":"2.0","id":1,"method":"workflow.run","params":'
        f'{{"name":"noop","inputs":{{}},"wait_seconds":{huge}}}}}'
    )
    yield "wait_seconds", (
        '{"jsonrpc":"2.0","id":1,"method":"network.execute","params":'
        f'{{"manifest":"name: x","wait_seconds":{huge}}}}}'
    )
    yield "wait_seconds", (
        '{"jsonrpc":"2.0","id":1,"method":"workflow.run","params":'
        '{"name":"noop","inputs":{},"wait_seconds":-1}}'
    )


def test_rpc_values_that_used_to_crash_get_invalid_params(tmp_path: Path, log_file: Path) -> None:
    with live_server(tmp_path, *TOOLS, env={"ICE_MCP_LOG_FILE": str(log_file)}) as url:
        with httpx2.Client(timeout=30) as http, healthz_watch(url) as watch:
            for _round, (param, body) in ((r, b) for r in while_probed(watch) for b in rpc_bodies()):
                response = http.post(f"{url}/rpc", content=body.encode(), headers=JSON_HEADERS)
                assert response.status_code == 200, (param, response.text)
                error = response.json()["error"]
                assert error["code"] == -32602, (param, error)
                assert param in error["message"] or param == "blueprint", (param, error)
                assert "internal" not in error["message"].lower()
            # On /mcp the SDK's JSON parser refuses a lone surrogate: a parse error, not a crash.
            session = open_session(http, url)
            response = http.post(
                f"{url}/mcp",
                content=(
                    b'{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"run_status",'
                    b'"arguments":{"run_id":"\\udfff"}}}'
                ),
                headers={**JSON_HEADERS, "Mcp-Session-Id": session, "MCP-Protocol-Version": LEGACY},
            )
            assert response.status_code == 400 and response.json()["error"]["code"] == -32700
        watch.assert_responsive()


# -- Authorization -------------------------------------------------------------------------


async def test_authorization_is_read_once(tmp_path: Path, log_file: Path) -> None:
    env = {"ICE_MCP_TOKEN": TOKEN, "ICE_MCP_LOG_FILE": str(log_file), "ICE_MCP_MAX_SESSIONS_PER_CLIENT": "4"}
    with live_server(tmp_path, *TOOLS, env=env) as url:
        run_status = {"jsonrpc": "2.0", "id": 1, "method": "run.status", "params": {"run_id": "x"}}
        with httpx2.Client(timeout=30) as http, healthz_watch(url) as watch:
            for pair in ([TOKEN, "wrong"], ["wrong", TOKEN], [TOKEN, TOKEN], [TOKEN, ADMIN]):
                headers = [(k, v) for k, v in JSON_HEADERS.items()]
                headers += [("Authorization", f"Bearer {token}") for token in pair]
                for path, body in (("/mcp", INITIALIZE), ("/rpc", run_status)):
                    response = http.post(f"{url}{path}", content=json.dumps(body).encode(), headers=headers)
                    assert response.status_code == 400, (pair, path, response.status_code)
                    assert response.json()["error"]["message"] == "Send exactly one Authorization header"
            assert http.post(f"{url}/rpc", json=run_status, headers=JSON_HEADERS).status_code == 401
            one = http.post(
                f"{url}/rpc", json=run_status, headers={**JSON_HEADERS, "Authorization": f"Bearer {TOKEN}"}
            )
            assert one.status_code == 200 and one.json()["error"]["message"] == "unknown run 'x'"
            # Sessions are capped per token caller: a flood with TOKEN leaves room for ADMIN.
            for _ in range(50):
                flood = http.post(
                    f"{url}/mcp", json=INITIALIZE, headers={**JSON_HEADERS, "Authorization": f"Bearer {TOKEN}"}
                )
                assert flood.status_code == 200
        watch.assert_responsive()
        async with mcp_client(url, token=ADMIN) as client:
            assert "workflow_steps" in {t.name for t in (await client.list_tools()).tools}


# -- read-only -----------------------------------------------------------------------------

WRITE_ARGS = {"path": "written.txt", "content": "should not exist"}
ADHOC = {"name": "adhoc", "nodes": [{"id": "a", "type": "tool", "tool_name": "echo", "tool_args": {"value": 1}}]}


async def test_read_only_http_offers_and_runs_only_read_only_tools(tmp_path: Path, log_file: Path) -> None:
    with live_server(tmp_path, *TOOLS, "--read-only", env={"ICE_MCP_LOG_FILE": str(log_file)}) as url:
        with healthz_watch(url) as watch:
            async with mcp_client(url, token=ADMIN) as client:
                names = {t.name for t in (await client.list_tools()).tools}
                for name in ("tool_file_write", "blueprint_run", "blueprint_register", "network_execute",
                             "run_cancel", "tool_http_request"):
                    assert name not in names
                assert {"workflow_steps", "tool_file_read", "run_status", "blueprint_validate"} <= names
                refused = await client.call_tool("tool_file_write", WRITE_ARGS)
                assert refused.is_error and "read-only" in refused.content[0].text
                refused = await client.call_tool("blueprint_run", {"blueprint": ADHOC})
                assert refused.is_error and "read-only" in refused.content[0].text
                ok = await client.call_tool("workflow_steps", {"word": "ro"})
                assert structured(ok)["outputs"] == {"upper": "RO"}
                # A remote caller is told "the server's workspace" and how to list it, never the folder's path.
                root = str(tmp_path.resolve())
                assert client.instructions is not None
                assert root not in client.instructions
                assert "the server's workspace" in client.instructions
                listed = structured(await client.call_tool("tool_file_list", {"pattern": "*.csv"}))["outputs"]
                size = (tmp_path / "data" / "sales.csv").stat().st_size
                assert listed["result"] == {"files": [{"path": "data/sales.csv", "bytes": size}], "truncated": False}
                missing = await client.call_tool("tool_csv_reader", {"path": "nope.csv"})
                text = missing.content[0].text  # type: ignore[union-attr]
                assert missing.is_error and "no file 'nope.csv' in the server's workspace" in text
                assert root not in text and root not in json.dumps(missing.structured_content)
            with httpx2.Client(timeout=30) as http:
                for method, params in (
                    ("network.execute", {"manifest": "name: x"}),
                    ("run.cancel", {"run_id": "x"}),
                ):
                    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
                    error = http.post(f"{url}/rpc", json=body, headers=JSON_HEADERS).json()["error"]
                    assert error["code"] == -32003 and "read-only" in error["message"]
        watch.assert_responsive()
    assert not (tmp_path / "written.txt").exists()


async def test_read_only_stdio_refuses_writes(tmp_path: Path) -> None:
    from test_stdio import stdio_params

    async with Client(stdio_params(tmp_path, "--read-only"), mode="legacy") as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert "tool_file_write" not in names and "blueprint_run" not in names
        assert (await client.call_tool("tool_file_write", WRITE_ARGS)).is_error
        assert (await client.call_tool("blueprint_run", {"blueprint": ADHOC})).is_error
    assert not (tmp_path / "written.txt").exists()


# -- stdio: every malformed request with an id is answered, memory stays bounded ------------


def malformed_lines() -> list[dict[str, Any]]:
    """The hostile /mcp and /rpc bodies of test_hostile that decode to an object with an id, ids made unique."""
    lines: list[dict[str, Any]] = []
    for case in cases():
        try:
            message = json.loads(case.body)
        except (ValueError, RecursionError):
            continue
        if isinstance(message, dict) and "id" in message:
            lines.append({**message, "id": 1000 + len(lines)})
    return lines


def stdio_server(tmp_path: Path, stderr: Any) -> subprocess.Popen[bytes]:
    blueprints = write_blueprints(tmp_path / "blueprints")
    return subprocess.Popen(
        [sys.executable, "-m", "ice_mcp", "serve", *TOOLS, "--blueprints", str(blueprints)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=stderr,
        env=subprocess_env(tmp_path),
        cwd=ROOT,
    )


def test_stdio_answers_every_malformed_request(tmp_path: Path) -> None:
    lines = malformed_lines()
    assert len(lines) >= 400
    answers: dict[Any, dict[str, Any]] = {}
    arrived = threading.Condition()
    with open(tmp_path / "stderr.log", "wb") as stderr:
        proc = stdio_server(tmp_path, stderr)
        assert proc.stdin is not None and proc.stdout is not None
        stdout = proc.stdout

        def read() -> None:
            for raw in stdout:
                message = json.loads(raw)
                with arrived:
                    answers[message.get("id")] = message
                    arrived.notify_all()

        reader = threading.Thread(target=read, daemon=True)
        reader.start()

        def send(messages: list[Any], ids: set[Any], timeout: float = 120) -> None:
            assert proc.stdin is not None
            for message in messages:
                proc.stdin.write((message if isinstance(message, str) else json.dumps(message)).encode() + b"\n")
            proc.stdin.flush()
            with arrived:
                assert arrived.wait_for(lambda: ids <= answers.keys(), timeout=timeout), sorted(
                    ids - answers.keys(), key=str
                )[:20]

        try:
            send([INITIALIZE, {"jsonrpc": "2.0", "method": "notifications/initialized"}], {1})
            send(lines, {m["id"] for m in lines})
            first_round = rss_mb(proc.pid)
            again = [{**m, "id": m["id"] + 100_000} for m in lines]
            send(again, {m["id"] for m in again})
            grown = rss_mb(proc.pid) - first_round
            # Lines that are not JSON at all get a parse error with id null, and the server lives on.
            send(["{", "\xff\xfe", '{"jsonrpc": "2.0", "id": "\\ud800", "method": "ping"}'], {None})
            send([{"jsonrpc": "2.0", "id": "alive", "method": "ping"}], {"alive"})
        finally:
            proc.stdin.close()
            proc.wait(timeout=30)
    errors = [answers[m["id"]] for m in lines if "error" in answers[m["id"]]]
    assert all(isinstance(e["error"]["code"], int) and e["error"]["message"] for e in errors)
    assert answers[None]["error"]["code"] in (-32700, -32600)
    print(f"stdio: {len(lines)} malformed requests answered twice; RSS +{grown:.1f} MB in round two")
    assert grown < 25, f"RSS grew {grown:.1f} MB over {len(lines)} more malformed lines"
    assert "Traceback" not in (tmp_path / "stderr.log").read_text()

