"""`serve --http --auth oauth` against a real authorization server on loopback: discovery and challenges, every
bad token refused with nothing run, scopes decided before a call runs, the SDK's own OAuth client signing in
and stepping up, the authorization server away (503), and key rotation."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from authserver import BAD_TOKENS, AuthServer, serve_app
from mcp_helpers import http_client, make_options, structured
from oauth_client import HeadlessBrowser, mcp_client, oauth_provider

from ice_mcp import Orchestrator, Registry, Settings
from ice_mcp.server.auth.resource_server import OAuthConfig, TokenVerifier
from ice_mcp.server.web.app import create_http_app
from ice_mcp_dev.cluster import stateless_tool_call

RAN: list[str] = []  # what the `counted` tool saw: a refused call must leave it empty
FULL = ("ice:read", "ice:run")


async def counted(note: str = "") -> dict[str, Any]:
    """Notes each call, so a test can tell whether anything ran."""
    RAN.append(note)
    return {"note": note}


def orchestrator(tmp_path: Path) -> Orchestrator:
    registry = Registry()
    registry.add_tool(counted)
    orc = Orchestrator(registry=registry, settings=Settings(data_dir=tmp_path / "data", workspace=tmp_path))
    orc.register_blueprint({"name": "count", "inputs": {"type": "object", "properties": {"note": {"type": "string"}}},
                            "nodes": [{"id": "c", "type": "tool", "tool_name": "counted",
                                       "tool_args": {"note": "{{ inputs.note }}"}}]})
    return orc


@contextlib.asynccontextmanager
async def oauth_server(orc: Orchestrator, auth: AuthServer, *, wait_seconds: float = 10.0,
                       **config: Any) -> AsyncIterator[str]:
    """`orc` served with OAuth: tokens from `auth`, for this server's /mcp; yields the base URL."""

    def app(base: str) -> Any:
        options = make_options(wait_seconds=wait_seconds)
        options.oauth = OAuthConfig(resource=f"{base}/mcp", issuer=auth.issuer, **config)
        auth.resource = f"{base}/mcp"
        return create_http_app(orc, options, port=int(base.rsplit(":", 1)[1]))

    RAN.clear()
    async with serve_app(app, lifespan="on") as base:
        yield base


def call(name: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": arguments or {}}}


SESSION_HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json",
                   "mcp-protocol-version": "2025-06-18"}


async def post(base: str, body: Any, token: str | None = None, **headers: str) -> httpx2.Response:
    """A 2025 request (in a session when `mcp-session-id` is given)."""
    auth = {"authorization": f"Bearer {token}"} if token is not None else {}
    async with httpx2.AsyncClient(timeout=30) as http:
        return await http.post(f"{base}/mcp", json=body, headers={**SESSION_HEADERS, **auth, **headers})


async def tool(base: str, name: str, arguments: dict[str, Any] | None = None,
               token: str | None = None) -> httpx2.Response:
    """A stateless (2026) tools/call: it stands alone, no session."""
    body, headers = stateless_tool_call(name, arguments or {})
    auth = {"authorization": f"Bearer {token}"} if token is not None else {}
    async with httpx2.AsyncClient(timeout=30) as http:
        return await http.post(f"{base}/mcp", json=body, headers={**headers, **auth})


async def test_discovery_and_the_first_challenge(tmp_path: Path) -> None:
    async with AuthServer() as auth, oauth_server(orchestrator(tmp_path), auth) as base:
        async with httpx2.AsyncClient(timeout=10) as http:
            inserted = (await http.get(f"{base}/.well-known/oauth-protected-resource/mcp")).json()
            root = (await http.get(f"{base}/.well-known/oauth-protected-resource")).json()
        assert inserted == root
        assert inserted["resource"] == f"{base}/mcp" and inserted["authorization_servers"] == [auth.issuer]
        assert inserted["scopes_supported"] == ["ice:read", "ice:run", "ice:admin"]
        assert inserted["bearer_methods_supported"] == ["header"]
        answer = await tool(base, "workflow_count")
        assert answer.status_code == 401
        challenge = answer.headers["www-authenticate"]
        assert challenge.startswith("Bearer ") and "error=" not in challenge  # RFC 6750 §3: no credentials
        assert f'resource_metadata="{base}/.well-known/oauth-protected-resource/mcp"' in challenge
        assert 'scope="ice:read ice:run"' in challenge
    assert RAN == []


async def test_every_bad_token_is_refused_with_401_and_nothing_runs(tmp_path: Path) -> None:
    async with AuthServer() as auth, oauth_server(orchestrator(tmp_path), auth) as base:
        tokens = {kind: auth.bad_token(kind, scopes=FULL) for kind in BAD_TOKENS}
        tokens["garbage"] = "not-a-token"
        tokens["opaque, no introspection"] = uuid.uuid4().hex
        refused = {}
        for kind, token in tokens.items():
            answer = await tool(base, "workflow_count", {"note": kind}, token)
            refused[kind] = (answer.status_code, 'error="invalid_token"' in answer.headers.get("www-authenticate", ""))
        assert refused == {kind: (401, True) for kind in tokens}, refused
        good = await tool(base, "workflow_count", {"note": "good"}, auth.token(scopes=FULL))
        assert good.status_code == 200
    assert RAN == ["good"]  # the matrix ran nothing; a good token runs


async def test_scope_is_decided_before_the_call_and_lists_follow_it(tmp_path: Path) -> None:
    async with AuthServer() as auth, oauth_server(orchestrator(tmp_path), auth) as base:
        reader = auth.token(scopes=("ice:read",))
        answer = await tool(base, "workflow_count", {"note": "read-only"}, reader)
        assert answer.status_code == 403
        challenge = answer.headers["www-authenticate"]
        assert 'error="insufficient_scope"' in challenge and 'scope="ice:run ice:read"' in challenge
        assert (await tool(base, "run_list", None, reader)).status_code == 200  # reading needs ice:read only
        nothing = auth.token(scopes=("openid",))
        assert (await tool(base, "run_list", None, nothing)).status_code == 403
        runner = auth.token(scopes=("ice:run",))  # ice:run implies ice:read
        assert (await tool(base, "run_list", None, runner)).status_code == 200
        admin_only = await tool(base, "blueprint_delete", {"name": "count"}, runner)
        assert admin_only.status_code == 403 and 'scope="ice:admin ice:read"' in admin_only.headers["www-authenticate"]
        async with http_client(base, token=reader) as client:
            names = {tool.name for tool in (await client.list_tools()).tools}
        assert "run_list" in names and "workflow_count" not in names and "blueprint_register" not in names
    assert RAN == []


async def test_a_2025_session_checks_the_scope_of_every_request(tmp_path: Path) -> None:
    """Scopes are read per HTTP request, not from the token that opened the session."""
    async with AuthServer() as auth, oauth_server(orchestrator(tmp_path), auth) as base:
        full, reader = auth.token(scopes=FULL), auth.token(scopes=("ice:read",))
        init = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
        opened = await post(base, init, full)
        session = {"mcp-session-id": opened.headers["mcp-session-id"]}
        await post(base, {"jsonrpc": "2.0", "method": "notifications/initialized"}, full, **session)
        short = await post(base, call("workflow_count", {"note": "in-session"}), reader, **session)
        assert short.status_code == 403
        other = await post(base, call("run_list"), auth.token(sub="mallory", scopes=FULL), **session)
        assert other.status_code == 404  # another principal may not use this session (the SDK's binding)
        ok = await post(base, call("workflow_count", {"note": "in-session"}), full, **session)
        assert ok.status_code == 200
    assert RAN == ["in-session"]


async def test_the_sdk_client_signs_in_then_steps_up(tmp_path: Path) -> None:
    async with AuthServer() as auth, oauth_server(orchestrator(tmp_path), auth) as base:
        auth.grantable = {"ice:read"}  # the user consents to reading only
        browser = HeadlessBrowser()
        async with mcp_client(f"{base}/mcp", oauth_provider(f"{base}/mcp", browser=browser)) as client:
            listed = await client.call_tool("run_list", {})  # 401 -> metadata -> registration -> PKCE -> token
            assert not listed.is_error and structured(listed)["runs"] == []
            with pytest.raises(Exception):  # noqa: B017 the SDK gives up when step-up is refused again
                await client.call_tool("workflow_count", {"note": "reader"})
            assert RAN == []
            auth.grantable = {"ice:read", "ice:run"}  # now the user grants running too
            ran = await client.call_tool("workflow_count", {"note": "runner"})  # 403 -> step-up -> retried
            assert not ran.is_error and structured(ran)["status"] == "succeeded"
        assert len(browser.authorized) >= 2
        assert "ice:run" in browser.authorized[-1]["scope"].split()
    assert RAN == ["runner"]


async def test_an_unreachable_authorization_server_answers_503_not_401(tmp_path: Path) -> None:
    async with AuthServer() as auth, oauth_server(orchestrator(tmp_path), auth) as base:
        token = auth.token(scopes=FULL)
        auth.down = True  # no key set fetched yet: this server cannot check any token
        answer = await tool(base, "workflow_count", None, token)
        assert answer.status_code == 503 and int(answer.headers["retry-after"]) > 0
        auth.down = False
        for _ in range(50):  # the server tries the issuer again a second after the failed fetch
            if (answer := await tool(base, "workflow_count", {"note": "up"}, token)).status_code != 503:
                break
            await asyncio.sleep(0.1)
        assert answer.status_code == 200
    assert RAN == ["up"]


async def test_a_rotated_key_works_after_one_fetch_and_random_kids_fetch_at_most_every_30_s() -> None:
    async with AuthServer() as auth:
        resource = "http://127.0.0.1:1/mcp"
        clock = [1_000.0]
        verifier = TokenVerifier(OAuthConfig(resource=resource, issuer=auth.issuer), clock=lambda: clock[0])
        first = await verifier.verify(auth.token(sub="alice", scopes=FULL, audience=resource))
        assert first.id == f"oauth:{auth.issuer}#alice" and first.scopes == frozenset(FULL)
        assert auth.jwks_fetches == 1
        clock[0] += 31
        auth.rotate_key()
        rotated = await verifier.verify(auth.token(sub="alice", scopes=FULL, audience=resource))
        assert rotated.subject == "alice" and auth.jwks_fetches == 2  # one fetch for the new kid
        refused = 0
        for n in range(1_000):
            clock[0] += 0.01  # 1,000 requests over 10 s
            try:
                await verifier.verify(auth.forge(kid=f"random-{n}", drop=(), scopes=FULL, audience=resource))
            except Exception:
                refused += 1
        assert refused == 1_000 and auth.jwks_fetches <= 3  # at most one fetch per 30 s


GATE = {"name": "gate", "inputs": {"type": "object", "properties": {}},
        "nodes": [{"id": "ok", "type": "human", "approval": "Ship it?"},
                  {"id": "ship", "type": "tool", "tool_name": "counted", "dependencies": ["ok"],
                   "tool_args": {"note": "shipped"}}]}


def same_shape(text: str, *ids: str) -> str:
    """An answer with the run ids it names blanked, to compare one run's answer with a random id's."""
    for run_id in ids:
        text = text.replace(run_id, "<id>")
    return text


async def test_another_principal_sees_of_a_run_exactly_what_a_random_id_shows(tmp_path: Path) -> None:
    """Alice's waiting run, looked at by Bob on every path: each answer equals the answer for a random id."""
    from tasks_client import TasksClient, task_request

    orc = orchestrator(tmp_path)
    orc.register_blueprint(GATE)
    orc.settings.caller_budget_usd = 5.0
    async with AuthServer() as auth, oauth_server(orc, auth, wait_seconds=0.3) as base:
        alice, bob = auth.token(sub="alice", scopes=FULL), auth.token(sub="bob", scopes=FULL)
        started = (await tool(base, "workflow_gate", {}, alice)).json()["result"]
        alices = orc.caller_spend(f"oauth:{auth.issuer}#alice")
        assert alices is not None and orc.get_run(started["structuredContent"]["run_id"]) is not None
        alice_spent = alices.cost_usd
        mine, random_id = started["structuredContent"]["run_id"], uuid.uuid4().hex
        assert started["structuredContent"]["status"] in ("running", "input_required")

        async def as_bob(name: str, **arguments: Any) -> tuple[str, str]:
            """Bob's answer for Alice's run and for a random id, ids blanked."""
            answers = []
            for run_id in (mine, random_id):
                reply = await tool(base, name, {**arguments, "run_id": run_id}, bob)
                answers.append(same_shape(f"{reply.status_code} {reply.text}", run_id))
            return answers[0], answers[1]

        for name, arguments in (("run_status", {}), ("run_result", {"wait_seconds": 0}), ("run_cancel", {}),
                                ("run_retry", {}), ("run_respond", {"node": "ok", "answer": {"approved": True}})):
            on_mine, on_random = await as_bob(name, **arguments)
            assert on_mine == on_random, (name, on_mine, on_random)
            assert "unknown" in on_mine or "isError" in on_mine or "error" in on_mine, on_mine

        listed = (await tool(base, "run_list", None, bob)).json()["result"]["structuredContent"]["runs"]
        assert listed == []
        everyone = (await tool(base, "run_list", {"all_principals": True}, bob)).json()["result"]
        assert everyone["isError"] and "ice:admin" in everyone["content"][0]["text"]
        admin = auth.token(sub="root", scopes=("ice:admin",))
        seen = (await tool(base, "run_list", {"all_principals": True}, admin)).json()["result"]["structuredContent"]
        assert [run["run_id"] for run in seen["runs"]] == [mine]
        assert (await tool(base, "run_list", None, admin)).json()["result"]["structuredContent"]["runs"] == []

        async with http_client(base, token=bob, extensions=[TasksClient()]) as client:
            reads, tasks = [], []
            for run_id in (mine, random_id):
                try:
                    await client.read_resource(f"ice://runs/{run_id}")
                    reads.append("read")
                except Exception as exc:
                    reads.append(same_shape(f"{type(exc).__name__}: {exc}", run_id))
                try:
                    tasks.append(str(await task_request(client.session, "tasks/get", taskId=run_id)))
                except Exception as exc:
                    tasks.append(same_shape(f"{type(exc).__name__}: {exc}", run_id))
            assert reads[0] == reads[1] and reads[0] != "read"
            assert tasks[0] == tasks[1]
            runs = await client.list_resources()
            assert not any(mine in str(resource.uri) for resource in runs.resources)

        async with httpx2.AsyncClient(timeout=10, headers={"authorization": f"Bearer {bob}"}) as http:
            pages = []
            for run_id in (mine, random_id):
                detail = await http.get(f"{base}/ui/api/runs/{run_id}")
                events = await http.get(f"{base}/ui/api/runs/{run_id}/events")
                pages.append(same_shape(f"{detail.status_code} {detail.text} | {events.status_code} {events.text}",
                                        run_id))
            assert pages[0] == pages[1] and pages[0].startswith("404")
            assert (await http.get(f"{base}/ui/api/runs")).json()["runs"] == []
        async with httpx2.AsyncClient(timeout=10, headers={"authorization": f"Bearer {alice}"}) as http:
            assert (await http.get(f"{base}/ui/api/runs/{mine}")).status_code == 200
            assert [r["run_id"] for r in (await http.get(f"{base}/ui/api/runs")).json()["runs"]] == [mine]

        answered = (await tool(base, "run_respond", {"run_id": mine, "node": "ok", "answer": {"approved": True}},
                               alice)).json()["result"]
        assert not answered.get("isError"), answered
        done = (await tool(base, "run_result", {"run_id": mine, "wait_seconds": 10}, alice)).json()["result"]
        assert done["structuredContent"]["status"] == "succeeded"
        assert orc.caller_spend(f"oauth:{auth.issuer}#bob").cost_usd == 0.0  # type: ignore[union-attr]
        assert orc.caller_spend(f"oauth:{auth.issuer}#alice").cost_usd == alice_spent  # type: ignore[union-attr]
        assert orc.get_run(mine).principal == f"oauth:{auth.issuer}#alice"  # type: ignore[union-attr]
    assert RAN == ["shipped"]  # Bob's respond, cancel and retry did nothing


async def test_the_run_view_signs_in_with_a_one_time_link_and_shows_only_ones_own_runs(tmp_path: Path) -> None:
    """`ui_link` (OAuth): a one-time ticket the page trades for an HttpOnly, SameSite=Strict cookie; the runs
    list and a run's page then show Alice's runs only; the link does not work twice; no token is in a URL."""
    from playwright.async_api import async_playwright

    chromium = Path("/usr/bin/chromium")
    if not chromium.exists():  # scripts/setup_ui.sh installs it (make test runs it)
        import subprocess
        subprocess.run(["bash", str(Path(__file__).resolve().parents[2] / "scripts" / "setup_ui.sh")], check=True)
    async with AuthServer() as auth, oauth_server(orchestrator(tmp_path), auth) as base:
        alice, bob = auth.token(sub="alice", scopes=FULL), auth.token(sub="bob", scopes=FULL)
        mine = (await tool(base, "workflow_count", {"note": "alice"}, alice)).json()["result"]["structuredContent"]
        theirs = (await tool(base, "workflow_count", {"note": "bob"}, bob)).json()["result"]["structuredContent"]
        reader = auth.token(sub="alice", scopes=("ice:read",))
        link = (await tool(base, "ui_link", {}, reader)).json()["result"]["structuredContent"]
        assert link["url"].startswith(f"{base}/ui/#ticket=") and link["expires_in_seconds"] == 60
        async with async_playwright() as playwright:
            browser = await playwright.chromium.launch(executable_path=str(chromium), args=["--no-sandbox"])
            try:
                context = await browser.new_context()
                page = await context.new_page()
                errors: list[str] = []
                page.on("pageerror", lambda exc: errors.append(str(exc)))
                await page.goto(link["url"])
                await page.wait_for_selector(f'tr[data-run="{mine["run_id"]}"]')
                assert "ticket" not in page.url
                assert await page.locator(f'tr[data-run="{theirs["run_id"]}"]').count() == 0
                [cookie] = await context.cookies()
                assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and cookie["path"] == "/ui"
                await page.goto(f"{base}/ui/#/runs/{mine['run_id']}")
                await page.wait_for_selector("text=count")
                assert await page.locator("#cancel-run").count() == 0  # a read-only sign-in: no actions
                other = await (await browser.new_context()).new_page()
                await other.goto(link["url"])  # the same link again: used up
                await other.wait_for_selector("#token-dialog[open]")
                assert "expired or was used" in await other.inner_text("#token-why")
                assert not errors, errors
            finally:
                await browser.close()


async def test_the_command_line_serves_oauth_from_the_environment(tmp_path: Path) -> None:
    """`ice-mcp serve --http --auth oauth` as a real process: configuration from the environment, discovery,
    a signed-in call, and a clear refusal to start when the issuer is missing."""
    import os
    import subprocess
    import sys

    from mcp_helpers import free_port, stop_process

    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root), "ICE_MCP_DATA_DIR": str(tmp_path / "data"),
           "ICE_MCP_WORKSPACE": str(tmp_path)}
    missing = subprocess.run([sys.executable, "-m", "ice_mcp", "serve", "--http", "--auth", "oauth", "--port", "0"],
                             env={**env, "ICE_MCP_RESOURCE": "http://127.0.0.1:1/mcp"}, capture_output=True,
                             text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert missing.returncode == 1 and "ICE_MCP_ISSUER" in missing.stderr and "Traceback" not in missing.stderr
    async with AuthServer() as auth:
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        auth.resource = f"{base}/mcp"
        proc = subprocess.Popen([sys.executable, "-m", "ice_mcp", "serve", "--http", "--port", str(port)],
                                env={**env, "ICE_MCP_AUTH": "oauth", "ICE_MCP_RESOURCE": f"{base}/mcp",
                                     "ICE_MCP_ISSUER": auth.issuer}, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
        try:
            async with httpx2.AsyncClient(timeout=5) as http:
                for _ in range(300):
                    with contextlib.suppress(httpx2.HTTPError):
                        if (await http.get(f"{base}/healthz")).status_code == 200:
                            break
                    assert proc.poll() is None, "the server exited"
                    await asyncio.sleep(0.1)
                document = (await http.get(f"{base}/.well-known/oauth-protected-resource")).json()
                assert document["resource"] == f"{base}/mcp" and document["authorization_servers"] == [auth.issuer]
                assert (await tool(base, "run_list")).status_code == 401
            answer = await tool(base, "run_list", None, auth.token(sub="carol", scopes=FULL))
            assert answer.status_code == 200 and answer.json()["result"]["structuredContent"]["runs"] == []
        finally:
            stop_process(proc)


@pytest.mark.filterwarnings("ignore:resources/subscribe is removed")  # the 2025 way, on purpose
async def test_a_subscription_to_another_principals_run_stays_silent(tmp_path: Path) -> None:
    orc = orchestrator(tmp_path)
    orc.register_blueprint(GATE)
    async with AuthServer() as auth, oauth_server(orc, auth, wait_seconds=0.3) as base:
        alice, bob = auth.token(sub="alice", scopes=FULL), auth.token(sub="bob", scopes=FULL)
        heard: dict[str, list[Any]] = {"alice": [], "bob": []}

        def handler(who: str) -> Any:
            async def on_message(message: Any) -> None:
                heard[who].append(message)
            return on_message

        async with http_client(base, token=alice, mode="legacy", message_handler=handler("alice")) as mine, \
                http_client(base, token=bob, mode="legacy", message_handler=handler("bob")) as theirs:
            waiting = structured(await mine.call_tool("workflow_gate", {}))
            uri = f"ice://runs/{waiting['run_id']}"
            await mine.subscribe_resource(uri)
            await theirs.subscribe_resource(uri)  # accepted, as for any id
            await mine.call_tool("run_respond", {"run_id": waiting["run_id"], "node": "ok",
                                                 "answer": {"approved": True}})
            for _ in range(200):
                if any(getattr(getattr(m, "params", None), "uri", None) == uri for m in heard["alice"]):
                    break
                await asyncio.sleep(0.02)
            await asyncio.sleep(0.3)
        assert any(getattr(getattr(m, "params", None), "uri", None) == uri for m in heard["alice"])
        assert not any(uri in str(m) for m in heard["bob"])
