"""On Temporal a network is a workflow of its own (id = network id) whose runs are child workflows: it gives the
embedded engine's result, finishes with the server that started it gone, outlives a lost worker, is cancelled
with its runs, and a workflow refused at its start (bad inputs, limits) skips only the workflows after it."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from live import ServerProcess
from temporal_cluster import HERE, ROOT, Marks, Workers, make_settings, wait_until, with_test_tools
from temporalio.worker import Replayer

from ice_mcp import Orchestrator, Registry
from ice_mcp.engines.temporal.client import TemporalEngine
from ice_mcp.engines.temporal.worker import sandbox_runner
from ice_mcp.engines.temporal.workflow import NetworkWorkflow

WAIT = 120.0  # seconds a network may take here (a lost worker's workflow task moves after ~10 s)


def marked(name: str, inputs: dict[str, Any], node: dict[str, Any], outputs: dict[str, Any],
           **extra: Any) -> dict[str, Any]:
    """A workflow whose first node notes its run in the marks (and waits `global.step` seconds) before `node`."""
    mark = {"id": "mark", "type": "tool", "tool_name": "mark",
            "tool_args": {"label": name, "seconds": "{{ global.step }}"}}
    return {"name": name, "inputs": {"type": "object", **inputs}, "nodes": [mark, {**node, "dependencies": ["mark"]}],
            "outputs": outputs, **extra}


EXTRACT = marked("extract", {"properties": {"day": {"type": "string"}}, "required": ["day"]},
                 {"id": "pick", "type": "tool", "tool_name": "json_query", "tool_args": {
                     "data": {"rows": [{"day": "{{ inputs.day }}", "n": 1}, {"day": "{{ inputs.day }}", "n": 2}]},
                     "path": "rows"}},
                 {"rows": "{{ pick.result }}"})
COUNT = marked("count", {"properties": {"rows": {"type": "array"}}, "required": ["rows"]},
               {"id": "n", "type": "tool", "tool_name": "json_query",
                "tool_args": {"data": {"rows": "{{ inputs.rows }}"}, "path": "length(rows)"}},
               {"count": "{{ n.result }}"})
REPORT = marked("report", {"properties": {"count": {"type": "integer"}}, "required": ["count"]},
                {"id": "line", "type": "tool", "tool_name": "render_template",
                 "tool_args": {"template": "{{ global.title }}: {{ inputs.count }} rows"}},
                {"line": "{{ line.text }}"})
ONCE_A_MINUTE = marked("once_a_minute", {}, {"id": "ok", "type": "tool", "tool_name": "render_template",
                                              "tool_args": {"template": "ok"}},
                       {"text": "{{ ok.text }}"}, limits={"runs_per_minute": 1, "on_limit": "reject"})
QUEUED = marked("queued", {}, {"id": "ok", "type": "tool", "tool_name": "render_template",
                               "tool_args": {"template": "ok"}},
                {"text": "{{ ok.text }}"}, limits={"max_concurrent_runs": 1, "on_limit": "queue"})
BLUEPRINTS = [EXTRACT, COUNT, REPORT, ONCE_A_MINUTE, QUEUED]


def nightly(step: float = 0.0) -> dict[str, Any]:
    """extract -> count (after it, reading its rows through a template) -> report (reading count's)."""
    return {"api_version": "network.v0", "name": "nightly", "global": {"title": "Nightly", "step": step},
            "workflows": [
                {"id": "extract", "ref": "extract", "inputs": {"day": "2026-11-21"}},
                {"id": "count", "ref": "count", "after": ["extract"], "inputs": {"rows": "{{ extract.rows }}"}},
                {"id": "report", "ref": "report", "inputs": {"count": "{{ count.count }}"}}]}


ROWS = [{"day": "2026-11-21", "n": 1}, {"day": "2026-11-21", "n": 2}]
EXPECTED = {"extract": {"rows": ROWS}, "count": {"count": 2}, "report": {"line": "Nightly: 2 rows"}}


def server(root: Path, workers: Workers, engine: str = "temporal") -> Orchestrator:
    """A server's orchestrator on the workers' store and task queue (`compare`: the embedded engine, apart)."""
    orc = Orchestrator(registry=Registry(), settings=make_settings(root, engine, workers.address, workers.queue))
    with_test_tools(orc)
    for blueprint in BLUEPRINTS:
        orc.register_blueprint(blueprint)
    return orc


@pytest.fixture
async def client(tmp_path: Path, workers: Workers) -> AsyncIterator[Orchestrator]:
    orc = server(tmp_path, workers)
    yield orc
    await orc.aclose()


def outputs(result: dict[str, Any]) -> dict[str, Any]:
    return {wid: w["outputs"] for wid, w in result["workflows"].items()}


def statuses(result: dict[str, Any]) -> dict[str, str]:
    return {wid: w["status"] for wid, w in result["workflows"].items()}


async def ended(orc: Orchestrator, network_id: str) -> dict[str, Any]:
    """The network's result once its record (as any server reads it) says it ended."""
    found = await wait_until(lambda: (s := orc.network_status(network_id)) is not None and s["status"] != "running"
                             and s, WAIT, f"network {network_id} to end")
    return dict(found)


@pytest.mark.slow
async def test_a_network_runs_as_a_workflow_of_child_workflows_as_on_embedded(
        tmp_path: Path, client: Orchestrator, workers: Workers, marks: Marks) -> None:
    workers.start()
    handle = client.start_network(nightly(), from_client=False)
    result = await handle.wait(timeout=WAIT)
    assert marks.counts() == {"extract": 1, "count": 1, "report": 1}
    embedded = server(tmp_path, workers, "compare")
    try:
        expected = await embedded.run_network(nightly(), from_client=False)
    finally:
        await embedded.aclose()
    assert result["status"] == expected["status"] == "succeeded", result
    assert outputs(result) == outputs(expected) == EXPECTED
    assert statuses(result) == statuses(expected)
    # The network is a Temporal workflow (id = network id), each of its runs a child of it (id = run id).
    assert isinstance(client.engine, TemporalEngine)
    temporal = await client.engine.client()
    network = temporal.get_workflow_handle(handle.network_id)
    assert (await network.describe()).workflow_type == "ice_mcp.network"
    # Its code is deterministic: its history replays (in the sandbox, as a worker runs it) without a difference.
    replayer = Replayer(workflows=[NetworkWorkflow], workflow_runner=sandbox_runner(),
                        data_converter=temporal.data_converter)
    await replayer.replay_workflow(await network.fetch_history())
    for entry in result["workflows"].values():
        info = (await temporal.get_workflow_handle(entry["run_id"]).describe()).raw_description
        assert info.workflow_execution_info.parent_execution.workflow_id == handle.network_id
        run = client.store.run(entry["run_id"])
        assert run is not None and run.record.status == "succeeded"
        assert run.idempotency_key is not None and run.idempotency_key.startswith(handle.network_id + ":")
    # Its record, as every server reads it: its workflows as nodes, their runs and outputs.
    stored = client.store.get(handle.network_id)
    assert stored is not None and stored.status == "succeeded"
    assert {wid: (node.output or {})["outputs"] for wid, node in stored.nodes.items()} == EXPECTED


@pytest.mark.slow
@pytest.mark.parametrize("gone", ["closed", "killed"])
async def test_a_network_finishes_with_the_server_that_started_it_gone(
        tmp_path: Path, workers: Workers, marks: Marks, gone: str) -> None:
    workers.start()
    if gone == "closed":
        first = server(tmp_path, workers)
        network_id = first.start_network(nightly(0.2), from_client=False).network_id
        await first.aclose(suspend=True)  # at once: no server follows the network from now on
    else:
        folder = tmp_path / "blueprints"
        folder.mkdir()
        for blueprint in BLUEPRINTS:
            (folder / f"{blueprint['name']}.json").write_text(json.dumps(blueprint))
        (tmp_path / "a").mkdir()
        process = ServerProcess(tmp_path / "a", "--data-dir", str(tmp_path / "data"), "--blueprints", str(folder),
                                "--tools", "temporal_tools", env={
                                    "ICE_MCP_ENGINE": "temporal", "ICE_MCP_TEMPORAL": workers.address,
                                    "ICE_MCP_TEMPORAL_TASK_QUEUE": workers.queue, "ICE_TEST_MARKS": str(marks.path),
                                    "PYTHONPATH": os.pathsep.join([str(HERE), str(ROOT)])})
        process.start()
        try:
            network_id = process.rpc("network.execute", manifest=nightly(0.2), wait_seconds=0)["network_id"]
        finally:
            process.kill()  # SIGKILL the moment it answered
    later = server(tmp_path, workers)  # a fresh server on the same store reads what the workers did
    try:
        result = await ended(later, network_id)
    finally:
        await later.aclose()
    assert result["status"] == "succeeded", result
    assert outputs(result) == EXPECTED
    assert marks.counts() == {"extract": 1, "count": 1, "report": 1}


@pytest.mark.slow
async def test_a_worker_lost_mid_network_costs_it_nothing(client: Orchestrator, workers: Workers,
                                                         marks: Marks) -> None:
    running = [workers.start(), workers.start()]
    handle = client.start_network(nightly(1.0), from_client=False)
    await marks.wait_for("count", timeout=60)
    [holder] = [p for p in running if p.pid == marks.pids("count")[0]]
    holder.send_signal(signal.SIGKILL)
    holder.wait(timeout=10)
    result = await handle.wait(timeout=WAIT)
    assert result["status"] == "succeeded", result
    assert outputs(result) == EXPECTED
    counts = marks.counts()
    assert counts["extract"] == counts["report"] == 1  # finished workflows ran once
    assert 1 <= counts["count"] <= 2  # the node in flight at most twice
    for name in ("extract", "count", "report"):  # one run each: a begun run is never begun again
        assert [r.status for r in client.list_runs(workflow=name)] == ["succeeded"]


@pytest.mark.slow
async def test_cancelling_a_network_cancels_its_runs(tmp_path: Path, client: Orchestrator, workers: Workers,
                                                   marks: Marks) -> None:
    workers.start()
    handle = client.start_network(nightly(60.0), from_client=False)
    await marks.wait_for("extract", timeout=60)
    other = server(tmp_path, workers)  # any server cancels it: through Temporal, not through its server
    try:
        assert await other.cancel(handle.network_id) is True
        result = await handle.wait(timeout=WAIT)
    finally:
        await other.aclose()
    assert result["status"] == "cancelled", result
    assert statuses(result) == {"extract": "cancelled", "count": "skipped", "report": "skipped"}
    run = client.store.get(result["workflows"]["extract"]["run_id"])
    assert run is not None and run.status == "cancelled"
    await marks.wait_for("extract:cancelled", timeout=30)  # the running node heard it
    stored = client.store.get(handle.network_id)
    assert stored is not None and stored.status == "cancelled"


REFUSED = {"api_version": "network.v0", "name": "refused", "global": {"title": "Refused", "step": 0.0}, "workflows": [
    {"id": "bad", "ref": "count", "inputs": {"rows": "not rows"}},
    {"id": "after_bad", "ref": "report", "after": ["bad"], "inputs": {"count": 1}},
    {"id": "fine", "ref": "report", "inputs": {"count": 3}},
    {"id": "first", "ref": "once_a_minute"},
    {"id": "second", "ref": "once_a_minute"}]}


@pytest.mark.slow
async def test_a_workflow_refused_at_its_start_skips_only_its_dependents(
        tmp_path: Path, client: Orchestrator, workers: Workers) -> None:
    workers.start()
    result = await client.start_network(REFUSED, from_client=False).wait(timeout=WAIT)
    embedded = server(tmp_path, workers, "compare")
    try:
        expected = await embedded.run_network(REFUSED, from_client=False)
    finally:
        await embedded.aclose()
    for got in (result, expected):
        assert got["status"] == "failed"
        workflows = got["workflows"]
        assert workflows["bad"]["status"] == "failed" and workflows["bad"]["run_id"] is None
        assert workflows["bad"]["error"]["code"] == "invalid_inputs"
        assert workflows["after_bad"]["status"] == "skipped" and workflows["after_bad"]["run_id"] is None
        assert workflows["fine"] == {"status": "succeeded", "run_id": workflows["fine"]["run_id"],
                                     "outputs": {"line": "Refused: 3 rows"}, "error": None}
        # One a minute: one of the two ran, the other was turned away by the workflow's limits.
        limited = sorted((workflows[w]["status"], (workflows[w]["error"] or {}).get("code")) for w in ("first", "second"))
        assert limited == [("failed", "rate_limited"), ("succeeded", None)]
    assert result["workflows"]["bad"]["error"] == expected["workflows"]["bad"]["error"]
    # On Temporal a queue is refused, as a run of its own would be.
    queued = await client.start_network({"name": "queued", "global": {"step": 0}, "workflows": [
        {"id": "q", "ref": "queued"}, {"id": "then", "ref": "report", "after": ["q"], "inputs": {"count": 0}}]},
        from_client=False).wait(timeout=WAIT)
    assert statuses(queued) == {"q": "failed", "then": "skipped"}
    assert queued["workflows"]["q"]["error"]["code"] == "unsupported"
