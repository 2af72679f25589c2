"""The run view says what it can do and why: without an admin token it tells how to enable Cancel and Retry,
the Token button is there only when the server has a token, "viewer" is explained, running nodes show their
time ticking, and the runs list's short ids open a run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx2
from conftest import server_env, use_token
from live import live_server
from mcp_helpers import ADMIN, http_client, structured
from test_run_view import call_workflow, open_run

from blueprints import write_blueprints


async def cancel(url: str, run_id: str) -> None:
    async with http_client(url) as client:
        await client.call_tool("run_cancel", {"run_id": run_id})


async def test_without_an_admin_token_the_page_says_how_to_enable_cancel_and_retry(page: Any, tmp_path: Path) -> None:
    env = server_env(ICE_MCP_ADMIN_TOKEN="")  # the test servers have one: not this one
    with live_server(tmp_path, "--blueprints", str(write_blueprints(tmp_path / "ui_blueprints")),
                     "--tools", "ui_tools", env=env) as url:
        run = await call_workflow(url, "long")
        try:
            await open_run(page, url, run["run_id"])
            await page.wait_for_selector('[data-node="wait"][data-state="running"]')
            assert await page.locator("#cancel-run").count() == 0
            note = await page.text_content("#controls-note")
            assert "no admin token" in note and "ICE_MCP_ADMIN_TOKEN" in note
            assert await page.locator("#token-button").is_hidden()  # no token on this server: nothing to type
            who = page.locator("#who")
            assert await who.text_content() == "viewer"
            explained = await who.get_attribute("title")
            assert explained.startswith("viewer: you see every run and may start workflows.")
            assert "ICE_MCP_ADMIN_TOKEN" in explained
        finally:
            await cancel(url, run["run_id"])


async def test_with_an_admin_token_the_token_button_leads_to_cancel(page: Any, server: str) -> None:
    run = await call_workflow(server, "long")
    try:
        await open_run(page, server, run["run_id"])
        assert await page.locator("#token-button").is_visible()
        note = await page.text_content("#controls-note")
        assert note == "Cancel and Retry need the admin token: type it into Token (top right)."
        await use_token(page, ADMIN)
        await page.wait_for_selector("#cancel-run")
        assert await page.locator("#controls-note").count() == 0
        assert (await page.get_attribute("#who", "title") or "").startswith("admin:")
    finally:
        await cancel(server, run["run_id"])


async def test_a_running_node_shows_its_time_ticking_and_a_finished_one_how_long_it_took(
        page: Any, server: str) -> None:
    run = await call_workflow(server, "long")
    try:
        await open_run(page, server, run["run_id"])
        clock = page.locator('[data-clock="wait"]')
        await page.wait_for_selector('[data-clock="wait"].ticking')
        first = await clock.text_content()
        assert first and first.endswith(" s")
        # The clock moves on by itself (no event comes while the node runs): wait for another reading.
        await page.wait_for_function(
            "(first) => document.querySelector('[data-clock=\"wait\"]').textContent !== first", arg=first)
    finally:
        await cancel(server, run["run_id"])
    done = await call_workflow(server, "progress")
    async with http_client(server) as client:
        while done["status"] == "running":
            done = structured(await client.call_tool("run_result", {"run_id": done["run_id"], "wait_seconds": 10}))
    await open_run(page, server, done["run_id"])
    # The record's states and times are drawn with the graph, before the events come: once `c` shows succeeded
    # (from the record), `a` already shows how long it took (seen empty in CI when only the states came first).
    await page.wait_for_selector('[data-node="c"][data-state="succeeded"]')
    took = page.locator('[data-clock="a"]')
    assert (await took.text_content() or "").endswith(" s")
    assert "ticking" not in (await took.get_attribute("class") or "")


async def test_the_lists_short_id_opens_the_run(page: Any, server: str) -> None:
    run = await call_workflow(server, "html_out")
    short = run["run_id"][:12]  # what the runs list shows
    await page.goto(f"{server}/ui#/runs/{short}")
    await page.wait_for_selector("#run-status .badge")
    assert await page.text_content('code[title="run id"]') == run["run_id"]
    assert page.url.endswith(f"#/runs/{run['run_id']}")  # the address names the whole id from then on
    api = httpx2.get(f"{server}/ui/api/runs/{short}", timeout=10)
    assert api.status_code == 200 and api.json()["run"]["run_id"] == run["run_id"]
