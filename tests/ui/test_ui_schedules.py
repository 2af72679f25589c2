"""Schedules in the run view: the JSON API on an in-process server (next fires, firings with their runs,
stretches of paused slots, no store, the token), and the page in a real headless Chromium against a real
server: the Schedules view, a firing linking to its run, and the run linking back to its schedule."""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx2
from mcp_helpers import http_server, make_options

from ice_mcp import Orchestrator, Registry, Settings

REPORT = {"name": "report", "inputs": {"type": "object", "properties": {"topic": {"type": "string"}}},
          "nodes": [{"id": "r", "type": "tool", "tool_name": "render_template",
                     "tool_args": {"template": "{{ inputs.topic }} at {{ trigger.slot }}"}}],
          "outputs": {"text": "{{ r.text }}"}}
HOURLY = {"name": "hourly_job", "nodes": [{"id": "h", "type": "tool", "tool_name": "render_template",
                                           "tool_args": {"template": "tick"}}]}
WEEKLY_SPEC = {"cron": "0 9 * * MON", "timezone": "Europe/Paris"}
PARIS_NINE = re.compile(r"^\d{4}-\d\d-\d\dT09:00:00\+0[12]:00$")  # 09:00 in Paris, winter or summer time


class Clock:
    def __init__(self, start: float) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now


async def test_the_api_lists_schedules_with_next_fires_and_shows_firings_linked_to_runs(orc: Orchestrator) -> None:
    orc.register_blueprint(REPORT)
    orc.register_blueprint(HOURLY)
    orc.schedules.create(workflow="report", inputs={"topic": "sales"}, spec=WEEKLY_SPEC, schedule_id="weekly")
    orc.schedules.create(workflow="hourly_job", inputs={}, spec={"every_seconds": 3600}, schedule_id="hourly")
    orc.schedules.pause("hourly", note="<b>holidays</b>")
    fired = await orc.schedules.trigger("weekly")
    record = await orc.watch(fired["run_id"]).wait(10)  # type: ignore[union-attr]
    assert record.status == "succeeded" and record.outputs == {"text": f"sales at {fired['slot']}"}

    async with http_server(orc, make_options()) as url, httpx2.AsyncClient(timeout=10) as http:
        listed = (await http.get(f"{url}/ui/api/schedules")).json()
        assert "scheduler_alive_at" in listed and "note" not in listed
        schedules = {s["id"]: s for s in listed["schedules"]}
        assert set(schedules) == {"weekly", "hourly"}
        weekly, hourly = schedules["weekly"], schedules["hourly"]
        assert weekly["workflow"] == "report" and weekly["spec"]["cron"] == "0 9 * * MON"
        assert weekly["spec"]["timezone"] == "Europe/Paris"
        assert "Monday" in weekly["description"] and "Europe/Paris" in weekly["description"]
        assert len(weekly["next_fires"]) == 3
        assert all(PARIS_NINE.match(f["local"]) for f in weekly["next_fires"]), weekly["next_fires"]
        assert all(datetime.fromisoformat(f["local"]).weekday() == 0 for f in weekly["next_fires"])
        assert weekly["counts"] == {"started": 1} and weekly["state"] == {"paused": False, "note": None}
        assert weekly["last_firing"]["run_id"] == fired["run_id"] and weekly["last_firing"]["outcome"] == "started"
        assert hourly["state"] == {"paused": True, "note": "<b>holidays</b>"} and hourly["last_firing"] is None
        assert hourly["description"] == "every hour" and hourly["inputs_text"] == "{}"

        only = (await http.get(f"{url}/ui/api/schedules", params={"workflow": "hourly_job"})).json()
        assert [s["id"] for s in only["schedules"]] == ["hourly"]

        one = (await http.get(f"{url}/ui/api/schedules/weekly")).json()
        assert len(one["next_fires"]) == 10 and all(PARIS_NINE.match(f["local"]) for f in one["next_fires"])
        assert [(f["slot"], f["outcome"], f["run_id"], f["run_status"], f["count"]) for f in one["firings"]] == [
            (fired["slot"], "started", fired["run_id"], "succeeded", 1)]
        assert '"topic": "sales"' in one["inputs_text"] and one["policy"]["overlap"] == "skip"

        # A run a schedule started says so, in the list and in its detail.
        assert record.trigger is not None
        trigger = {"kind": "schedule", "schedule_id": "weekly", "slot": fired["slot"],
                   "previous_slot": record.trigger["previous_slot"], "manual": True}
        runs = (await http.get(f"{url}/ui/api/runs")).json()["runs"]
        assert [(r["run_id"], r["trigger"]) for r in runs] == [(fired["run_id"], trigger)]
        detail = (await http.get(f"{url}/ui/api/runs/{fired['run_id']}")).json()["run"]
        assert detail["trigger"] == trigger

        missing = await http.get(f"{url}/ui/api/schedules/weekli")
        assert missing.status_code == 404
        error = missing.json()["error"]
        assert error["code"] == "unknown_schedule" and "'weekly'" in error["message"]  # the nearest id
        bad = await http.get(f"{url}/ui/api/schedules/weekly", params={"limit": "lots"})
        assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_limit"


async def test_slots_passed_while_paused_are_one_firing_with_their_count(orc: Orchestrator) -> None:
    clock = Clock(datetime(2026, 3, 2, 10, 30, tzinfo=UTC).timestamp())
    orc.schedules.clock = clock
    orc.register_blueprint(HOURLY)
    orc.schedules.create(workflow="hourly_job", inputs={}, spec={"every_seconds": 3600}, schedule_id="hourly")
    orc.schedules.pause("hourly", note="maintenance")
    clock.now += 5 * 3600 + 60
    orc.schedules.resume("hourly")
    async with http_server(orc, make_options()) as url, httpx2.AsyncClient(timeout=10) as http:
        one = (await http.get(f"{url}/ui/api/schedules/hourly", params={"limit": 5})).json()
    assert one["state"] == {"paused": False, "note": None} and one["counts"] == {"paused": 5}
    [stretch] = one["firings"]
    assert stretch["outcome"] == "paused" and stretch["count"] == 5 and stretch["run_id"] is None
    assert stretch["run_status"] is None
    assert datetime.fromisoformat(one["next_fires"][0]["at"]).timestamp() > clock.now


async def test_without_a_run_store_the_list_is_empty_and_says_why(tmp_path: Path) -> None:
    orc = Orchestrator(registry=Registry(), settings=Settings(data_dir=tmp_path / "data", workspace=tmp_path,
                                                              persist_runs=False))
    try:
        assert orc.store is None
        async with http_server(orc, make_options()) as url, httpx2.AsyncClient(timeout=10) as http:
            listed = (await http.get(f"{url}/ui/api/schedules")).json()
            assert listed["schedules"] == [] and listed["scheduler_alive_at"] is None
            assert "run store" in listed["note"]
            missing = await http.get(f"{url}/ui/api/schedules/nightly")
            assert missing.status_code == 404 and missing.json()["error"]["code"] == "unknown_schedule"
    finally:
        await orc.aclose()


async def test_the_schedules_api_asks_for_the_token_like_the_other_read_routes(orc: Orchestrator) -> None:
    orc.register_blueprint(HOURLY)
    orc.schedules.create(workflow="hourly_job", inputs={}, spec={"every_seconds": 60}, schedule_id="minutely")
    async with http_server(orc, make_options(), token="t0ken") as url, httpx2.AsyncClient(timeout=10) as http:
        for path in ("/ui/api/schedules", "/ui/api/schedules/minutely"):
            assert (await http.get(f"{url}{path}")).status_code == 401
            assert (await http.get(f"{url}{path}", headers={"Authorization": "Bearer nope"})).status_code == 401
            allowed = await http.get(f"{url}{path}", headers={"Authorization": "Bearer t0ken"})
            assert allowed.status_code == 200 and "minutely" in allowed.text
        foreign = await http.get(f"{url}/ui/api/schedules", headers={"Authorization": "Bearer t0ken",
                                                                     "Host": "evil.example"})
        assert foreign.status_code in (400, 403, 421)  # the same Host allow-list as every route


# -- the page in Chromium ---------------------------------------------------------------------------


def rpc(url: str, method: str, **params: Any) -> Any:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    reply = httpx2.post(f"{url}/rpc", json=body, timeout=30).json()
    assert "error" not in reply, reply
    return reply["result"]


async def test_the_schedules_view_shows_next_fires_and_firings_linked_both_ways(
        page: Any, server: str, tmp_path: Path) -> None:
    rpc(server, "schedule.create", workflow="greeting", inputs={"name": "Ada"}, spec=WEEKLY_SPEC, id="ui-weekly")
    rpc(server, "schedule.create", workflow="inner", inputs={}, spec={"every_seconds": 7200}, id="ui-quiet")
    rpc(server, "schedule.pause", id="ui-quiet", note="<img id='pwn' src=x>not now")
    fired = rpc(server, "schedule.trigger", id="ui-weekly")
    run_id, slot = fired["run_id"], fired["slot"]
    deadline = time.monotonic() + 20
    while rpc(server, "run.status", run_id=run_id)["status"] != "succeeded":
        assert time.monotonic() < deadline
        time.sleep(0.1)

    # The Schedules view, from the top bar.
    await page.goto(f"{server}/ui")
    await page.wait_for_selector(".runs-table")
    await page.click('header a[data-nav="schedules"]')
    row = page.locator('tr[data-schedule="ui-weekly"]')
    await row.wait_for()
    assert await page.get_attribute('a[data-nav="schedules"]', "class") == "active"
    text = await row.inner_text()
    assert "greeting" in text and "Monday" in text and "cron: 0 9 * * MON" in text and "Europe/Paris" in text
    assert "1 started" in text and "active" in text
    fires = await row.locator(".next-fires .fire-local").all_inner_texts()
    assert len(fires) == 3 and all(re.fullmatch(r"\d{4}-\d\d-\d\d 09:00:00 \+0[12]:00", f) for f in fires), fires
    quiet = page.locator('tr[data-schedule="ui-quiet"]')
    assert "paused" in await quiet.inner_text()
    assert await quiet.locator(".pause-note").inner_text() == "<img id='pwn' src=x>not now"  # text, not HTML
    assert await page.locator("#pwn").count() == 0
    assert (await page.inner_text("#scheduler-alive")).startswith("A server last ran the firing loop")
    await page.screenshot(path=str(tmp_path / "schedules.png"))

    # One schedule: its next fires and the firing, linking to its run.
    await row.click()
    await page.wait_for_selector("#schedule-title")
    assert await page.inner_text("#schedule-title") == "ui-weekly"
    assert "latest within 86400 s" in await page.inner_text("aside .facts-list")
    assert len(await page.locator("aside .next-fires li").all()) == 10
    firing = page.locator(f'#firings tr[data-slot="{slot}"]')
    assert "started" in await firing.inner_text()
    assert '"name": "Ada"' in await page.inner_text("aside pre")
    link = firing.locator("a.firing-run")
    assert await link.get_attribute("data-run") == run_id
    assert await firing.locator('[data-status="succeeded"]').count() == 1
    await page.screenshot(path=str(tmp_path / "schedule.png"))

    # The run shows the schedule and slot that started it, and links back.
    await link.click()
    await page.wait_for_selector('#run-status [data-status="succeeded"]')
    back = page.locator('.run-head a.trigger-link[data-schedule="ui-weekly"]')
    assert await back.inner_text() == f"schedule ui-weekly · slot {slot} (triggered)"
    await page.screenshot(path=str(tmp_path / "run.png"))
    await back.click()
    await page.wait_for_selector(f'#firings tr[data-slot="{slot}"]')

    # The runs list says it too.
    await page.goto(f"{server}/ui#/runs")
    listed = page.locator(f'tr[data-run="{run_id}"] a.trigger-link')
    await listed.wait_for()
    assert await listed.inner_text() == f"schedule ui-weekly · slot {slot} (triggered)"
    await page.screenshot(path=str(tmp_path / "runs.png"))
    await listed.click()
    await page.wait_for_selector("#schedule-title")
    assert page.url.endswith("#/schedules/ui-weekly")
    print(f"screenshots of the schedules view: {tmp_path}")


async def test_a_network_schedule_shows_its_network_and_links_to_the_network_run(
        page: Any, server: str, tmp_path: Path) -> None:
    rpc(server, "schedule.create", network="ui_pair", inputs={}, spec={"every_seconds": 86400}, id="ui-network")
    fired = rpc(server, "schedule.trigger", id="ui-network")
    network_id = fired["run_id"]
    assert network_id.startswith("net_")
    deadline = time.monotonic() + 20
    while (status := rpc(server, "run.status", run_id=network_id))["status"] != "succeeded":
        assert time.monotonic() < deadline, status
        time.sleep(0.1)
    assert set(status["workflows"]) == {"one", "two"}

    await page.goto(f"{server}/ui#/schedules")
    row = page.locator('tr[data-schedule="ui-network"]')
    await row.wait_for()
    assert "network ui_pair" in await row.inner_text()
    await row.click()
    firing = page.locator(f'#firings tr[data-slot="{fired["slot"]}"]')
    await firing.wait_for()
    assert await firing.locator("a.firing-run").get_attribute("data-run") == network_id
    await firing.locator("a.firing-run").click()
    await page.wait_for_selector('#run-status [data-status="succeeded"]')
    for workflow in ("one", "two"):  # the network's workflows drawn as its graph, with their end states
        await page.wait_for_selector(f'[data-node="{workflow}"][data-state="succeeded"]')
    await page.screenshot(path=str(tmp_path / "network-run.png"))
    print(f"screenshot of a network run: {tmp_path}")
