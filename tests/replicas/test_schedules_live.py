"""Schedules across real processes: three `ice-mcp serve --http` on one store (Redis, then one data folder)
fire a 1-second schedule's 20 slots exactly once each while the server that created it, 8.5 s before, is
SIGKILLed at slot 6 and started again at slot 13 (the others learn of a schedule within a second, not at
their 30 s idle look); and the same with `--engine temporal` (a Temporal Schedule ticking beside the servers' loops),
two workers running the runs."""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from live import ServerProcess
from mcp_helpers import subprocess_env

from ice_mcp_dev.cluster import Child, TemporalDevServer, ice_mcp_argv

SLOTS = 20


def wait_until(moment: float) -> None:
    time.sleep(max(0.0, moment - time.time()))


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["redis", "postgresql", "sqlite", "temporal"])
def test_three_servers_fire_every_slot_once_through_a_sigkill(kind: str, tmp_path: Path,
                                                              request: pytest.FixtureRequest) -> None:
    marks = tmp_path / "marks.txt"
    marks.touch()
    folder = tmp_path / "blueprints"
    folder.mkdir()
    (folder / "tick.json").write_text(json.dumps({"name": "tick", "nodes": [
        {"id": "mark", "type": "tool", "tool_name": "mark", "tool_args": {"label": "{{ trigger.slot }}"}}]}))
    store = (["--data-dir", str(tmp_path / "data")] if kind == "sqlite"
             else ["--state", str(request.getfixturevalue("postgres_url" if kind == "postgresql" else "redis_url"))])
    env = {"ICE_TEST_MARKS": str(marks), "ICE_MCP_LEASE_SECONDS": "5"}
    others: list[Child | TemporalDevServer] = []  # on Temporal: the dev server and two workers run the runs
    if kind == "temporal":
        temporal = TemporalDevServer(tmp_path / "temporal", persist=False)
        others.append(temporal)
        temporal.start()
        store += ["--engine", "temporal", "--temporal", temporal.address]
        for number in range(2):
            workspace = tmp_path / f"worker{number}"
            workspace.mkdir()
            worker = Child(f"worker {number}", ice_mcp_argv("worker", "--temporal", temporal.address, *store[:2],
                                                            "--tools", "durable_tools"),
                           workspace / "worker.log", {**subprocess_env(workspace), **env})
            others.append(worker)
            worker.start()
    servers = []
    for number in range(3):
        workspace = tmp_path / f"server{number}"
        workspace.mkdir()
        servers.append(ServerProcess(workspace, *store, "--tools", "durable_tools", "--blueprints", str(folder),
                                     env=env))
    try:
        for server in servers:
            server.start()
        first = math.ceil(time.time()) + 3.0
        start = datetime.fromtimestamp(first, UTC).isoformat()
        end = datetime.fromtimestamp(first + SLOTS - 1, UTC).isoformat()
        # allow_all: a run the SIGKILL orphaned counts as running until a survivor adopts it (5 s lease),
        # and `skip` would rightly skip those slots; here every slot must run.
        created = servers[0].rpc("schedule.create", workflow="tick", id="every_second",
                                 spec={"every_seconds": 1, "start_at": start, "end_at": end},
                                 policy={"overlap": "allow_all"})
        assert created["id"] == "every_second"
        wait_until(first + 5.5)
        servers[0].kill()  # at slot 6, 8.5 s after it created the schedule: only it was told at once
        wait_until(first + 12.5)
        servers[0].start()  # at slot 13
        wait_until(first + SLOTS + 3)
        history = servers[2].rpc("schedule.history", id="every_second", limit=200)["firings"]
        if kind == "temporal":  # the servers made it a Temporal Schedule, whose ticks came every second
            described = asyncio.run(describe_schedule(temporal.address, "ice-sched:every_second"))
            assert described.schedule.policy.catchup_window == timedelta(days=1)
            assert described.info.num_actions >= SLOTS - 5, described.info
    finally:
        for server in servers:
            server.stop()
        for other in reversed(others):
            other.stop()
    assert [f for f in history if f["outcome"] == "missed"] == []
    started = [f for f in history if f["outcome"] == "started"]
    assert len(started) == SLOTS, [(f["slot"], f["outcome"]) for f in history if f["outcome"] != "started"]
    assert len({f["run_id"] for f in started}) == SLOTS
    expected = {datetime.fromtimestamp(first + n, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
                for n in range(SLOTS)}
    assert {f["slot"] for f in started} == expected
    ran = Counter(line.split()[0] for line in marks.read_text().splitlines())
    assert set(ran) == expected  # every slot's run ran its node
    assert sum(ran.values()) - SLOTS <= 1  # only a node in flight at the SIGKILL may run twice
    late = [datetime.fromisoformat(f["fired_at"].replace("Z", "+00:00")).timestamp()
            - datetime.fromisoformat(f["slot"].replace("Z", "+00:00")).timestamp() for f in started]
    assert max(late) < 5.0, sorted(late)[-5:]


async def describe_schedule(address: str, schedule_id: str) -> Any:
    from temporalio.client import Client

    client = await Client.connect(address)
    return await client.get_schedule_handle(schedule_id).describe()
