"""`human` nodes on Temporal: the question waits in the run's workflow (no worker held), any server answers it
through a signal, a nested workflow's question is answered the same way, and a deadline is a durable timer."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from temporal_cluster import Cluster

from ice_mcp import Orchestrator
from ice_mcp.engines.base import RunHandle
from ice_mcp.errors import AnswerInvalid

ASK = {
    "name": "ask_then_use",
    "nodes": [
        {"id": "fetch", "type": "code", "code": "return {'n': 4}"},
        {"id": "ask", "type": "human", "prompt": "Scale {{ fetch.result.n }} by?", "dependencies": ["fetch"],
         "schema": {"type": "object", "properties": {"factor": {"type": "integer"}}, "required": ["factor"]}},
        {"id": "use", "type": "code", "code": "return inputs['n'] * inputs['f']",
         "inputs": {"n": "{{ fetch.result.n }}", "f": "{{ ask.answer.factor }}"}},
    ],
    "outputs": {"scaled": "{{ use.result }}", "by": "{{ ask.answered_by }}"},
}
NESTED_ASK = {
    "name": "nested_ask",
    "nodes": [{"id": "inner", "type": "workflow", "workflow_ref": "ask_then_use"}],
    "outputs": {"scaled": "{{ inner.scaled }}"},
}
TIMES_OUT = {
    "name": "times_out",
    "nodes": [{"id": "gate", "type": "human", "approval": "Ship it?", "timeout_seconds": 1,
               "on_timeout": {"default": {"approved": True, "reason": "nobody objected"}}}],
    "outputs": {"answer": "{{ gate.answer }}", "timed_out": "{{ gate.timed_out }}"},
}


async def waiting(orc: Orchestrator, handle: RunHandle, path: str) -> dict[str, Any]:
    """The question `path` asks, once the server following the run has it."""
    async with asyncio.timeout(30):
        while path not in handle.record.questions:
            await asyncio.sleep(0.05)
    return handle.record.questions[path]


async def test_a_human_node_waits_in_the_workflow_and_takes_an_answer(cluster: Cluster) -> None:
    for orc in (cluster.client, cluster.worker, cluster.embedded):
        orc.register_blueprint(ASK)
    handle = await cluster.client.start("ask_then_use", {})
    question = await waiting(cluster.client, handle, "ask")
    assert question["question"] == "Scale 4 by?"
    assert handle.record.status == "input_required"
    # Every server reads who waits from the store (the worker keeps the record's questions).
    stored = cluster.client.store.get(handle.run_id)
    assert stored is not None and stored.status == "input_required" and "ask" in stored.questions
    await cluster.client.respond(handle.run_id, "ask", {"factor": 3}, by="ana")
    record = await asyncio.wait_for(handle.wait(), 60)
    assert record.status == "succeeded", record.error
    assert record.outputs == {"scaled": 12, "by": "ana"}
    kinds = [e["type"] for e in cluster.client.store.events(handle.run_id) if e.get("node_id") == "ask"]
    assert kinds == ["node_started", "node_waiting", "node_answered", "node_succeeded"]
    embedded = await cluster.embedded.start("ask_then_use", {})
    await waiting(cluster.embedded, embedded, "ask")
    await cluster.embedded.respond(embedded.run_id, "ask", {"factor": 3}, by="ana")
    assert (await embedded.wait()).outputs == record.outputs


async def test_another_server_answers_a_nested_question_and_a_wrong_answer_is_refused(cluster: Cluster) -> None:
    for orc in (cluster.client, cluster.worker):
        orc.register_blueprint(ASK)
        orc.register_blueprint(NESTED_ASK)
    other = Orchestrator(registry=cluster.client.registry, settings=cluster.client.settings)
    try:
        handle = await cluster.client.start("nested_ask", {})
        await waiting(cluster.client, handle, "inner.ask")
        with pytest.raises(AnswerInvalid):  # checked by the server that got it, against the stored question
            await other.respond(handle.run_id, "inner.ask", {"factor": "three"})
        record = await other.respond(handle.run_id, "inner.ask", {"factor": 5}, by="bo")
        assert "inner.ask" not in record.questions
        done = await asyncio.wait_for(handle.wait(), 60)
        assert done.status == "succeeded", done.error
        assert done.outputs == {"scaled": 20}
    finally:
        await other.aclose()


async def test_a_deadline_is_a_timer_of_the_workflow(cluster: Cluster) -> None:
    records = [await orc.run(TIMES_OUT, {}) for orc in (cluster.embedded, cluster.client)]
    for record in records:
        assert record.status == "succeeded", record.error
        assert record.outputs == {"answer": {"approved": True, "reason": "nobody objected"}, "timed_out": True}
