"""MCP replicas as separate `ice-mcp serve --http --state URL` processes on one real Redis or PostgreSQL: any
replica answers for any run, streams its progress, cancels it, hears catalogue changes; and a client
spreading 300 workflow calls over three replicas loses none when one is SIGKILLed and restarted, whether
the replicas run the runs (embedded) or two `ice-mcp worker` processes do (Temporal)."""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx2
import mcp_types as types
import pytest
from live import ServerProcess
from mcp_helpers import ADMIN, http_client, structured, subprocess_env

from ice_mcp_dev.cluster import Child, TemporalDevServer, ice_mcp_argv, stateless_tool_call


def chain(name: str, labels: list[str], seconds: float) -> dict[str, Any]:
    nodes = [{"id": label, "type": "tool", "tool_name": "mark", "tool_args": {"label": label, "seconds": seconds},
              **({"dependencies": [labels[i - 1]]} if i else {})} for i, label in enumerate(labels)]
    return {"name": name, "inputs": {"type": "object", "properties": {"tag": {"type": "string"}}},
            "nodes": nodes, "outputs": {"last": f"{{{{ {labels[-1]}.label }}}}"}}


class Replicas:
    """Server processes on one Redis state; each with its own data folder, all sharing a marks file."""

    def __init__(self, root: Path, state_url: str) -> None:
        self.root, self.state_url = root, state_url
        self.marks = root / "marks.txt"
        self.marks.touch()
        folder = root / "blueprints"
        folder.mkdir()
        gate = {"name": "gate", "nodes": [
            {"id": "ok", "type": "human", "approval": "Ship it?"},
            {"id": "ship", "type": "tool", "tool_name": "mark", "tool_args": {"label": "shipped"},
             "dependencies": ["ok"]}], "outputs": {"shipped": "{{ ship.label }}"}}
        for bp in (chain("six", [f"n{i}" for i in range(1, 7)], 0.2), chain("relay", ["r1", "r2", "r3"], 0.1), gate):
            (folder / f"{bp['name']}.json").write_text(json.dumps(bp))
        self.servers: list[ServerProcess] = []
        self.engine_args: list[str] = []  # for every replica: which engine runs the runs
        self.others: list[Child] = []  # a Temporal dev server and workers, stopped last
        self.env = {"ICE_TEST_MARKS": str(self.marks), "ICE_MCP_LEASE_SECONDS": "5"}

    def add(self, *args: str) -> ServerProcess:
        workspace = self.root / f"replica{len(self.servers)}"
        workspace.mkdir()
        server = ServerProcess(workspace, "--state", self.state_url, "--tools", "durable_tools",
                               "--blueprints", str(self.root / "blueprints"), *self.engine_args, *args, env=self.env)
        self.servers.append(server)
        server.start()
        return server

    def on_temporal(self, workers: int) -> None:
        """Replicas added from now on hand their runs to `workers` worker processes on a Temporal dev server."""
        temporal = TemporalDevServer(self.root / "temporal", persist=False)
        self.others.append(temporal)
        temporal.start()
        self.engine_args = ["--engine", "temporal", "--temporal", temporal.address]
        for number in range(workers):
            workspace = self.root / f"worker{number}"
            workspace.mkdir()
            worker = Child(f"worker {number}", ice_mcp_argv("worker", "--temporal", temporal.address, "--state",
                                                            self.state_url, "--tools", "durable_tools"),
                           workspace / "worker.log", {**subprocess_env(workspace), **self.env})
            self.others.append(worker)
            worker.start()

    def counts(self) -> Counter[str]:
        return Counter(line.split()[0] for line in self.marks.read_text().splitlines())

    def stop(self) -> None:
        for server in self.servers:
            server.stop()
        for other in reversed(self.others):
            other.stop()


@pytest.fixture
def replicas(tmp_path: Path, shared_url: str) -> Iterator[Replicas]:
    made = Replicas(tmp_path, shared_url)
    yield made
    made.stop()


async def until(check: Callable[[], Any], timeout: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if result := check():
            return result
        await asyncio.sleep(0.05)
    raise AssertionError("timed out")


@pytest.mark.parametrize("engine", ["embedded", pytest.param("temporal", marks=pytest.mark.slow)])
async def test_any_replica_follows_cancels_and_hears_of_another_replicas_work(replicas: Replicas, engine: str) -> None:
    if engine == "temporal":
        replicas.on_temporal(workers=1)
    a, b = replicas.add(), replicas.add()

    # Progress of a run started through replica A streams to a client of replica B.
    run_id = a.rpc("workflow.run", name="six", wait_seconds=0)["run_id"]
    seen: list[tuple[float, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, message))

    async with http_client(b.url) as client:
        answer = await client.call_tool("run_result", {"run_id": run_id, "wait_seconds": 30},
                                        progress_callback=on_progress)
        assert structured(answer)["status"] == "succeeded" and structured(answer)["outputs"] == {"last": "n6"}
        await until(lambda: len(seen) >= 6)
        assert [p for p, _ in seen] == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
        assert seen[0][1] == "n1: succeeded"
        status = structured(await client.call_tool("run_status", {"run_id": run_id}))
        assert status["status"] == "succeeded" and set(status["nodes"]) == {f"n{i}" for i in range(1, 7)}
        listed = structured(await client.call_tool("run_list", {"workflow": "six"}))["runs"]
        assert [r["run_id"] for r in listed] == [run_id]

        # A cancel sent to replica B reaches the run on replica A.
        doomed = a.rpc("workflow.run", name="six", wait_seconds=0)["run_id"]
        await until(lambda: replicas.counts()["n2"] >= 2)
        cancelled = structured(await client.call_tool("run_cancel", {"run_id": doomed}))
        assert cancelled == {"run_id": doomed, "cancelled": True, "status": "cancelled"}
        assert a.rpc("run.status", run_id=doomed)["status"] == "cancelled"
        await asyncio.sleep(0.5)
        assert replicas.counts()["n4"] == 1  # nothing ran after the cancel

    # Replica B's run view lists the run replica A runs and streams its events as they are kept.
    watched = a.rpc("workflow.run", name="six", wait_seconds=0)["run_id"]
    runs = httpx2.get(f"{b.url}/ui/api/runs", timeout=10).json()["runs"]
    assert watched in {run["run_id"] for run in runs}
    streamed: list[tuple[str, str]] = []
    async with httpx2.AsyncClient(timeout=30) as http, http.stream(
            "GET", f"{b.url}/ui/api/runs/{watched}/events") as stream:
        async for line in stream.aiter_lines():
            if line.startswith("event: end"):
                break
            if line.startswith("data: "):
                streamed += [(e["type"], e.get("node_id", "")) for e in json.loads(line[6:])["events"]]
    assert streamed[0] == ("run_started", "") and streamed[-1] == ("run_finished", "")
    assert [node for kind, node in streamed if kind == "node_succeeded"] == [f"n{i}" for i in range(1, 7)]

    # A blueprint registered through replica A: replica B's sessions hear list_changed and can run it.
    changed: list[Any] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changed.append(message)

    async with http_client(b.url, mode="legacy", message_handler=on_message) as listener:
        assert "workflow_fresh" not in {t.name for t in (await listener.list_tools()).tools}
        async with http_client(a.url, token=ADMIN) as admin:
            registered = await admin.call_tool("blueprint_register",
                                               {"blueprint": chain("fresh", ["f1"], 0.0)})
            assert registered.is_error is False, registered.content
        await until(lambda: changed)
        assert "workflow_fresh" in {t.name for t in (await listener.list_tools()).tools}
        ran = structured(await listener.call_tool("workflow_fresh", {}))
        assert ran["status"] == "succeeded" and ran["outputs"] == {"last": "f1"}


async def test_a_question_asked_on_one_replica_is_answered_on_another(replicas: Replicas) -> None:
    a, b = replicas.add(), replicas.add()
    run_id = a.rpc("workflow.run", name="gate", wait_seconds=0)["run_id"]
    await until(lambda: b.rpc("run.status", run_id=run_id)["status"] == "input_required")
    async with http_client(b.url) as client:
        answered = structured(await client.call_tool(
            "run_respond", {"run_id": run_id, "node": "ok", "answer": {"approved": True}, "wait_seconds": 10}))
        assert answered["status"] == "succeeded" and answered["outputs"] == {"shipped": "shipped"}, answered
    assert a.rpc("run.status", run_id=run_id)["status"] == "succeeded"
    assert replicas.counts()["shipped"] == 1


async def test_a_multi_round_answer_may_come_back_through_another_replica(replicas: Replicas) -> None:
    a, b = replicas.add("--stateless"), replicas.add("--stateless")
    body, headers = stateless_tool_call("workflow_gate", {})
    body["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"] = {"elicitation": {"form": {}}}
    async with httpx2.AsyncClient(timeout=30) as http:
        first = answer_of(await http.post(f"{a.url}/mcp", json=body, headers=headers))["result"]
        assert first["resultType"] == "input_required", first
        body["params"]["requestState"] = first["requestState"]  # sealed by replica A, opened by replica B
        body["params"]["inputResponses"] = {key: {"action": "accept", "content": {"approved": True}}
                                            for key in first["inputRequests"]}
        second = answer_of(await http.post(f"{b.url}/mcp", json=body, headers=headers))["result"]
    assert second["structuredContent"]["status"] == "succeeded", second
    assert second["structuredContent"]["outputs"] == {"shipped": "shipped"}
    assert replicas.counts()["shipped"] == 1


def answer_of(response: httpx2.Response) -> dict[str, Any]:
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        for line in response.text.splitlines():
            if line.startswith("data:") and ('"result"' in line or '"error"' in line):
                return dict(json.loads(line[5:]))
        raise AssertionError(response.text)
    return dict(response.json())


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["embedded", "temporal"])
async def test_300_calls_over_three_replicas_survive_a_sigkill_and_restart(replicas: Replicas, engine: str) -> None:
    if engine == "temporal":
        replicas.on_temporal(workers=2)
    servers = [replicas.add("--stateless", "--wait-seconds", "55") for _ in range(3)]
    turn = itertools.count()
    finished: dict[str, dict[str, Any]] = {}
    retries: Counter[str] = Counter()  # why a call was sent again
    in_flight = asyncio.Semaphore(24)

    async def call(http: httpx2.AsyncClient, number: int) -> None:
        key = f"call-{number}"
        async with in_flight:
            for _ in range(100):
                server = servers[next(turn) % len(servers)]  # round robin, as a plain load balancer does
                body, headers = stateless_tool_call("workflow_relay", {"tag": key, "idempotency_key": key})
                try:
                    response = await http.post(f"{server.url}/mcp", json=body, headers=headers)
                except httpx2.HTTPError as exc:  # its replica died: the same key again, elsewhere
                    retries[type(exc).__name__] += 1
                    await asyncio.sleep(0.2)
                    continue
                answer = answer_of(response)
                envelope = answer.get("result", {}).get("structuredContent") or {}
                if envelope.get("status") == "succeeded":
                    finished[key] = envelope
                    return
                retries[f"{response.status_code} {str(answer)[:300]}"] += 1  # an answer, but not the run's end
                await asyncio.sleep(0.2)

    async with httpx2.AsyncClient(timeout=60) as http:
        started = time.monotonic()
        calls = [asyncio.create_task(call(http, number)) for number in range(300)]
        await until(lambda: len(finished) >= 100 or retries.total() > 50, timeout=60)
        assert len(finished) >= 100, retries.most_common(3)
        victim = servers[1]
        victim.kill()
        killed_at = len(finished)
        await asyncio.sleep(1.0)  # calls sent its way fail over to the others meanwhile
        await asyncio.to_thread(victim.start)  # a new process (and port) on the same state
        await asyncio.gather(*calls)
        elapsed = time.monotonic() - started

        assert len(finished) == 300, f"{300 - len(finished)} calls failed: {retries.most_common(3)}"
        run_ids = {envelope["run_id"] for envelope in finished.values()}
        assert len(run_ids) == 300  # one run per key, retries included
        assert retries.total(), "the kill interrupted no call"
        assert all(envelope["outputs"] == {"last": "r3"} for envelope in finished.values())

        # Every run's record, from every replica; the store holds exactly one run per call.
        for server in servers:
            body, headers = stateless_tool_call("run_list", {"workflow": "relay", "limit": 500})
            listed = json.loads(answer_of(await http.post(f"{server.url}/mcp", json=body, headers=headers))
                                ["result"]["content"][0]["text"])["runs"]
            assert {run["run_id"] for run in listed} == run_ids
            for run_id in run_ids:
                body, headers = stateless_tool_call("run_status", {"run_id": run_id})
                record = answer_of(await http.post(f"{server.url}/mcp", json=body, headers=headers))
                assert record["result"]["structuredContent"]["status"] == "succeeded"
    counts = replicas.counts()
    assert all(counts[label] >= 300 for label in ("r1", "r2", "r3"))
    # Finished nodes are not run again, except one that ended within the writer's last few milliseconds
    # before the kill: an interrupted run repeats at most that one and the node in flight.
    interrupted = retries.total() - retries["ConnectError"]  # calls refused at connect started nothing
    assert sum(counts.values()) - 900 <= 2 * interrupted
    print(f"\n{engine}: 300 calls in {elapsed:.1f} s; replica killed after {killed_at}; {retries.total()} retried calls; "
          f"nodes run again: {sum(counts.values()) - 900}; retried because: {dict(retries)}")
