"""Durable runs against real server processes: SIGKILL mid-run, restart, and the run finishes
with every finished node executed once; two servers on one data folder share runs safely."""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from live import ServerProcess, wait_until
from mcp_helpers import ADMIN, http_client, structured

from ice_mcp.store.sqlite import RunStore

STEP = 0.4  # seconds each node waits: long enough to kill a server while a node is in flight
JOURNAL_LATENCY = 0.05  # seconds the store may take to commit an event (it collects them every 5 ms)


def chain(name: str, labels: list[str]) -> dict[str, Any]:
    nodes = [{"id": label, "type": "tool", "tool_name": "mark",
              "tool_args": {"label": label, "seconds": STEP},
              **({"dependencies": [labels[i - 1]]} if i else {})} for i, label in enumerate(labels)]
    return {"name": name, "nodes": nodes, "outputs": {"last": f"{{{{ {labels[-1]}.label }}}}"}}


BLUEPRINTS = [
    chain("six", [f"n{i}" for i in range(1, 7)]),
    {"name": "twenty", "nodes": [
        {"id": "each", "type": "loop", "items": "{{ range(20) | list }}", "item_var": "item", "concurrency": 1,
         "body": [{"id": "step", "type": "tool", "tool_name": "mark",
                   "tool_args": {"label": "item{{ item }}", "seconds": 0.15}}]}]},
    chain("inner", ["i1", "i2", "i3"]),
    {"name": "outer", "nodes": [
        {"id": "a", "type": "tool", "tool_name": "mark", "tool_args": {"label": "a", "seconds": STEP}},
        {"id": "w", "type": "workflow", "workflow_ref": "inner", "dependencies": ["a"]},
        {"id": "b", "type": "tool", "tool_name": "mark", "tool_args": {"label": "b", "seconds": STEP},
         "dependencies": ["w"]}]},
]


class Cluster:
    """Servers on one data folder, sharing a marks file."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.marks = root / "marks.txt"
        self.marks.touch()
        folder = root / "blueprints"
        folder.mkdir()
        for bp in BLUEPRINTS:
            (folder / f"{bp['name']}.json").write_text(json.dumps(bp))
        self.servers: list[ServerProcess] = []

    def server(self, lease: float = 10.0) -> ServerProcess:
        server = ServerProcess(self.root, "--tools", "durable_tools", "--blueprints", str(self.root / "blueprints"),
                               env={"ICE_TEST_MARKS": str(self.marks), "ICE_MCP_LEASE_SECONDS": str(lease)})
        self.servers.append(server)
        server.start()
        return server

    def counts(self) -> Counter[str]:
        return Counter(line.split()[0] for line in self.marks.read_text().splitlines())

    def keys(self, label: str) -> list[str]:
        return [line.split()[1] for line in self.marks.read_text().splitlines() if line.split()[0] == label]

    def wait_for_mark(self, label: str, timeout: float = 30) -> None:
        wait_until(lambda: self.counts()[label] > 0, timeout, f"node {label} to start")

    def stop(self) -> None:
        for server in self.servers:
            server.stop()


def finished(server: ServerProcess, run_id: str, timeout: float = 30) -> dict[str, Any]:
    def done() -> dict[str, Any] | None:
        record = server.rpc("run.status", run_id=run_id)
        return record if record["status"] != "running" else None

    return wait_until(done, timeout, f"run {run_id} to finish")  # type: ignore[no-any-return]


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    made = Cluster(tmp_path)
    yield made
    made.stop()


@pytest.mark.slow
@pytest.mark.parametrize(("workflow", "in_flight", "once"), [
    ("six", "n3", ["n1", "n2", "n4", "n5", "n6"]),
    ("twenty", "item12", [f"item{i}" for i in range(20) if i != 12]),
    ("outer", "i2", ["a", "i1", "i3", "b"]),
])
def test_a_killed_server_resumes_the_run_on_restart(cluster: Cluster, workflow: str, in_flight: str,
                                                     once: list[str]) -> None:
    first = cluster.server()
    run_id = first.rpc("workflow.run", name=workflow, wait_seconds=0)["run_id"]
    cluster.wait_for_mark(in_flight)
    # The journal reaches the store within a few ms of each event: give the node finished just before
    # `in_flight` started that long (a crash sooner may repeat it, which is at-least-once), then kill.
    time.sleep(JOURNAL_LATENCY)
    first.kill()

    second = cluster.server()
    record = finished(second, run_id)
    assert record["status"] == "succeeded", record["error"]
    counts = cluster.counts()
    assert {label: counts[label] for label in once} == dict.fromkeys(once, 1)
    assert counts[in_flight] == 2  # the node in flight runs again, with the same idempotency key
    first_key, again_key = cluster.keys(in_flight)
    assert first_key == again_key and first_key.startswith(f"{run_id}/")
    events = second.rpc("run.status", run_id=run_id)
    assert events["started_at"] == record["started_at"]


@pytest.mark.slow
def test_two_servers_share_a_folder_and_take_over_a_dead_owners_run(cluster: Cluster) -> None:
    lease = 2.0
    owner = cluster.server(lease)
    other = cluster.server(lease)
    live = owner.rpc("workflow.run", name="six", wait_seconds=0)["run_id"]
    cluster.wait_for_mark("n2")
    # The other server sees the live run as running until its owner ends it, and leaves it alone (each node
    # once, below); looked at as often as a loaded machine allows, never against a clock.
    seen = []
    while not seen or seen[-1] == "running":
        seen.append(other.rpc("run.status", run_id=live)["status"])
        time.sleep(0.1)
    assert seen[0] == "running" and seen[-1] == "succeeded" and set(seen) == {"running", "succeeded"}, seen
    assert finished(owner, live)["status"] == "succeeded"
    assert finished(other, live)["status"] == "succeeded"
    assert set(cluster.counts().values()) == {1}

    cluster.marks.write_text("")
    orphan = owner.rpc("workflow.run", name="six", wait_seconds=0)["run_id"]
    cluster.wait_for_mark("n2")
    time.sleep(JOURNAL_LATENCY)  # n1's end is in the store
    owner.kill()  # on this host a dead owner is seen by its pid, whatever its lease says (tests/replicas/test_stores)
    store = RunStore.in_data_dir(cluster.root / ".ice")
    try:
        wait_until(lambda: any(e["type"] == "run_resumed" for e in store.events(orphan)), 30,
                   "the other server to take the run over")
    finally:
        store.close()
    record = finished(other, orphan)
    assert record["status"] == "succeeded", record["error"]
    assert cluster.counts() == Counter({"n1": 1, "n2": 2, "n3": 1, "n4": 1, "n5": 1, "n6": 1})


async def test_a_blueprint_registered_over_mcp_survives_a_restart(cluster: Cluster) -> None:
    kept = chain("kept", ["k1", "k2"])
    server = cluster.server()
    async with http_client(server.url, token=ADMIN) as client:
        for description in ("first", "second"):
            answer = await client.call_tool("blueprint_register", {"blueprint": {**kept, "description": description}})
            assert answer.is_error is False, answer.content
    server.stop()

    again = cluster.server()
    async with http_client(again.url) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert "workflow_kept" in tools and tools["workflow_kept"].description.startswith("second")
        answer = await client.call_tool("workflow_kept", {})
        assert answer.is_error is False, answer.content
        record = again.rpc("run.status", run_id=structured(answer)["run_id"])
        assert record["status"] == "succeeded" and record["workflow_version"] == 2
        current = await client.read_resource("ice://blueprints/kept")
        assert json.loads(current.contents[0].text)["description"] == "second"
    store = RunStore.in_data_dir(cluster.root / ".ice")
    try:
        assert [(v.version, v.source["description"]) for v in store.blueprint_versions("kept")] == [
            (1, "first"), (2, "second")]
    finally:
        store.close()
