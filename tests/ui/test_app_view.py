"""The run view as an MCP App: a small host page runs the Apps bridge in headless Chromium, the view follows a
live server's run through it (a human node answered, a run cancelled); the resource and the tool listing."""

from __future__ import annotations

import itertools
import json
from collections.abc import AsyncIterator, Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from conftest import server_env
from live import live_server
from mcp import Client
from mcp.client.extension import advertise
from mcp.server.apps import APP_MIME_TYPE, EXTENSION_ID
from mcp_helpers import http_client, make_options, make_orchestrator, structured

from blueprints import hold, write_blueprints
from ice_mcp.orchestrator import Orchestrator
from ice_mcp.server.protocol.app_view import RUN_VIEW_URI
from ice_mcp.server.protocol.server import build_server

HOST_PAGE = Path(__file__).with_name("app_host.html")
MAX_BYTES = 300 * 1024
IDLE_ANSWER_BYTES = 4096  # what run_status may answer the view while nothing changed
POLL_GAP_MS = 950  # the view asks at most once a second; a little slack for the timer's granularity
UI_KEYS = ("ui", "ui/resourceUri")
ASK = {"name": "ask", "description": "Prepares, asks a person, then finishes.",
       "nodes": [hold("prepare", 0.2),
                 {"id": "confirm", "type": "human", "prompt": "Ship it?", "dependencies": ["prepare"]},
                 hold("finish", 1.5, "confirm")],
       "outputs": {"said": "{{ confirm.answer.answer }}", "last": "{{ finish.label }}"}}
IDLE_POLL_SEEN = """() => window.toolCalls.some((c) => c.name === 'run_status' && c.arguments.seen >= 0
  && c.result && !c.result.structuredContent.events.length)"""
# Records every node's data-state changes in the view, so the test sees states change, not only final ones.
WATCH_STATES = """() => {
  window.__seen = {};
  const note = (el) => { const id = el.dataset.node; (window.__seen[id] ||= []).push(el.dataset.state); };
  document.querySelectorAll('[data-node]').forEach(note);
  new MutationObserver((changes) => changes.forEach((c) => c.target.dataset && c.target.dataset.node && note(c.target)))
    .observe(document.body, { attributes: true, attributeFilter: ['data-state'], subtree: true });
}"""


@pytest.fixture(scope="module")
def app_server(workspace: Path) -> Iterator[str]:
    folder = write_blueprints(workspace / "app_blueprints", [ASK])
    with live_server(workspace, "--blueprints", str(folder), "--tools", "ui_tools", env=server_env()) as url:
        yield url


def as_json(result: Any) -> dict[str, Any]:
    """A result as it travels in JSON-RPC (what a host relays to the view)."""
    dumped: dict[str, Any] = result.model_dump(by_alias=True, mode="json", exclude_none=True)
    return dumped


async def view_html(client: Client) -> str:
    content = (await client.read_resource(RUN_VIEW_URI)).contents[0]
    assert isinstance(content, types.TextResourceContents)
    return content.text


async def open_host(page: Any, client: Client) -> Any:
    """The host page with the view loaded and initialized; the view's tools/call go to `client`."""
    requests: list[str] = []
    page.on("request", lambda request: requests.append(request.url))
    page.requests_seen = requests
    console_errors: list[str] = []  # a CSP refusal in the view shows here
    page.on("console", lambda message: console_errors.append(message.text) if message.type == "error" else None)
    page.console_errors = console_errors

    async def call_tool(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        return as_json(await client.call_tool(name, arguments))

    await page.expose_function("mcpCallTool", call_tool)
    await page.set_content(HOST_PAGE.read_text(encoding="utf-8"))
    await page.evaluate("html => host.load(html)", await view_html(client))
    element = await page.query_selector("#view")
    return await element.content_frame()


async def start_in_view(page: Any, client: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """The host's part of a tool call with a view: the input, the call (the server answers within ~1 s), the result."""
    await page.evaluate("args => host.toolInput(args)", arguments)
    result = as_json(await client.call_tool(tool, arguments))
    await page.evaluate("result => host.toolResult(result)", result)
    return dict(result["structuredContent"])


async def status_calls(page: Any) -> list[dict[str, Any]]:
    calls: list[dict[str, Any]] = await page.evaluate("window.toolCalls")
    return [call for call in calls if call["name"] == "run_status"]


async def test_the_view_follows_a_run_answers_its_question_and_sees_it_finish(
        page: Any, app_server: str, tmp_path: Path) -> None:
    async with http_client(app_server) as client:
        await follow_answer_and_finish(page, client, tmp_path)


async def follow_answer_and_finish(page: Any, client: Client, tmp_path: Path) -> None:
    view = await open_host(page, client)
    run = await start_in_view(page, client, "workflow_ask", {})
    assert run["status"] in ("running", "input_required")

    await view.wait_for_selector('[data-node="prepare"]', timeout=15_000)
    await view.evaluate(WATCH_STATES)
    await view.wait_for_selector('[data-node="confirm"][data-state="waiting"]', timeout=15_000)
    assert await view.get_attribute('[data-node="finish"]', "data-state") == "pending"
    question = view.locator('.question[data-question="confirm"]')
    assert "Ship it?" in await question.text_content()
    await page.screenshot(path=str(tmp_path / "app-view-asking.png"))
    await page.wait_for_function(IDLE_POLL_SEEN, timeout=15_000)  # the view asked while nothing changed

    await question.locator('input[name="answer"]').fill("yes, ship it")
    await question.locator("button.answer").click()
    await view.wait_for_selector('#run-status [data-status="succeeded"]', timeout=20_000)
    await view.wait_for_selector('[data-node="finish"][data-state="succeeded"]')
    assert await view.locator(".question").count() == 0
    seen = await view.evaluate("window.__seen")
    assert seen["confirm"][0] == "waiting" and seen["confirm"][-1] == "succeeded", seen
    assert seen["finish"][0] == "pending" and seen["finish"][-1] == "succeeded", seen
    assert "yes, ship it" in await view.text_content("pre.outputs")
    assert await view.locator("#cancel-run").count() == 0

    # A node's details, asked for through the bridge too.
    await view.click('[data-node="finish"] .node-head')
    await view.wait_for_selector("#node-title")
    assert await view.text_content("#node-title") == "finish"
    assert '"label": "finish"' in await view.text_content("pre.node-output")
    await page.screenshot(path=str(tmp_path / "app-view-finished.png"))
    print(f"screenshots of the App asking and finished: {tmp_path}")

    calls = await page.evaluate("window.toolCalls")
    assert {call["name"] for call in calls} == {"run_status", "run_respond"}
    respond = next(call for call in calls if call["name"] == "run_respond")
    assert respond["arguments"]["node"] == "confirm" and respond["arguments"]["answer"] == {"answer": "yes, ship it"}
    polls = await status_calls(page)
    # The view's own pacing (a lower bound: a slow machine only spaces its calls further).
    gaps = [later["at"] - earlier["at"] for earlier, later in itertools.pairwise(polls)]
    assert min(gaps) >= POLL_GAP_MS, gaps
    idle = [call["bytes"] for call in polls if "seen" in call["arguments"]
            and not call["result"]["structuredContent"]["events"] and call["arguments"]["seen"] >= 0]
    assert idle and max(idle) <= IDLE_ANSWER_BYTES, idle
    # The run ended: the view stops asking (two poll slots later, nothing more).
    before = len(polls)
    await page.wait_for_timeout(2 * 1000 + 200)
    assert len(await status_calls(page)) == before
    assert (await page.evaluate("host.teardown()"))["result"] == {}
    assert page.requests_seen == []  # everything the view needed came through the bridge
    assert page.console_errors == []


async def test_the_view_cancels_a_run_and_says_when_a_run_is_unknown(page: Any, app_server: str) -> None:
    async with http_client(app_server) as client:
        await cancel_and_unknown(page, client)


async def cancel_and_unknown(page: Any, client: Client) -> None:
    view = await open_host(page, client)
    run = await start_in_view(page, client, "workflow_long", {})
    assert run["status"] == "running"
    await view.wait_for_selector('[data-node="wait"][data-state="running"]', timeout=15_000)
    await view.click("#cancel-run")
    await view.wait_for_selector('#run-status [data-status="cancelled"]', timeout=15_000)
    await view.wait_for_selector('[data-node="wait"][data-state="cancelled"]')
    assert await view.locator("#cancel-run").count() == 0
    assert structured(await client.call_tool("run_status", {"run_id": run["run_id"]}))["status"] == "cancelled"

    # Another caller's run answers as an unknown one: the view says so and draws nothing.
    await page.evaluate("host.toolResult({structuredContent: {run_id: 'no-such-run', status: 'running'}})")
    await view.wait_for_selector("#view-problem .error-box", timeout=15_000)
    assert "unknown run" in await view.text_content("#view-problem")
    assert await view.locator("[data-node]").count() == 0
    assert page.console_errors == []


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []
        self.tags: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.links += [value or "" for name, value in attrs if name in ("src", "href")]


async def test_the_view_resource_is_one_self_contained_document(app_server: str) -> None:
    async with http_client(app_server) as client:
        listed = {str(r.uri): r for r in (await client.list_resources()).resources}
        contents = (await client.read_resource(RUN_VIEW_URI)).contents
    assert listed[RUN_VIEW_URI].mime_type == APP_MIME_TYPE
    assert len(contents) == 1
    content = contents[0]
    assert isinstance(content, types.TextResourceContents) and content.mime_type == APP_MIME_TYPE
    assert len(content.text.encode()) <= MAX_BYTES
    parser = _Links()
    parser.feed(content.text)
    assert [link for link in parser.links if "http://" in link or "https://" in link] == []
    assert "link" not in parser.tags and "<script" in content.text and 'data-inline="' not in content.text
    # The /ui graph code itself is inside, not a copy of it.
    assert "export class DagView" in content.text


@pytest.fixture
async def orc(tmp_path: Path) -> AsyncIterator[Orchestrator]:
    orchestrator = make_orchestrator(tmp_path)
    orchestrator.registry.add_agent("helper", {"model": "local"}, "Answers questions.")
    yield orchestrator
    await orchestrator.aclose()


async def test_tools_declare_the_view_and_other_clients_see_the_same_list(orc: Orchestrator) -> None:
    server = build_server(orc, make_options())
    apps = [advertise(EXTENSION_ID, {"mimeTypes": [APP_MIME_TYPE]})]
    # Capabilities carry extensions from 2026-07-28 on (the 2025-11-25 schema has no such field); the 2025-era
    # client without Apps is the one whose list must not change.
    async with Client(server, mode="auto", extensions=apps) as with_apps, Client(server, mode="legacy") as plain:
        assert with_apps.protocol_version == "2026-07-28" and plain.protocol_version == "2025-11-25"
        assert (with_apps.server_capabilities.extensions or {})[EXTENSION_ID] == {"mimeTypes": [APP_MIME_TYPE]}
        tools = {tool.name: tool for tool in (await with_apps.list_tools()).tools}
        plain_tools = (await plain.list_tools()).tools
    for name in ("workflow_steps", "workflow_extract_rows", "agent_helper", "blueprint_run", "network_execute",
                 "workflow_start"):
        meta = tools[name].meta or {}
        assert meta["ui"] == {"resourceUri": RUN_VIEW_URI} and meta["ui/resourceUri"] == RUN_VIEW_URI, name
    for name in ("tool_echo", "run_status", "run_cancel", "blueprint_validate"):
        assert not set(UI_KEYS) & set(tools[name].meta or {}), name
    # One list for every client; without the two keys, each tool is what the catalogue made of it.
    assert [as_json(tool) for tool in plain_tools] == [as_json(tool) for tool in tools.values()]
    for tool in plain_tools:
        meta = {key: value for key, value in (tool.meta or {}).items() if key not in UI_KEYS}
        entry = server.ice_catalogue.resolve(tool.name)
        assert entry is not None
        assert as_json(tool.model_copy(update={"meta": meta})) == as_json(entry.tool), tool.name
    assert json.dumps(as_json(tools["workflow_steps"])).count(RUN_VIEW_URI) == 2
