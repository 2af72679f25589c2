"""Per-workflow limits held in the run store at admission: two orchestrators on one data folder share them,
schedules record a rate_limited firing, webhooks answer 429 with Retry-After, and a finished run frees its slot."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp_helpers import http_server, make_options

from ice_mcp import Orchestrator, Registry, Settings
from ice_mcp.errors import IceError, RateLimited
from ice_mcp.schedules.firing import FiringLoop

GATE = asyncio.Event()


async def held() -> dict[str, Any]:
    """Holds its run until the test opens the gate."""
    await GATE.wait()
    return {"done": True}


def limited(**limits: Any) -> dict[str, Any]:
    return {"name": "limited", "limits": limits,
            "nodes": [{"id": "h", "type": "tool", "tool_name": "held"}]}


def orchestrators(tmp_path: Path, blueprint: dict[str, Any], count: int = 2) -> list[Orchestrator]:
    made = []
    for _ in range(count):
        registry = Registry()
        registry.add_tool(held)
        orc = Orchestrator(registry=registry, settings=Settings(data_dir=tmp_path / "data", workspace=tmp_path))
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
        second = await there.start("limited", {})
        assert (await second.wait(10)).status == "succeeded"
    finally:
        GATE.set()
        await here.aclose()
        await there.aclose()


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
    report = orc.validate({**limited(runs_per_minute=0, on_limit="queue"),
                           "nodes": [{"id": "s", "type": "tool", "tool_name": "sleep", "tool_args": {"seconds": 0}}]})
    assert not report.ok
    fields = " ".join(f"{e.field} {e.message}" for e in report.errors)
    assert "runs_per_minute" in fields and "on_limit" in fields
    with pytest.raises(IceError):
        orc.compile(limited(max_concurrent_runs=-1))
