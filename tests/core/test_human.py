"""`human` nodes: a question (or an approval) waits on the orchestrator's desk, the run is `input_required`,
`Orchestrator.respond` answers it (checked, journaled), a timeout takes `on_timeout`, and a restart while
waiting asks again with the first deadline, or takes the answer the journal already holds."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from ice_mcp import Orchestrator, Registry, Settings
from ice_mcp.core.questions import Questions
from ice_mcp.errors import AnswerInvalid, NotWaiting, UnknownName

from .helpers import blueprint, root_error, tool

ROOT = Path(__file__).resolve().parents[2]
GATE = blueprint(
    {"id": "ok", "type": "human", "approval": "Ship it to {{ inputs.customer }}?"},
    tool("ship", "render_template", {"template": "shipped to {{ inputs.customer }}"}, dependencies=["ok"]),
    name="gate", inputs={"type": "object", "properties": {"customer": {"type": "string"}}},
    outputs={"shipped": "{{ ship.text }}", "note": "{{ ok.answer.reason }}"})
SIZE = {"type": "object", "properties": {"size": {"type": "integer", "minimum": 1}}, "required": ["size"]}


async def asked(orc: Orchestrator, run_id: str, node: str = "ok", timeout: float = 5.0) -> dict[str, Any]:
    """The question `node` asks, once the run is `input_required` with it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        record = orc.get_run(run_id)
        if record is not None and record.status == "input_required" and node in record.questions:
            return record.questions[node]
        await asyncio.sleep(0.01)
    raise AssertionError(f"run {run_id} never asked at {node}: {orc.get_run(run_id)}")


async def test_an_approval_gate_waits_then_goes_on(orc: Orchestrator) -> None:
    handle = await orc.start(GATE, {"customer": "ACME"})
    question = await asked(orc, handle.run_id)
    assert question["question"] == "Ship it to ACME?" and question["approval"] is True
    assert question["schema"]["required"] == ["approved"]
    assert handle.record.nodes["ship"].status == "pending"  # nothing behind the gate ran
    stored = orc.store.get(handle.run_id) if orc.store is not None else None
    assert stored is not None and stored.status == "input_required" and "ok" in stored.questions

    await orc.respond(handle.run_id, "ok", {"approved": True, "reason": "paid"}, by="test")
    record = await handle.wait(5)
    assert record.status == "succeeded", record.error
    assert record.outputs == {"shipped": "shipped to ACME", "note": "paid"}
    output = record.nodes["ok"].output
    assert output["answer"] == {"approved": True, "reason": "paid"} and output["answered_by"] == "test"
    assert output["timed_out"] is False and output["answered_at"].endswith("+00:00")
    assert record.questions == {}
    kinds = [e["type"] for e in orc.run_events(handle.run_id)]
    assert kinds.index("node_waiting") < kinds.index("node_answered") < kinds.index("run_finished")


async def test_a_rejection_fails_the_gate_with_its_reason(orc: Orchestrator) -> None:
    handle = await orc.start(GATE, {"customer": "ACME"})
    await asked(orc, handle.run_id)
    await orc.respond(handle.run_id, "ok", {"approved": False, "reason": "not paid yet"})
    record = await handle.wait(5)
    assert record.status == "failed"
    cause = root_error(record.error or {})
    assert cause["code"] == "rejected" and "not paid yet" in cause["message"]
    assert record.nodes["ship"].status in ("cancelled", "pending")


async def test_a_wrong_answer_is_refused_and_the_question_stays(orc: Orchestrator) -> None:
    bp = blueprint({"id": "ask", "type": "human", "prompt": "How many?", "schema": SIZE}, name="sizes")
    handle = await orc.start(bp)
    await asked(orc, handle.run_id, "ask")
    with pytest.raises(AnswerInvalid) as refused:
        await orc.respond(handle.run_id, "ask", {"size": 0})
    assert refused.value.code == "invalid_answer" and "size" in refused.value.problems[0]
    with pytest.raises(NotWaiting) as elsewhere:
        await orc.respond(handle.run_id, "nobody", {"size": 1})
    assert elsewhere.value.details == {"waiting": ["ask"]}
    with pytest.raises(UnknownName):
        await orc.respond("no-such-run", "ask", {"size": 1})
    assert handle.record.status == "input_required"
    await orc.respond(handle.run_id, "ask", {"size": 3})
    record = await handle.wait(5)
    assert record.status == "succeeded" and record.nodes["ask"].output["answer"] == {"size": 3}
    with pytest.raises(NotWaiting):  # answered already
        await orc.respond(handle.run_id, "ask", {"size": 4})


async def test_a_timeout_takes_the_default_or_fails(orc: Orchestrator) -> None:
    default = blueprint({"id": "ok", "type": "human", "approval": "Go?", "timeout_seconds": 0.2,
                         "on_timeout": {"default": {"approved": True, "reason": "silence is consent"}}},
                        name="lenient")
    record = await orc.run(default)
    assert record.status == "succeeded", record.error
    assert record.nodes["ok"].output == {"answer": {"approved": True, "reason": "silence is consent"},
                                         "answered_by": None, "answered_at": None, "timed_out": True}

    strict = blueprint({"id": "ask", "type": "human", "prompt": "Name?", "timeout_seconds": 0.2}, name="strict")
    started = time.monotonic()
    failed = await orc.run(strict)
    assert failed.status == "failed" and root_error(failed.error or {})["code"] == "timeout"
    assert time.monotonic() - started < 5


async def test_several_questions_wait_at_once(orc: Orchestrator) -> None:
    """Two questions wait at once (each an awaited future), answered in any order; a loop asks per item."""
    bp = blueprint({"id": "a", "type": "human", "prompt": "A?"}, {"id": "b", "type": "human", "prompt": "B?"},
                   {"id": "each", "type": "loop", "items": "{{ [1, 2] }}", "body": [
                       {"id": "q", "type": "human", "prompt": "Item {{ item }}?"}], "dependencies": ["a", "b"]},
                   name="many", max_parallel=2)
    handle = await orc.start(bp)
    await asked(orc, handle.run_id, "a")
    await asked(orc, handle.run_id, "b")
    await orc.respond(handle.run_id, "b", {"answer": "bee"})
    assert handle.record.status == "input_required" and list(handle.record.questions) == ["a"]
    await orc.respond(handle.run_id, "a", {"answer": "ay"})
    for item in range(2):
        question = await asked(orc, handle.run_id, f"each[{item}].q")
        assert question["question"] == f"Item {item + 1}?"
        await orc.respond(handle.run_id, f"each[{item}].q", {"answer": str(item)})
    record = await handle.wait(5)
    assert record.status == "succeeded", record.error


async def test_a_declined_question_fails_and_a_declined_approval_rejects(orc: Orchestrator) -> None:
    handle = await orc.start(blueprint({"id": "ask", "type": "human", "prompt": "Name?"}, name="declined"))
    await asked(orc, handle.run_id, "ask")
    await orc.respond(handle.run_id, "ask", None, by="elicitation", declined=True)
    record = await handle.wait(5)
    assert record.status == "failed" and root_error(record.error or {})["code"] == "declined"

    gate = await orc.start(GATE, {"customer": "ACME"})
    await asked(orc, gate.run_id)
    await orc.respond(gate.run_id, "ok", None, declined=True)
    record = await gate.wait(5)
    assert root_error(record.error or {})["code"] == "rejected"


async def test_a_restart_while_waiting_asks_again_with_the_first_deadline(registry: Registry,
                                                                         settings: Settings) -> None:
    bp = blueprint({"id": "first", "type": "human", "prompt": "First?"},
                   {"id": "ok", "type": "human", "approval": "Go?", "timeout_seconds": 600,
                    "dependencies": ["first"]}, name="two")
    before = Orchestrator(registry=registry, settings=settings)
    handle = await before.start(bp)
    await asked(before, handle.run_id, "first")
    await before.respond(handle.run_id, "first", {"answer": "one"})
    original = await asked(before, handle.run_id, "ok")
    await before.aclose(suspend=True)  # the server stops while `ok` waits

    after = Orchestrator(registry=registry, settings=settings)
    try:
        assert after.recover_interrupted_runs() == 1
        again = await asked(after, handle.run_id, "ok")
        assert again["asked_at"] == original["asked_at"] and again["deadline"] == original["deadline"]
        await after.respond(handle.run_id, "ok", {"approved": True})
        resumed = after.get_handle(handle.run_id)
        assert resumed is not None
        record = await resumed.wait(5)
        assert record.status == "succeeded", record.error
        assert record.nodes["first"].output["answer"] == {"answer": "one"}  # reused, not asked again
        waits = [e["node_id"] for e in after.run_events(handle.run_id) if e["type"] == "node_waiting"]
        assert waits == ["first", "ok", "ok"]
    finally:
        await after.aclose()


def test_the_desk_reads_a_journaled_answer() -> None:
    """An answer journaled before a crash (but not the node's end) is taken without asking again."""
    desk = Questions()
    desk.restore("r1", [
        {"type": "node_waiting", "node_id": "loop[1].ok", "attempt": 2, "data": {"asked_at": 100.0}},
        {"type": "node_answered", "node_id": "loop[1].ok", "attempt": 2,
         "data": {"answer": {"approved": True}, "answered_by": "tasks/update", "answered_at": 150.0}},
        {"type": "node_waiting", "node_id": "other", "attempt": 1, "data": {"asked_at": 120.0}},
    ])
    asked_at, answer = desk.earlier("r1", "loop[1].ok", 2)
    assert asked_at == 100.0 and answer is not None and answer.value == {"approved": True} and answer.at == 150.0
    assert desk.earlier("r1", "loop[1].ok", 1) == (None, None)  # another attempt asks anew
    assert desk.earlier("r1", "other", 1) == (120.0, None)
    desk.forget("r1")
    assert desk.earlier("r1", "other", 1) == (None, None)


@pytest.mark.parametrize(("node", "code"), [
    ({"id": "a", "type": "human", "prompt": "?", "schema": {"type": "string"}}, "invalid_schema"),
    ({"id": "a", "type": "human", "prompt": "?", "schema": {"type": "object", "properties": {"n": {"pattern": "(a)\\1"}}}},
     "unsupported_pattern"),
    ({"id": "a", "type": "human", "approval": "?", "on_timeout": {"default": {"approved": "yes"}}}, "invalid_default"),
    ({"id": "a", "type": "human", "prompt": "?", "approval": "?"}, "schema"),
    ({"id": "a", "type": "human"}, "schema"),
])
def test_validation_names_what_is_wrong(orc: Orchestrator, node: dict[str, Any], code: str) -> None:
    report = orc.validate(blueprint(node, name="bad"))
    assert not report.ok
    assert code in {issue.code for issue in report.errors}, report.errors


def test_the_command_line_reads_answers_from_stdin(tmp_path: Path) -> None:
    """`ice-mcp run` answers a question from a JSON line on stdin (a prompt on a terminal)."""
    path = tmp_path / "gate.json"
    path.write_text(json.dumps(GATE))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "ICE_MCP_DATA_DIR": str(tmp_path / "data"),
           "ICE_MCP_WORKSPACE": str(tmp_path)}
    command = [sys.executable, "-m", "ice_mcp", "run", str(path), "-i", "customer=ACME", "--no-progress"]
    done = subprocess.run(command, input='{"approved": true, "reason": "ok by me"}\n', capture_output=True,
                          text=True, env=env, cwd=tmp_path, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    record = json.loads(done.stdout)
    assert record["outputs"] == {"shipped": "shipped to ACME", "note": "ok by me"}
    assert record["nodes"]["ok"]["output"]["answered_by"] == "terminal"
    assert "ok asks: Ship it to ACME?" in done.stderr

    silent = subprocess.run(command, input="", capture_output=True, text=True, env=env, cwd=tmp_path,
                            timeout=120, check=False)
    assert silent.returncode == 1 and "declined" in silent.stderr  # nobody else can answer: not a hang
