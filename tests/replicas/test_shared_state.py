"""Two orchestrators on one Redis state, as two replicas would be: each answers for the other's runs,
follows their events, cancels them through the store, takes over a gone owner's run, and shares
registered blueprints and per-caller spend."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from ice_mcp import NodeResult, Orchestrator, Registry, Settings
from ice_mcp.errors import AnswerInvalid, NotWaiting
from ice_mcp.store.events import Event

STEP = 0.15
ROOT = Path(__file__).resolve().parents[2]


async def nap(label: str, seconds: float = STEP) -> dict[str, Any]:
    await asyncio.sleep(seconds)
    return {"label": label}


def paid(cost: float) -> NodeResult:
    return NodeResult({"paid": cost}, cost_usd=cost)


def chain(name: str, count: int, seconds: float = STEP) -> dict[str, Any]:
    nodes = [{"id": f"n{i}", "type": "tool", "tool_name": "nap", "tool_args": {"label": f"n{i}", "seconds": seconds},
              **({"dependencies": [f"n{i - 1}"]} if i else {})} for i in range(count)]
    return {"name": name, "nodes": nodes, "outputs": {"last": f"{{{{ n{count - 1}.label }}}}"}}


class Replicas:
    """Orchestrators sharing one state URL, each with its own data folder and registry."""

    def __init__(self, root: Path, state_url: str) -> None:
        self.root, self.state_url = root, state_url
        self.made: list[Orchestrator] = []

    async def start(self, **settings: Any) -> Orchestrator:
        registry = Registry()
        registry.add_tool(nap)
        registry.add_tool(paid)
        folder = self.root / f"replica{len(self.made)}"
        orc = Orchestrator(registry=registry, settings=Settings(
            data_dir=folder, workspace=self.root, state_url=self.state_url, lease_seconds=3.0, **settings))
        orc.register_blueprint(chain("three", 3), origin="file")
        orc.recover_interrupted_runs()  # as a server does: signals, leases, kept blueprints
        self.made.append(orc)
        return orc

    async def close(self) -> None:
        for orc in self.made:
            await orc.aclose()


@pytest.fixture
async def replicas(tmp_path: Path, shared_url: str) -> AsyncIterator[Replicas]:
    made = Replicas(tmp_path, shared_url)
    yield made
    await made.close()


async def until(check: Callable[[], Any], timeout: float = 10.0) -> Any:
    for _ in range(int(timeout / 0.02)):
        if result := check():
            return result
        await asyncio.sleep(0.02)
    raise AssertionError("timed out")


async def test_any_replica_answers_for_a_run_and_streams_its_events(replicas: Replicas) -> None:
    a, b = await replicas.start(), await replicas.start()
    handle = await a.start("three", {})
    await until(lambda: b.get_run(handle.run_id))
    assert b.get_run(handle.run_id).status == "running"  # type: ignore[union-attr]
    assert [r.run_id for r in b.list_runs(status="running")] == [handle.run_id]

    followed = b.watch(handle.run_id)
    assert followed is not None and followed.plan is None and not followed.done  # followed through the store
    heard: list[Event] = []
    followed.subscribe(heard.append)
    # Mid-run, the owner's snapshots show the nodes done so far on the other replica.
    await until(lambda: (r := b.get_run(handle.run_id)) and r.nodes.get("n0") and r.nodes["n0"].status == "succeeded",
                timeout=5)
    record = await followed.wait(timeout=10)
    assert record.status == "succeeded" and record.outputs == {"last": "n2"}
    assert [e.type for e in heard if e.node_id is None] == ["run_started", "run_finished"]
    assert [e.node_id for e in heard if e.type == "node_succeeded"] == ["n0", "n1", "n2"]
    assert [e.seq for e in heard] == list(range(len(heard)))
    assert b.run_events(handle.run_id) == [e.to_dict() for e in handle.events.events]
    assert b.get_run(handle.run_id).to_dict() == handle.record.to_dict()  # type: ignore[union-attr]


async def test_a_wait_that_runs_out_answers_running_with_the_latest_record(replicas: Replicas) -> None:
    a, b = await replicas.start(), await replicas.start()
    handle = await a.start(chain("long", 2, seconds=1.5), {})
    followed = b.watch(handle.run_id)
    assert followed is not None
    record = await followed.wait(timeout=0.2)
    assert record.status == "running"
    assert (await followed.wait(timeout=10)).status == "succeeded"


async def test_cancel_on_one_replica_stops_the_run_on_its_owner(replicas: Replicas) -> None:
    a, b = await replicas.start(), await replicas.start()
    handle = await a.start(chain("long", 2, seconds=30), {})
    await until(lambda: any(e.type == "node_started" for e in handle.events.events))
    assert await b.cancel(handle.run_id)
    assert handle.done and handle.record.status == "cancelled"
    assert b.get_run(handle.run_id).status == "cancelled"  # type: ignore[union-attr]
    assert not await b.cancel(handle.run_id)  # over: nothing to cancel
    assert not await b.cancel("no-such-run")


async def test_the_same_key_on_another_replica_attaches_to_the_run(replicas: Replicas) -> None:
    a, b = await replicas.start(), await replicas.start()
    first = await a.start("three", {}, idempotency_key="k-1")
    await until(lambda: b.get_run(first.run_id))
    again = await b.start("three", {}, idempotency_key="k-1")
    assert again.run_id == first.run_id and again.plan is None  # followed: its owner runs it
    assert (await again.wait(timeout=10)).status == "succeeded"
    done = await b.start("three", {}, idempotency_key="k-1")
    assert done.run_id == first.run_id and done.done
    assert len(b.list_runs(workflow="three")) == 1


async def test_a_gone_owners_run_is_taken_over_by_the_replica_asked_for_it(replicas: Replicas) -> None:
    a, b = await replicas.start(), await replicas.start()
    handle = await a.start("three", {}, idempotency_key="k-2")
    await until(lambda: any(e.type == "node_succeeded" for e in handle.events.events))
    await a.aclose(suspend=True)  # as a stopping server does: the run stays `running`, the lease is given up
    again = await b.start("three", {}, idempotency_key="k-2")
    assert again.run_id == handle.run_id and again.plan is not None  # taken over: it runs here
    record = await again.wait(timeout=10)
    assert record.status == "succeeded"
    events = b.run_events(handle.run_id)
    assert [e["type"] for e in events].count("run_resumed") == 1
    assert events[-1]["type"] == "run_finished" and events[-1]["data"]["status"] == "succeeded"
    assert [e["node_id"] for e in events if e["type"] == "node_succeeded"] == ["n0", "n1", "n2"]


async def test_blueprints_registered_on_one_replica_reach_the_others(replicas: Replicas) -> None:
    a, b = await replicas.start(), await replicas.start()
    changes: list[str] = []
    b.registry.subscribe(lambda kind, name: changes.append(f"{kind}:{name}"))
    a.register_blueprint(chain("fresh", 1))
    await until(lambda: "fresh" in b.registry.workflows)
    assert b.registry.workflows["fresh"].version == 1 and changes == ["workflow:fresh"]
    assert (await b.run("fresh", {})).status == "succeeded"

    a.register_blueprint({**chain("fresh", 2), "description": "two steps now"})
    await until(lambda: b.registry.workflows["fresh"].version == 2)
    assert b.registry.workflows["fresh"].blueprint.description == "two steps now"
    assert a.remove_workflow("fresh")
    await until(lambda: "fresh" not in b.registry.workflows)
    assert "three" in b.registry.workflows  # loaded from a file: not the store's to remove
    late = await replicas.start()  # a replica started later restores what is kept
    assert "fresh" not in late.registry.workflows
    a.register_blueprint(chain("again", 1))
    await until(lambda: "again" in late.registry.workflows and "again" in b.registry.workflows)


async def test_a_callers_spend_is_one_budget_across_replicas(replicas: Replicas) -> None:
    a, b = await replicas.start(caller_budget_usd=1.0), await replicas.start(caller_budget_usd=1.0)
    bill = {"name": "bill", "inputs": {"type": "object", "properties": {"c": {"type": "number"}}},
            "nodes": [{"id": "p", "type": "tool", "tool_name": "paid", "tool_args": {"cost": "{{ inputs.c }}"}}]}
    assert (await a.run(bill, {"c": 0.6}, caller="alice")).status == "succeeded"
    second = await b.run(bill, {"c": 0.6}, caller="alice")
    assert second.status == "over_budget"
    assert a.caller_spend("alice").cost_usd == pytest.approx(1.2)  # type: ignore[union-attr]
    assert (await b.run(bill, {"c": 0.6}, caller="bob")).status == "succeeded"


async def test_the_command_line_reads_runs_from_the_shared_store(replicas: Replicas) -> None:
    a = await replicas.start()
    record = await a.run("three", {})
    assert a.store is not None and a.store.flush()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "ICE_MCP_DATA_DIR": str(replicas.root / "cli")}
    listed = subprocess.run([sys.executable, "-m", "ice_mcp", "runs", "list", "--state", replicas.state_url],
                            capture_output=True, text=True, timeout=60, env=env, check=False)
    assert listed.returncode == 0, listed.stderr
    assert record.run_id in listed.stdout and "succeeded" in listed.stdout
    wrong = subprocess.run([sys.executable, "-m", "ice_mcp", "runs", "list", "--state", "ftp://nowhere"],
                           capture_output=True, text=True, timeout=60, env=env, check=False)
    assert wrong.returncode == 1 and "invalid_state_url" in wrong.stderr and "Traceback" not in wrong.stderr


GATE = {"name": "gate", "nodes": [
    {"id": "ok", "type": "human", "approval": "Ship it?"},
    {"id": "ship", "type": "tool", "tool_name": "nap", "tool_args": {"label": "shipped", "seconds": 0},
     "dependencies": ["ok"]}], "outputs": {"shipped": "{{ ship.label }}", "note": "{{ ok.answer.reason }}"}}


def asks(orc: Orchestrator, run_id: str) -> Callable[[], bool]:
    """Whether `orc` sees the gate's question of run `run_id`."""
    return lambda: (record := orc.get_run(run_id)) is not None and "ok" in record.questions


@pytest.fixture(params=["redis", "sqlite", "postgresql"])
async def two_replicas(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[tuple[Orchestrator, Orchestrator]]:
    """Two replicas on one shared store: Redis, a SQLite file or PostgreSQL."""
    made = Replicas(tmp_path, f"sqlite:///{tmp_path / 'shared.sqlite3'}" if request.param == "sqlite"
                    else str(request.getfixturevalue("redis_url" if request.param == "redis" else "postgres_url")))
    try:
        yield await made.start(), await made.start()
    finally:
        await made.close()


async def test_a_question_asked_on_one_replica_is_answered_through_another(
        two_replicas: tuple[Orchestrator, Orchestrator]) -> None:
    a, b = two_replicas
    handle = await a.start(GATE, {})
    await until(asks(b, handle.run_id))
    followed = b.watch(handle.run_id)
    assert followed is not None and followed.record.status == "input_required"

    with pytest.raises(AnswerInvalid):  # checked on the replica that received it, against the kept schema
        await b.respond(handle.run_id, "ok", {"approved": "yes"})
    kept = await b.respond(handle.run_id, "ok", {"approved": True, "reason": "paid"}, by="mcp:run_respond")
    assert "ok" not in kept.questions  # the run that asked has it journaled when this returns
    record = await handle.wait(10)
    assert record.status == "succeeded", record.error
    assert record.outputs == {"shipped": "shipped", "note": "paid"}
    assert record.nodes["ok"].output["answered_by"] == "mcp:run_respond"
    assert (await followed.wait(10)).status == "succeeded"
    with pytest.raises(NotWaiting):  # answered already
        await b.respond(handle.run_id, "ok", {"approved": True})


async def test_a_follower_asked_right_after_an_answer_sees_it(two_replicas: tuple[Orchestrator, Orchestrator]) -> None:
    """The owner answers; a wait on the replica that follows the run, asked at once, does not return the question
    its follower read before (it polls the journal every 50 ms): it reads what the journal holds first."""
    a, b = two_replicas
    for _ in range(3):  # the poll's moment against the answer's varies: each round must see the answer
        run_id = (await a.start(GATE, {})).run_id
        await until(asks(b, run_id))
        followed = b.watch(run_id)
        assert followed is not None and followed.record.status == "input_required"
        await a.respond(run_id, "ok", {"approved": True})
        record = await followed.wait(10, or_question=True)
        assert record.status == "succeeded", (record.status, record.questions)
