"""Webhooks on an in-process `serve --http` with a real HTTP client: signed by the reference `standardwebhooks`
package (an independent implementation), GitHub-style and bearer; redeliveries, refusals, rotation, mapping."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import time
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import httpx2
import pytest
from mcp_helpers import http_server, make_options
from standardwebhooks import Webhook

from ice_mcp import Orchestrator
from ice_mcp.errors import IceError
from ice_mcp.signing import standard_signature

ECHO = {"name": "echo", "inputs": {"type": "object", "properties": {"topic": {"type": "string"}},
                                    "required": ["topic"], "additionalProperties": False},
        "nodes": [{"id": "e", "type": "tool", "tool_name": "render_template", "tool_args": {
            "template": "{{ trigger.kind }}:{{ trigger.delivery_id }}:{{ inputs.topic }}"}}],
        "outputs": {"text": "{{ e.text }}"}}


def signed(secret: str, body: bytes, *, delivery: str | None = None, at: float | None = None) -> dict[str, str]:
    """Standard Webhooks headers made by the reference package (which signs text only: raw bytes that are no
    UTF-8 are signed as the spec says, over the bytes)."""
    delivery = delivery or f"msg_{uuid.uuid4().hex}"
    moment = datetime.fromtimestamp(at if at is not None else time.time(), UTC)
    try:
        signature = Webhook(secret).sign(delivery, moment, body.decode())
    except UnicodeDecodeError:
        signature = standard_signature(secret, delivery, str(int(moment.timestamp())), body)
    return {"webhook-id": delivery, "webhook-timestamp": str(int(moment.timestamp())),
            "webhook-signature": signature, "content-type": "application/json"}


@pytest.fixture
async def served(orc: Orchestrator) -> AsyncIterator[tuple[str, httpx2.AsyncClient]]:
    orc.register_blueprint(ECHO)
    async with http_server(orc, make_options()) as url, httpx2.AsyncClient(timeout=30) as http:
        yield url, http


async def test_a_signed_delivery_starts_one_run_and_a_redelivery_answers_the_same_run(
        orc: Orchestrator, served: tuple[str, httpx2.AsyncClient]) -> None:
    url, http = served
    hook = orc.hooks.create(workflow="echo", hook_id="gh-issues")
    assert hook["secret"].startswith("whsec_") and hook["url"] == f"{url}/hooks/gh-issues"
    assert "secret" not in json.dumps(orc.hooks.list()).replace('"secrets"', "")
    body = json.dumps({"topic": "ice"}).encode()
    headers = signed(hook["secret"], body, delivery="msg_1")
    first = await http.post(hook["url"], content=body, headers=headers)
    assert first.status_code == 202, first.text
    run_id = first.json()["run_id"]
    assert first.headers["location"] == first.json()["status_url"] == f"{url}/ui/api/runs/{run_id}"
    waited = await http.post(hook["url"] + "?wait=10", content=body, headers=headers)  # a redelivery
    assert waited.status_code == 200 and waited.json()["run_id"] == run_id
    assert waited.json()["outputs"] == {"text": "webhook:msg_1:ice"}
    assert [r.run_id for r in orc.list_runs(workflow="echo")] == [run_id]  # one run for both
    fresh = await http.post(hook["url"] + "?wait=10", content=body, headers=signed(hook["secret"], body))
    assert fresh.status_code == 200 and fresh.json()["run_id"] != run_id


async def test_refusals_are_clean_and_run_nothing(orc: Orchestrator, served: tuple[str, httpx2.AsyncClient]) -> None:
    url, http = served
    hook = orc.hooks.create(workflow="echo", hook_id="strict")
    secret, target = hook["secret"], hook["url"]
    body = json.dumps({"topic": "ice"}).encode()
    flipped = bytes([body[0] ^ 1]) + body[1:]
    cases = [
        (flipped, signed(secret, body), 401),  # a flipped byte
        (body, signed(secret, body, at=time.time() - 301), 401),  # a timestamp 301 s old
        (body, {"content-type": "application/json"}, 401),  # no signature headers
        (body, signed("whsec_" + "A" * 44, body), 401),  # another secret
        (b"\xff\xfe{}", signed(secret, b"\xff\xfe{}"), 422),  # signed, but not UTF-8
        (b"{not json", signed(secret, b"{not json"), 422),
        (b"[1, 2]", signed(secret, b"[1, 2]"), 422),  # not an object
        (json.dumps({"topic": 5}).encode(), signed(secret, json.dumps({"topic": 5}).encode()), 422),
        (body, {**signed(secret, body), "content-type": "text/plain"}, 415),
    ]
    for content, headers, status in cases:
        answer = await http.post(target, content=content, headers=headers)
        assert answer.status_code == status, (content[:20], answer.text)
        assert "error" in answer.json() and "Traceback" not in answer.text
    unverified = await http.post(target, content=flipped, headers=signed(secret, body))
    assert unverified.json() == {"error": {"code": "unverified",
                                           "message": "the delivery's signature does not check out"}}
    issues = (await http.post(target, content=json.dumps({"topic": 5}).encode(),
                              headers=signed(secret, json.dumps({"topic": 5}).encode()))).json()["error"]["issues"]
    assert issues and issues[0]["path"].startswith("topic")
    large = b'{"topic": "' + b"x" * (2 * 1024 * 1024) + b'"}'
    assert (await http.post(target, content=large, headers=signed(secret, large))).status_code == 413
    assert (await http.post(f"{url}/hooks/nope", content=body, headers=signed(secret, body))).status_code == 404
    assert (await http.post(target + "?wait=99", content=body, headers=signed(secret, body))).status_code == 400
    assert orc.list_runs(workflow="echo") == []


async def test_github_and_bearer_senders(orc: Orchestrator, served: tuple[str, httpx2.AsyncClient]) -> None:
    _, http = served
    github = orc.hooks.create(workflow="echo", auth="github", hook_id="github")
    body = json.dumps({"topic": "push"}).encode()
    mac = hmac.new(github["secret"].encode(), body, hashlib.sha256).hexdigest()
    headers = {"x-hub-signature-256": f"sha256={mac}", "x-github-delivery": "72d3162e-cc78-11e3-81ab-4c9367dc0958",
               "content-type": "application/json"}
    answer = await http.post(github["url"] + "?wait=10", content=body, headers=headers)
    assert answer.status_code == 200 and answer.json()["outputs"]["text"].endswith(":push")
    tampered = {**headers, "x-hub-signature-256": "sha256=" + "0" * 64}
    assert (await http.post(github["url"], content=body, headers=tampered)).status_code == 401

    bearer = orc.hooks.create(workflow="echo", auth="bearer", hook_id="bearer")
    auth = {"authorization": f"Bearer {bearer['secret']}", "idempotency-key": "k1", "content-type": "application/json"}
    one = await http.post(bearer["url"], content=body, headers=auth)
    two = await http.post(bearer["url"], content=body, headers=auth)
    assert one.status_code == two.status_code == 202 and one.json()["run_id"] == two.json()["run_id"]
    assert (await http.post(bearer["url"], content=body, headers={**auth, "authorization": "Bearer x"})).status_code == 401


async def test_rotation_keeps_both_secrets_through_the_overlap_only(
        orc: Orchestrator, served: tuple[str, httpx2.AsyncClient]) -> None:
    _, http = served
    hook = orc.hooks.create(workflow="echo", hook_id="rotating")
    old = hook["secret"]
    rotated = orc.hooks.rotate_secret("rotating", overlap_seconds=60)
    new = rotated["secret"]
    assert new != old and len(rotated["secrets"]) == 2
    body = json.dumps({"topic": "r"}).encode()
    for secret in (old, new):
        assert (await http.post(hook["url"], content=body, headers=signed(secret, body))).status_code == 202
    real = orc.hooks.clock
    orc.hooks.clock = lambda: real() + 61  # the overlap is over
    try:
        assert (await http.post(hook["url"], content=body, headers=signed(old, body))).status_code == 401
        assert (await http.post(hook["url"], content=body, headers=signed(new, body))).status_code == 202
        assert len(orc.hooks.list()["hooks"][0]["secrets"]) == 1
    finally:
        orc.hooks.clock = real


async def test_inputs_map_the_body_headers_and_query(orc: Orchestrator, served: tuple[str, httpx2.AsyncClient]) -> None:
    _, http = served
    hook = orc.hooks.create(workflow="echo", hook_id="mapped", inputs={
        "topic": "{{ trigger.body.issue.title }} by {{ trigger.headers['x-user'] }} ({{ trigger.query.source }})"})
    body = json.dumps({"issue": {"title": "Ice melts"}, "extra": [1, 2]}).encode()
    headers = {**signed(hook["secret"], body), "x-user": "ada"}
    answer = await http.post(hook["url"] + "?wait=10&source=form", content=body, headers=headers)
    assert answer.status_code == 200, answer.text
    assert answer.json()["outputs"]["text"].endswith(":Ice melts by ada (form)")
    tested = orc.hooks.test("mapped", {"issue": {"title": "T"}}, {**signed(hook["secret"], b"{}"), "x-user": "b"})
    assert tested["verified"] is False  # the headers signed another body
    dry = orc.hooks.test("mapped", {"issue": {"title": "T"}})
    assert dry["verified"] is None and dry["problems"] == [] and dry["inputs"] == {"topic": "T by  ()"}
    assert orc.list_runs(workflow="echo")[0].trigger == {"kind": "webhook", "hook_id": "mapped",
                                                        "delivery_id": headers["webhook-id"]}


async def test_bad_definitions_are_refused_with_every_problem(orc: Orchestrator,
                                                              served: tuple[str, httpx2.AsyncClient]) -> None:
    with pytest.raises(IceError) as raised:
        orc.hooks.create(workflow="ehco", auth="hmac", inputs={"topic": "{{ inputs.x }}"}, hook_id="bad id")
    assert raised.value.code == "invalid_webhook"
    paths = [e["path"] for e in raised.value.details["errors"]]
    assert paths == ["id", "workflow", "auth", "inputs.topic"]
    assert raised.value.details["errors"][1]["suggestion"] == "echo"
    assert orc.hooks.list() == {"hooks": []}
    orc.hooks.create(workflow="echo", hook_id="twice")
    with pytest.raises(IceError) as again:
        orc.hooks.create(workflow="echo", hook_id="twice")
    assert again.value.code == "webhook_exists"
    assert orc.hooks.delete("twice") == {"id": "twice", "deleted": True}
    with pytest.raises(IceError) as gone:
        orc.hooks.delete("twice")
    assert gone.value.code == "unknown_webhook"




async def test_a_delivery_with_a_traceparent_runs_in_the_senders_trace(
        orc: Orchestrator, served: tuple[str, httpx2.AsyncClient]) -> None:
    from otlp_receiver import memory_spans

    _, http = served
    hook = orc.hooks.create(workflow="echo", hook_id="traced")
    body = json.dumps({"topic": "ice"}).encode()
    sender = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    with memory_spans() as spans:
        answer = await http.post(hook["url"] + "?wait=10", content=body,
                                 headers={**signed(hook["secret"], body), "traceparent": sender})
        assert answer.status_code == 200, answer.text
        record = orc.get_run(answer.json()["run_id"])
        assert record is not None and record.traceparent is not None
        assert record.traceparent[3:35] == "0af7651916cd43dd8448eb211c80319c"  # the sender's trace
        assert record.trace_parent_span == "b7ad6b7169203331"
        for _ in range(200):  # the run's span is made as its engine closes the run
            if any(s.name == "invoke_workflow echo" for s in spans.get_finished_spans()):
                break
            await asyncio.sleep(0.02)
        [run] = [s for s in spans.get_finished_spans() if s.name == "invoke_workflow echo"]
    assert run.attributes is not None and run.attributes["ice.trigger.kind"] == "webhook"
    assert run.parent is not None and f"{run.parent.span_id:016x}" == "b7ad6b7169203331"
