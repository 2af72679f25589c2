"""Per-workflow limits held in the run store at admission: two orchestrators on one data folder share them,
schedules record a rate_limited firing, webhooks answer 429 with Retry-After, and a finished run frees its slot."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp_helpers import http_client, http_server, make_options, structured

from ice_mcp import Orchestrator, Registry, Settings
from ice_mcp.errors import IceError, RateLimited
from ice_mcp.schedules.firing import FiringLoop

GATE = asyncio.Event()


@pytest.fixture(autouse=True)
def fresh_gate() -> None:
    """A gate of this test's event loop (an Event waited on in one loop refuses waiters of another)."""
    global GATE
    GATE = asyncio.Event()


async def held() -> dict[str, Any]:
    """Holds its run until the test opens the gate."""
    await GATE.wait()
    return {"done": True}


def limited(**limits: Any) -> dict[str, Any]:
    return {"name": "limited", "limits": limits,
            "nodes": [{"id": "h", "type": "tool", "tool_name": "held"}]}


def orchestrators(tmp_path: Path, blueprint: dict[str, Any], count: int = 2, tool: Any = held,
                  **settings: Any) -> list[Orchestrator]:
    """`count` orchestrators on one data folder (processes on one store), `blueprint` and `tool` registered."""
    made = []
    for _ in range(count):
        registry = Registry()
        registry.add_tool(tool)
        orc = Orchestrator(registry=registry, settings=Settings(data_dir=tmp_path / "data", workspace=tmp_path,
                                                                **settings))
        orc.register_blueprint(blueprint)
        made.append(orc)
    return made


async def test_runs_per_minute_hold_across_processes_on_one_store(tmp_path: Path) -> None:
    GATE.set()
    here, there = orchestrators(tmp_path, limited(runs_per_minute=2))
    try:
        admitted, refused = [], []
        for n in range(6):
            try:
                admitted.append(await (here if n % 2 else there).start("limited", {}))
            except RateLimited as exc:
                refused.append(exc)
        assert len(admitted) == 2 and len(refused) == 4
        assert all(0 < exc.retry_after <= 60 for exc in refused)
        assert refused[0].code == "rate_limited" and "2 a minute" in refused[0].message
    finally:
        await here.aclose()
        await there.aclose()


async def test_max_concurrent_runs_frees_its_slot_when_the_run_ends(tmp_path: Path) -> None:
    GATE.clear()
    here, there = orchestrators(tmp_path, limited(max_concurrent_runs=1))
    try:
        first = await here.start("limited", {})
        with pytest.raises(RateLimited):
            await there.start("limited", {})
        with pytest.raises(RateLimited):
            await here.start("limited", {})
        GATE.set()
        assert (await first.wait(10)).status == "succeeded"
        assert here.store is not None and here.store.flush()
        GATE.clear()
        again = await there.retry(first.run_id)  # a retry is a run too
        with pytest.raises(RateLimited):
            await here.retry(first.run_id)
        GATE.set()
        assert (await again.wait(10)).status == "succeeded"
        assert there.store is not None and there.store.flush()
        second = await there.start("limited", {})
        assert (await second.wait(10)).status == "succeeded"
    finally:
        GATE.set()
        await here.aclose()
        await there.aclose()


STARTED: list[int] = []  # the order `numbered` runs began in
RUNNING = [0, 0]  # running now, most at once


async def numbered(n: int) -> dict[str, Any]:
    """Notes when run `n` begins and how many run at once, then holds until the gate opens."""
    STARTED.append(n)
    RUNNING[0] += 1
    RUNNING[1] = max(RUNNING)
    try:
        await GATE.wait()
    finally:
        RUNNING[0] -= 1
    return {"n": n}


def queued_orchestrators(tmp_path: Path, count: int = 2, **limits: Any) -> list[Orchestrator]:
    blueprint = {"name": "lined", "limits": {**limits, "on_limit": "queue"},
                 "inputs": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
                 "nodes": [{"id": "h", "type": "tool", "tool_name": "numbered", "tool_args": {"n": "{{ inputs.n }}"}}]}
    made = orchestrators(tmp_path, blueprint, count, tool=numbered, lease_seconds=1.0)
    STARTED.clear()
    RUNNING[:] = [0, 0]
    return made


async def statuses(orc: Orchestrator, handles: list[Any]) -> list[str]:
    assert orc.store is not None and orc.store.flush()
    return [(orc.store.get(h.run_id) or h.record).status for h in handles]


async def until(check: Any, seconds: float = 10.0) -> None:
    for _ in range(int(seconds / 0.05)):
        if check():
            return
        await asyncio.sleep(0.05)
    raise AssertionError("timed out")


async def test_queued_runs_start_one_at_a_time_in_the_order_they_came(tmp_path: Path) -> None:
    GATE.clear()
    here, there = queued_orchestrators(tmp_path, max_concurrent_runs=1)
    try:
        handles = []
        for n in range(6):  # two processes on one store: one queue
            handles.append(await (here if n % 2 else there).start("lined", {"n": n}))
        await until(lambda: STARTED == [0])
        await asyncio.sleep(0.3)
        assert await statuses(here, handles) == ["running"] + ["queued"] * 5
        GATE.set()
        records = [await h.wait(30) for h in handles]
        assert [r.status for r in records] == ["succeeded"] * 6
        assert STARTED == [0, 1, 2, 3, 4, 5] and RUNNING[1] == 1
    finally:
        GATE.set()
        await here.aclose()
        await there.aclose()


async def test_queued_runs_start_as_the_minute_window_allows(tmp_path: Path) -> None:
    GATE.set()
    here, there = queued_orchestrators(tmp_path, runs_per_minute=2)
    clock = [1_800_000_000.0]
    for orc in (here, there):
        assert orc.store is not None
        orc.store.now = lambda: clock[0]  # type: ignore[method-assign]
    try:
        handles = [await (here if n % 2 else there).start("lined", {"n": n}) for n in range(5)]
        await until(lambda: len(STARTED) == 2)
        await asyncio.sleep(1.5)  # the others ask again and stay queued
        assert STARTED == [0, 1]
        assert await statuses(here, handles) == ["succeeded"] * 2 + ["queued"] * 3
        clock[0] += 61
        await until(lambda: len(STARTED) == 4)
        await asyncio.sleep(1.5)
        assert STARTED == [0, 1, 2, 3]
        clock[0] += 61
        assert [(await h.wait(10)).status for h in handles] == ["succeeded"] * 5
        assert STARTED == [0, 1, 2, 3, 4]
    finally:
        await here.aclose()
        await there.aclose()


async def test_a_cancelled_queued_run_leaves_the_queue(tmp_path: Path) -> None:
    GATE.clear()
    [orc] = queued_orchestrators(tmp_path, count=1, max_concurrent_runs=1)
    try:
        first = await orc.start("lined", {"n": 0})
        second = await orc.start("lined", {"n": 1})
        third = await orc.start("lined", {"n": 2})
        assert second.record.status == "queued"
        assert await orc.cancel(second.run_id)
        cancelled = await second.wait(5)
        assert cancelled.status == "cancelled" and "before it started" in cancelled.error["message"]
        GATE.set()
        assert (await first.wait(10)).status == (await third.wait(10)).status == "succeeded"
        assert STARTED == [0, 2]
    finally:
        GATE.set()
        await orc.aclose()


async def test_a_queued_run_outlives_its_server(tmp_path: Path) -> None:
    GATE.clear()
    here, there = queued_orchestrators(tmp_path, max_concurrent_runs=1)
    try:
        there.recover_interrupted_runs()  # a server: it takes over the runs of servers that die
        first = await there.start("lined", {"n": 0})
        await until(lambda: STARTED == [0])
        queued = await here.start("lined", {"n": 1})
        assert queued.record.status == "queued"
        await here.aclose(suspend=True)  # its server goes away while the run waits its turn
        assert there.store is not None and there.store.get(queued.run_id).status == "queued"
        GATE.set()
        assert (await first.wait(10)).status == "succeeded"
        await until(lambda: there.get_run(queued.run_id) is not None
                    and there.get_run(queued.run_id).status == "succeeded")
        assert STARTED == [0, 1]
    finally:
        GATE.set()
        await there.aclose()


async def test_an_mcp_client_sees_its_queued_run_and_follows_it_to_the_end(tmp_path: Path) -> None:
    GATE.clear()
    [orc] = queued_orchestrators(tmp_path, count=1, max_concurrent_runs=1)
    try:
        first = await orc.start("lined", {"n": 0})
        async with http_server(orc, make_options(wait_seconds=0.3)) as url, http_client(url) as client:
            answer = await client.call_tool("workflow_lined", {"n": 1})
            queued = structured(answer)
            assert not answer.is_error and queued["status"] == "queued"
            assert "still queued" in answer.content[-1].text
            GATE.set()
            assert (await first.wait(10)).status == "succeeded"
            done = structured(await client.call_tool("run_result", {"run_id": queued["run_id"], "wait_seconds": 10}))
        assert done["status"] == "succeeded" and STARTED == [0, 1]
    finally:
        GATE.set()
        await orc.aclose()


async def test_a_schedule_over_the_limit_records_rate_limited_firings(tmp_path: Path) -> None:
    GATE.set()
    [orc] = orchestrators(tmp_path, limited(runs_per_minute=1), count=1)
    try:
        start = 1_800_000_000.0
        now = [start]
        orc.schedules.clock = lambda: now[0]
        assert orc.store is not None
        loop = FiringLoop(orc, orc.store, clock=lambda: now[0])
        orc.schedules.create(workflow="limited", inputs={}, spec={"every_seconds": 1}, schedule_id="often",
                             policy={"overlap": "allow_all"})
        for step in (1, 2, 3):
            now[0] = start + step + 0.1
            await loop.tick()
        outcomes = [f.outcome for f in reversed(orc.store.firings("often", limit=10))]
        assert outcomes == ["started", "rate_limited", "rate_limited"]
        assert orc.schedules.get("often")["counts"] == {"started": 1, "rate_limited": 2}
    finally:
        await orc.aclose()


async def test_a_webhook_over_the_limit_answers_429_with_retry_after(tmp_path: Path) -> None:
    GATE.set()
    [orc] = orchestrators(tmp_path, limited(runs_per_minute=1), count=1)
    try:
        hook = orc.hooks.create(workflow="limited", auth="bearer", hook_id="busy")
        assert hook["url"] == "/hooks/busy"  # made before any server said where it is
        async with http_server(orc, make_options()) as url, httpx2.AsyncClient(timeout=30) as http:
            auth = {"authorization": f"Bearer {hook['secret']}", "content-type": "application/json"}
            first = await http.post(url + hook["url"], content=json.dumps({}), headers=auth)
            second = await http.post(url + hook["url"], content=json.dumps({}), headers=auth)
        assert first.status_code == 202
        assert second.status_code == 429 and 1 <= int(second.headers["retry-after"]) <= 60
        assert second.json()["error"]["code"] == "rate_limited"
    finally:
        await orc.aclose()


def test_limits_are_checked_with_the_blueprint(tmp_path: Path) -> None:
    orc = Orchestrator(registry=Registry(), settings=Settings(data_dir=tmp_path / "d", workspace=tmp_path))
    report = orc.validate({**limited(runs_per_minute=0, on_limit="later"),
                           "nodes": [{"id": "s", "type": "tool", "tool_name": "sleep", "tool_args": {"seconds": 0}}]})
    assert not report.ok
    fields = " ".join(f"{e.field} {e.message}" for e in report.errors)
    assert "runs_per_minute" in fields and "on_limit" in fields
    with pytest.raises(IceError):
        orc.compile(limited(max_concurrent_runs=-1))
