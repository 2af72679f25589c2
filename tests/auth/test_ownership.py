"""Schedules, webhooks and notification targets belong to the principal that made them (OAuth): another sees
of them what an unknown id shows, their runs are their owner's, and a target hears of its owner's runs only."""

from __future__ import annotations

from pathlib import Path

import pytest

from ice_mcp import Orchestrator, Registry, Settings
from ice_mcp.errors import UnknownName
from ice_mcp.principals import acting_as
from ice_mcp.schedules.firing import start_slot

WORKS = {"name": "works", "nodes": [{"id": "w", "type": "tool", "tool_name": "render_template",
                                     "tool_args": {"template": "fine"}}]}


@pytest.fixture
def orc(tmp_path: Path) -> Orchestrator:
    made = Orchestrator(registry=Registry(), settings=Settings(data_dir=tmp_path / "data", workspace=tmp_path,
                                                               allow_net=("127.0.0.1",)))
    made.register_blueprint(WORKS)
    return made


async def test_schedules_hooks_and_targets_are_their_makers(orc: Orchestrator) -> None:
    with acting_as("oauth:i#alice"):
        schedule = orc.schedules.create(workflow="works", inputs={}, spec={"cron": "0 3 * * *"}, schedule_id="mine")
        hook = orc.hooks.create(workflow="works", auth="bearer", hook_id="gh")
        target = orc.notifications.set(workflow="works", url="http://127.0.0.1:9/in", on=["succeeded"])
    with acting_as("oauth:i#bob"):
        assert orc.schedules.list()["schedules"] == []
        assert orc.hooks.list()["hooks"] == [] and orc.notifications.list()["targets"] == []
        for look in (lambda: orc.schedules.get("mine"), lambda: orc.schedules.delete("mine"),
                     lambda: orc.schedules.pause("mine"), lambda: orc.hooks.delete("gh"),
                     lambda: orc.hooks.rotate_secret("gh"), lambda: orc.notifications.history(target["id"]),
                     lambda: orc.notifications.delete(target["id"])):
            with pytest.raises(UnknownName):
                look()
    with acting_as("oauth:i#alice"):
        assert [s["id"] for s in orc.schedules.list()["schedules"]] == [schedule["id"]]
        assert [h["id"] for h in orc.hooks.list()["hooks"]] == [hook["id"]]
        assert orc.notifications.history(target["id"])["deliveries"] == []
    assert len(orc.schedules.list()["schedules"]) == 1  # the server itself (no principal) sees everything
    await orc.aclose()


async def test_a_schedules_runs_are_its_owners_and_targets_hear_their_owners_runs_only(orc: Orchestrator) -> None:
    assert orc.store is not None
    with acting_as("oauth:i#alice"):
        orc.schedules.create(workflow="works", inputs={}, spec={"cron": "0 3 * * *"}, schedule_id="mine")
        target = orc.notifications.set(workflow="works", url="http://127.0.0.1:9/in", on=["succeeded"])
    schedule = orc.store.schedule("mine")
    assert schedule is not None and schedule.principal == "oauth:i#alice"
    run_id = await start_slot(orc, schedule, 1_800_000_000.0, None)  # the firing loop, no principal acting
    handle = orc.watch(run_id)
    assert handle is not None and (await handle.wait(10)).principal == "oauth:i#alice"
    bobs = await orc.run("works", {}, caller="oauth:i#bob")
    assert orc.store.flush()
    orc.notifications.sweep()  # what every server does every 30 s
    entries = orc.store.outbox(target["id"])
    assert [e.payload["data"]["run_id"] for e in entries] == [run_id]  # Alice's run, not Bob's
    assert bobs.principal == "oauth:i#bob"
    with acting_as("oauth:i#bob"):
        assert orc.get_run(run_id) is None and [r.run_id for r in orc.list_runs()] == [bobs.run_id]
    await orc.aclose()


async def test_a_networks_workflow_runs_are_its_callers(orc: Orchestrator) -> None:
    manifest = {"api_version": "network.v0", "name": "pair", "workflows": [
        {"id": "one", "ref": "works"}, {"id": "two", "ref": "works", "after": ["one"]}]}
    with acting_as("oauth:i#alice"):
        result = await orc.run_network(manifest, caller="oauth:i#alice")
        members = [w["run_id"] for w in result["workflows"].values()]
        assert result["status"] == "succeeded" and all(orc.get_run(run_id) is not None for run_id in members)
        assert orc.network_status(result["network_id"]) is not None
    with acting_as("oauth:i#bob"):
        assert orc.network_status(result["network_id"]) is None
        assert all(orc.get_run(run_id) is None for run_id in members)
    await orc.aclose()
