"""The run view in a real headless Chromium against a real server: live runs list and node states,
errors with their root cause, admin-only cancel, escaped output, the token, the catalogue."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import httpx2
import pytest
from conftest import server_env, ui_viewer, use_token
from live import healthz_watch, live_server
from mcp_helpers import ADMIN, http_client, structured

from ice_mcp.store.sqlite import RunStore

# Records every node's data-state changes in the page, so a test can tell states seen live from final ones.
WATCH_STATES = """() => {
  window.__seen = {};
  const note = (el) => { const id = el.dataset.node; (window.__seen[id] ||= []).push(el.dataset.state); };
  new MutationObserver((changes) => changes.forEach((c) => c.target.dataset && c.target.dataset.node && note(c.target)))
    .observe(document.body, { attributes: true, attributeFilter: ['data-state'], subtree: true });
}"""


async def call_workflow(url: str, name: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
    """A workflow started over MCP, as Claude Desktop starts one; the server answers within ~1 s."""
    async with http_client(url) as client:
        return structured(await client.call_tool(f"workflow_{name}", arguments or {}))


async def open_run(page: Any, url: str, run_id: str) -> None:
    await page.goto(f"{url}/ui#/runs/{run_id}")
    await page.wait_for_selector("#run-status .badge")


# A node's 0.8 s of `running` must be seen in the page (and the run listed within 2 s): not beside other tests' load.
@pytest.mark.alone
async def test_a_run_started_over_mcp_appears_and_its_nodes_change_state_live(
        page: Any, server: str, tmp_path: Path) -> None:
    await page.goto(f"{server}/ui")
    await page.wait_for_selector(".runs-table")
    started = time.monotonic()
    call = asyncio.create_task(call_workflow(server, "progress"))
    row = page.locator("tr[data-run]", has_text="progress").first
    await row.wait_for(timeout=5_000)
    appeared = time.monotonic() - started
    assert appeared < 2.0, f"the run took {appeared:.2f} s to appear in the list"  # ~0.5 s feed + MCP call set-up
    run_id = (await call)["run_id"]
    assert await row.get_attribute("data-run") == run_id

    await row.click()
    await page.wait_for_selector('[data-node="a"]')
    await page.evaluate(WATCH_STATES)
    await page.wait_for_selector('[data-node="b"][data-state="running"]', timeout=10_000)
    assert await page.get_attribute('[data-node="a"]', "data-state") == "succeeded"
    assert await page.get_attribute('[data-node="c"]', "data-state") == "pending"
    await page.screenshot(path=str(tmp_path / "run-in-progress.png"))
    await page.wait_for_selector('#run-status [data-status="succeeded"]', timeout=10_000)
    seen = await page.evaluate("window.__seen")
    assert seen["b"][-1] == "succeeded" and seen["c"] == ["running", "succeeded"], seen  # c started after we looked
    await page.wait_for_selector("pre.outputs")
    assert '"last": "c"' in await page.text_content("pre.outputs")
    await page.screenshot(path=str(tmp_path / "run-finished.png"))
    print(f"screenshots of a run in progress and finished: {tmp_path}")
    # The list saw the run end too, without a reload.
    await page.goto(f"{server}/ui#/runs")
    await page.wait_for_selector(f'tr[data-run="{run_id}"][data-status="succeeded"]')


async def test_clicking_a_failed_node_shows_its_error_and_root_cause(page: Any, server: str, tmp_path: Path) -> None:
    run = await call_workflow(server, "fails")
    assert run["status"] == "failed"
    await open_run(page, server, run["run_id"])
    await page.wait_for_selector('[data-node="each"][data-state="failed"]')
    assert await page.get_attribute('[data-node="after"]', "data-state") in ("pending", "skipped", "cancelled")
    # The run's own error names the path down to the failing node.
    assert "each > check" in await page.text_content(".run-error .root-cause")

    await page.click('[data-node="each"] .node-head')
    await page.wait_for_selector("#node-error")
    assert "disk on fire at item 2" in await page.text_content("#node-error .root-cause")
    # Open the loop: it shows the first failed item, whose node carries the error itself.
    await page.click('[data-node="each"] .toggle')
    await page.wait_for_selector('[data-node="each[2].check"][data-state="failed"]')
    assert await page.input_value('select[aria-label="iteration of each"]') == "2"
    await page.click('[data-node="each[2].check"] .node-head')
    await page.wait_for_selector('#node-title:text("each[2].check")')
    error = await page.text_content("#node-error")
    assert "disk_on_fire" in error and "disk on fire at item 2" in error
    assert '"item": 2' in await page.text_content("pre.inputs")  # the inputs as the node received them
    await page.screenshot(path=str(tmp_path / "run-failed.png"))
    print(f"screenshot of a failed run: {tmp_path / 'run-failed.png'}")
    # Another item succeeded: pick it in the loop's selector.
    await page.select_option('select[aria-label="iteration of each"]', "1")
    await page.wait_for_selector('[data-node="each[1].check"][data-state="succeeded"]')


async def test_every_kind_of_container_opens_to_show_its_inside(page: Any, server: str) -> None:
    run = await call_workflow(server, "containers")
    assert run["status"] == "succeeded"
    await open_run(page, server, run["run_id"])
    await page.wait_for_selector('[data-node="again"][data-state="succeeded"]')
    await page.click("text=Open all")
    for node in ("both[0].left", "both[1].right", "both[1].after_right", "call.hi", "again[2].step"):
        await page.wait_for_selector(f'[data-node="{node}"][data-state="succeeded"]')
    assert await page.input_value('select[aria-label="iteration of again"]') == "2"
    await page.click("text=Close all")
    assert await page.locator('[data-node="call.hi"]').count() == 0


async def test_cancel_needs_the_admin_token(page: Any, server: str) -> None:
    run = await call_workflow(server, "long")
    assert run["status"] == "running"
    await open_run(page, server, run["run_id"])
    await page.wait_for_selector('[data-node="wait"][data-state="running"]')
    assert await page.locator("#cancel-run").count() == 0  # no token: no button
    refused = httpx2.post(f"{server}/ui/api/runs/{run['run_id']}/cancel", json={}, timeout=10)
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "forbidden"

    await use_token(page, ADMIN)
    await page.click("#cancel-run")
    await page.wait_for_selector('#run-status [data-status="cancelled"]', timeout=10_000)
    await page.wait_for_selector('[data-node="wait"][data-state="cancelled"]')
    assert await page.locator("#cancel-run").count() == 0


async def test_node_output_with_html_is_shown_as_text(page: Any, server: str) -> None:
    run = await call_workflow(server, "html_out")
    await open_run(page, server, run["run_id"])
    await page.click('[data-node="render"] .node-head')
    await page.wait_for_selector("pre.node-output")
    shown = await page.text_content("pre.node-output")
    assert "<script>window.__pwned = 1</script><b id='bold'>bold</b>" in shown
    assert await page.locator("#bold").count() == 0
    assert await page.evaluate("window.__pwned") is None
    await page.click(".side-head button.link")
    assert "<script>" in await page.text_content("pre.outputs")


def test_a_foreign_origin_or_host_is_refused(server: str) -> None:
    run_id = httpx2.post(f"{server}/rpc", json={"jsonrpc": "2.0", "id": 1, "method": "workflow.run",
                                                "params": {"name": "long", "wait_seconds": 0}}).json()["result"]["run_id"]
    admin = {"Authorization": f"Bearer {ADMIN}"}
    with healthz_watch(server) as watch, httpx2.Client(timeout=10) as http:
        evil = {"Origin": "http://evil.example"}
        for method, path in [("GET", "/ui/api/runs"), ("GET", f"/ui/api/runs/{run_id}/events"),
                             ("GET", "/ui/api/session"), ("GET", "/ui"),
                             ("POST", f"/ui/api/runs/{run_id}/cancel")]:
            answer = http.request(method, f"{server}{path}", headers={**evil, **admin, "Content-Type": "application/json"},
                                  content=b"{}" if method == "POST" else None)
            assert answer.status_code == 403, (path, answer.status_code, answer.text)
        rebound = http.get(f"{server}/ui/api/runs", headers={"Host": "attacker.example"})
        assert rebound.status_code == 421
        # Held open meanwhile: a stream of the running run keeps going, the server keeps answering.
        with http.stream("GET", f"{server}/ui/api/runs/{run_id}/events") as stream:
            assert stream.status_code == 200
            first = next(stream.iter_lines())
            assert first.startswith("data: ")
            time.sleep(0.3)
    watch.assert_responsive()
    assert httpx2.post(f"{server}/ui/api/runs/{run_id}/cancel", headers=admin, json={}).json()["status"] == "cancelled"


async def test_the_catalogue_starts_a_run_from_its_input_form(page: Any, server: str) -> None:
    await page.goto(f"{server}/ui#/workflows")
    await page.wait_for_selector('[data-workflow="greeting"]')
    assert "Greets whoever the form names." in await page.text_content('[data-workflow="greeting"]')
    # The token first: saving it draws the view again, which would wipe a form already being filled in.
    await use_token(page, ADMIN)
    await page.wait_for_selector('#who[data-admin="yes"]')
    await page.click('[data-workflow="greeting"]')
    await page.wait_for_selector('.diagram [data-node="greet"]')
    await page.wait_for_selector("#start-run:not([disabled])")
    await page.fill("#input-name", "Ada")
    await page.fill("#input-times", "2")
    await page.check("#input-loud")
    await page.select_option("#input-style", label='"fancy"')
    await page.click("#start-run")
    await page.wait_for_selector('#run-status [data-status="succeeded"]', timeout=10_000)
    assert "HELLO ADA HELLO ADA (fancy)" in await page.text_content("pre.outputs")
    # Inputs the schema refuses come back as a readable error, not a run.
    await page.goto(f"{server}/ui#/workflows/greeting")
    await page.fill("#input-name", "Ada")
    await page.fill("#input-times", "9")
    await page.click("#start-run")
    await page.wait_for_selector(".error-box")
    assert "times" in await page.text_content(".error-box")


async def test_a_thousand_node_graph_is_laid_out_in_under_a_second(page: Any, server: str) -> None:
    await page.goto(f"{server}/ui#/workflows/big")
    await page.wait_for_selector('.diagram [data-node="n19_49"]')
    assert await page.locator(".diagram [data-node]").count() == 1000
    ms = await page.evaluate("() => { const t = performance.now(); window.__ice.dag.redraw(); return performance.now() - t; }")
    print(f"layout and drawing of 1,000 nodes: {ms:.0f} ms")
    assert ms < 1000


async def test_a_token_server_asks_once_and_sends_it_as_a_header(page: Any, workspace: Path, tmp_path: Path) -> None:
    token = "page-token-123"
    requests: list[tuple[str, str | None]] = []
    page.on("request", lambda r: requests.append((r.url, r.headers.get("authorization"))))
    with live_server(tmp_path, "--tools", "ui_tools", env=server_env(ICE_MCP_TOKEN=token)) as url:
        assert httpx2.get(f"{url}/ui/api/runs").status_code == 401
        await page.goto(f"{url}/ui")
        await page.wait_for_selector("#token-dialog[open]")
        await use_token(page, token)
        await page.wait_for_selector(".runs-table")
        await page.goto(f"{url}/ui#/workflows")  # a new view: the token is still there (session storage)
        await page.wait_for_selector('[data-workflow="slow"]')
    api_calls = [(u, auth) for u, auth in requests if "/ui/api/" in u]
    assert api_calls and all(auth == f"Bearer {token}" for _, auth in api_calls[-3:])
    assert not any(token in u for u, _ in requests)


async def test_the_ui_command_shows_a_servers_runs_read_only_unless_admin(
        page: Any, server: str, workspace: Path) -> None:
    failed = await call_workflow(server, "fails")
    store = RunStore(workspace / ".ice" / "runs.sqlite3")  # the data folder the module's server writes
    try:
        for _ in range(100):  # the server writes records in batches: its last one lands a moment later
            if (kept := store.get(failed["run_id"])) is not None and kept.status == "failed":
                break
            await asyncio.sleep(0.05)
        assert kept is not None and kept.status == "failed"
    finally:
        store.close()
    run_id = failed["run_id"]
    with ui_viewer(workspace, "--tools", "ui_tools", "--blueprints", str(workspace / "ui_blueprints")) as url:
        await page.goto(f"{url}/ui")
        await page.wait_for_selector(f'tr[data-run="{run_id}"][data-status="failed"]')
        await open_run(page, url, run_id)
        await page.wait_for_selector('[data-node="each"][data-state="failed"]')
        assert await page.locator("#retry-run").count() == 0
        assert "read-only" in await page.text_content("#who")
        await use_token(page, ADMIN)
        await page.click("#retry-run")
        await page.wait_for_selector(f'.run-head a[href="#/runs/{run_id}"]', timeout=10_000)
        await page.wait_for_selector('#run-status [data-status="failed"]', timeout=10_000)
        await page.wait_for_selector('[data-node="prepare"][data-state="succeeded"]')
        # Reused from the run it retries: no event in this run, its time from the record.
        assert (await page.text_content('[data-clock="prepare"]') or "").endswith(" s")
