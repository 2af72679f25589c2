"""How a webhook delivery becomes a workflow's inputs (issue 37, item 6): real GitHub, Stripe and Standard
Webhooks payloads on an in-process `serve --http`; a sender's extra fields never refuse a delivery, a mapping
(`inputs` templates, `body_input`) is checked when the hook is made and its failures at delivery are clean 422s."""

from __future__ import annotations

import hashlib
import hmac
import json
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp_helpers import http_server, make_options, structured
from test_webhooks import signed

from ice_mcp import Orchestrator
from ice_mcp.errors import IceError
from ice_mcp.server import build_server
from ice_mcp.server.web.rpc import handle_rpc, rpc_methods


def closed(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    """A workflow's inputs schema as the blueprints write it now: closed (unknown inputs are refused)."""
    return {"type": "object", "properties": properties, "required": required, "additionalProperties": False}


def echo(name: str, inputs: dict[str, Any], text: str) -> dict[str, Any]:
    return {"name": name, "inputs": inputs,
            "nodes": [{"id": "e", "type": "tool", "tool_name": "render_template", "tool_args": {"template": text}}],
            "outputs": {"text": "{{ e.text }}"}}


_STRING = {"type": "string"}
# Takes two of a push's fields; a push carries a dozen more (`ref` among them: the 422 of the issue).
PUSHED = echo("pushed", closed({"repository": {"type": "object"}, "pusher": {"type": "object"}},
                               ["repository", "pusher"]),
              "{{ inputs.repository.full_name }} by {{ inputs.pusher.name }}")
ON_PUSH = echo("on_push", closed({"repo": _STRING, "branch": _STRING, "event": _STRING,
                                  "commits": {"type": "integer", "default": 0}}, ["repo", "branch", "event"]),
               "{{ inputs.event }} {{ inputs.repo }}@{{ inputs.branch }} ({{ inputs.commits }})")
ARCHIVE = echo("archive", closed({"payload": {"type": "object"}, "event": _STRING}, ["payload"]),
               "{{ inputs.event }}:{{ inputs.payload.head_commit.id }}:{{ inputs.payload | length }}")
CHARGE = echo("charge", closed({"id": _STRING, "type": _STRING}, ["id", "type"]), "{{ inputs.type }} {{ inputs.id }}")
RESPONSE = echo("response_done", closed({"type": _STRING, "data": {"type": "object"}}, ["type", "data"]),
                "{{ inputs.type }}:{{ inputs.data.id }}")

COMMIT = {
    "id": "6dcb09b5b57875f334f61aebed695e2e4193db5e", "tree_id": "f9d2a07e9488b91af2641b26b9407fe22a451433",
    "distinct": True, "message": "Fix the thaw check", "timestamp": "2025-03-04T10:21:43+01:00",
    "url": "https://github.com/octo-org/ice/commit/6dcb09b5b57875f334f61aebed695e2e4193db5e",
    "author": {"name": "Mona Lisa", "email": "mona@github.com", "username": "octocat"},
    "committer": {"name": "GitHub", "email": "noreply@github.com", "username": "web-flow"},
    "added": [], "removed": [], "modified": ["ice_mcp/thaw.py"]}
PUSH = {
    "ref": "refs/heads/main", "before": "9049f1265b7d61be4a8904a9a27120d2064dab3b",
    "after": COMMIT["id"], "created": False, "deleted": False, "forced": False, "base_ref": None,
    "compare": "https://github.com/octo-org/ice/compare/9049f1265b7d...6dcb09b5b578",
    "commits": [COMMIT], "head_commit": COMMIT,
    "repository": {"id": 1296269, "node_id": "MDEwOlJlcG9zaXRvcnkxMjk2MjY5", "name": "ice",
                   "full_name": "octo-org/ice", "private": False, "default_branch": "main", "size": 108,
                   "open_issues": 0, "owner": {"login": "octo-org", "id": 6811672, "type": "Organization"},
                   "html_url": "https://github.com/octo-org/ice", "topics": ["workflows"]},
    "pusher": {"name": "octocat", "email": "mona@github.com"},
    "organization": {"login": "octo-org", "id": 6811672},
    "sender": {"login": "octocat", "id": 583231, "type": "User", "site_admin": False},
}
PING = {"zen": "Design for failure.", "hook_id": 109948940,
        "hook": {"type": "Repository", "id": 109948940, "events": ["push"], "active": True,
                 "config": {"content_type": "json", "insecure_ssl": "0", "url": "https://ice.example/hooks/gh"}},
        "repository": PUSH["repository"], "sender": PUSH["sender"]}  # no `ref`: a ping is no push
STRIPE_EVENT = {
    "id": "evt_1NG8Du2eZvKYlo2CUI79vXWy", "object": "event", "api_version": "2023-10-16", "created": 1686089970,
    "livemode": False, "pending_webhooks": 1, "type": "charge.succeeded",
    "request": {"id": "req_8KPQyZRzmYPfPA", "idempotency_key": "a1c9b6c2-7d7e-4a39-9d5e-7a1c0f8a2b6e"},
    "data": {"object": {"id": "ch_3NG8Dt2eZvKYlo2C0zJ8Bq6M", "object": "charge", "amount": 2000, "currency": "usd",
                        "paid": True, "status": "succeeded", "customer": "cus_NffrFeUfNV2Hib",
                        "metadata": {"order_id": "6735"}}},
}
OPENAI_EVENT = {"id": "evt_685343a1381c819085d44c354e1b330e", "object": "event", "created_at": 1750287018,
                "type": "response.completed", "data": {"id": "resp_abc123", "status": "completed"}}


def github(secret: str, body: bytes, event: str = "push") -> dict[str, str]:
    """GitHub's headers: X-Hub-Signature-256 (HMAC of the raw body, keyed by the secret string) and a delivery GUID."""
    return {"x-hub-signature-256": "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest(),
            "x-github-delivery": str(uuid.uuid4()), "x-github-event": event,
            "x-github-hook-id": "109948940", "user-agent": "GitHub-Hookshot/2b2e3f4",
            "content-type": "application/json"}


def stripe_signature(secret: str, body: bytes, at: float | None = None) -> str:
    """`Stripe-Signature: t=...,v1=...`: hex HMAC-SHA256 of "t.body", keyed by the secret string (as Stripe signs)."""
    stamp = str(int(time.time() if at is None else at))
    return f"t={stamp},v1=" + hmac.new(secret.encode(), f"{stamp}.".encode() + body, hashlib.sha256).hexdigest()


@pytest.fixture
async def served(orc: Orchestrator) -> AsyncIterator[httpx2.AsyncClient]:
    for blueprint in (PUSHED, ON_PUSH, ARCHIVE, CHARGE, RESPONSE):
        orc.register_blueprint(blueprint)
    async with http_server(orc, make_options()), httpx2.AsyncClient(timeout=30) as http:
        yield http


async def deliver(http: httpx2.AsyncClient, hook: dict[str, Any], body: bytes, headers: dict[str, str]
                  ) -> httpx2.Response:
    return await http.post(hook["url"] + "?wait=10", content=body, headers=headers)


async def test_a_github_push_starts_a_workflow_taking_two_of_its_fields(
        orc: Orchestrator, served: httpx2.AsyncClient) -> None:
    hook = orc.hooks.create(workflow="pushed", auth="github", hook_id="gh")
    assert hook["inputs"] is None and hook["body_input"] is None
    body = json.dumps(PUSH).encode()
    answer = await deliver(served, hook, body, github(hook["secret"], body))
    assert answer.status_code == 200, answer.text  # was 422 inputs_invalid "ref: unknown input"
    assert answer.json()["outputs"] == {"text": "octo-org/ice by octocat"}
    run = orc.get_run(answer.json()["run_id"])
    assert run is not None and set(run.inputs) == {"repository", "pusher"}  # the rest was left out
    missing = json.dumps({"ref": "refs/heads/main", "pusher": PUSH["pusher"]}).encode()
    refused = await deliver(served, hook, missing, github(hook["secret"], missing))
    assert refused.status_code == 422  # what the workflow needs is still checked
    assert refused.json()["error"]["code"] == "inputs_invalid" and "repository" in refused.json()["error"]["message"]


async def test_a_stripe_event_and_a_standard_webhooks_event_keep_only_the_declared_fields(
        orc: Orchestrator, served: httpx2.AsyncClient) -> None:
    # Stripe makes the endpoint's secret: the hook takes it, and checks Stripe-Signature over "t.body".
    stripes = "whsec_" + "s7r1p3" * 6
    charge = orc.hooks.create(workflow="charge", hook_id="stripe", auth="stripe", secret=stripes)
    assert charge["secret"] == stripes and charge["auth"] == "stripe"
    body = json.dumps(STRIPE_EVENT).encode()
    answer = await deliver(served, charge, body, {"stripe-signature": stripe_signature(stripes, body),
                                                  "content-type": "application/json"})
    assert answer.status_code == 200, answer.text
    assert answer.json()["outputs"] == {"text": "charge.succeeded evt_1NG8Du2eZvKYlo2CUI79vXWy"}
    again = await deliver(served, charge, body, {"stripe-signature": stripe_signature(stripes, body),
                                                 "content-type": "application/json"})
    assert again.json()["run_id"] == answer.json()["run_id"]  # a redelivered event: its id names one run
    for bad in (stripe_signature("whsec_" + "x" * 36, body), stripe_signature(stripes, body, time.time() - 600),
                "v1=" + "0" * 64, ""):
        refused = await deliver(served, charge, body, {"stripe-signature": bad, "content-type": "application/json"})
        assert refused.status_code == 401, bad
    with pytest.raises(IceError) as short:
        orc.hooks.create(workflow="charge", hook_id="weak", auth="stripe", secret="short")
    assert short.value.details["errors"] == [{"path": "secret", "message": "at least 16 characters"}]

    done = orc.hooks.create(workflow="response_done", hook_id="openai")
    body = json.dumps(OPENAI_EVENT).encode()
    answer = await deliver(served, done, body, signed(done["secret"], body, delivery="wh_6853"))
    assert answer.status_code == 200, answer.text
    assert answer.json()["outputs"] == {"text": "response.completed:resp_abc123"}
    dry = orc.hooks.test("openai", OPENAI_EVENT)
    assert dry["problems"] == [] and dry["inputs"] == {"type": "response.completed", "data": OPENAI_EVENT["data"]}


async def test_templates_pick_fields_and_headers(orc: Orchestrator, served: httpx2.AsyncClient) -> None:
    hook = orc.hooks.create(workflow="on_push", auth="github", hook_id="mapped", inputs={
        "repo": "{{ trigger.body.repository.full_name }}", "branch": "{{ trigger.body.ref }}",
        "event": "{{ trigger.headers['x-github-event'] }}", "commits": "{{ trigger.body.commits | length }}"})
    assert orc.hooks.list()["hooks"][0]["inputs"]["repo"] == "{{ trigger.body.repository.full_name }}"
    body = json.dumps(PUSH).encode()
    answer = await deliver(served, hook, body, github(hook["secret"], body))
    assert answer.status_code == 200, answer.text
    assert answer.json()["outputs"] == {"text": "push octo-org/ice@refs/heads/main (1)"}


async def test_the_whole_body_as_one_input(orc: Orchestrator, served: httpx2.AsyncClient) -> None:
    hook = orc.hooks.create(workflow="archive", auth="github", hook_id="archive", body_input="payload",
                            inputs={"event": "{{ trigger.headers['x-github-event'] }}"})
    assert hook["body_input"] == "payload"
    body = json.dumps(PUSH).encode()
    answer = await deliver(served, hook, body, github(hook["secret"], body))
    assert answer.status_code == 200, answer.text
    assert answer.json()["outputs"] == {"text": f"push:{COMMIT['id']}:{len(PUSH)}"}
    run = orc.get_run(answer.json()["run_id"])
    assert run is not None and run.inputs == {"payload": PUSH, "event": "push"}

    alone = orc.hooks.create(workflow="archive", hook_id="alone", body_input="payload")
    body = json.dumps(STRIPE_EVENT).encode()
    answer = await deliver(served, alone, body, signed(alone["secret"], body))
    assert answer.status_code == 200, answer.text
    assert orc.get_run(answer.json()["run_id"]).inputs == {"payload": STRIPE_EVENT}  # type: ignore[union-attr]
    listed = json.dumps([1, 2]).encode()  # any JSON value: the input's schema decides (an object here)
    refused = await deliver(served, alone, listed, signed(alone["secret"], listed))
    assert refused.status_code == 422 and refused.json()["error"]["issues"][0]["path"] == "payload"


async def test_a_bad_mapping_is_refused_at_creation_with_every_problem(
        orc: Orchestrator, served: httpx2.AsyncClient) -> None:
    with pytest.raises(IceError) as raised:
        orc.hooks.create(workflow="on_push", auth="github", hook_id="bad", body_input="payload", inputs={
            "repo": "{{ trigger.body.repository.full_name ", "branhc": "{{ trigger.body.ref }}",
            "event": "{{ secrets.token }}"})
    assert raised.value.code == "invalid_webhook"
    errors = raised.value.details["errors"]
    assert [e["path"] for e in errors] == ["inputs.repo", "inputs.event", "inputs.branhc", "body_input",
                                           "inputs.branch"]
    assert errors[2]["suggestion"] == "branch" and "no input 'branhc'" in errors[2]["message"]
    assert "payload" in errors[3]["message"] and "requires" in errors[4]["message"]
    assert "(and 4 more problems)" in raised.value.message
    with pytest.raises(IceError) as twice:
        orc.hooks.create(workflow="archive", body_input="payload", inputs={"payload": "{{ trigger.body }}"})
    assert [e["path"] for e in twice.value.details["errors"]] == ["body_input"]
    with pytest.raises(IceError) as shapeless:
        orc.hooks.create(workflow="archive", body_input="", inputs="{{ trigger.body }}")  # type: ignore[arg-type]
    assert [e["path"] for e in shapeless.value.details["errors"]] == ["inputs", "body_input", "inputs.payload"]
    assert orc.hooks.list() == {"hooks": []}


async def test_mapped_values_the_workflow_refuses_are_a_422_naming_the_input(
        orc: Orchestrator, served: httpx2.AsyncClient) -> None:
    hook = orc.hooks.create(workflow="on_push", auth="github", hook_id="strict", inputs={
        "repo": "{{ trigger.body.repository.full_name }}", "branch": "{{ trigger.body.ref }}",
        "event": "{{ trigger.headers['x-github-event'] }}"})
    body = json.dumps(PING).encode()  # a ping has no ref: `branch` is null
    answer = await deliver(served, hook, body, github(hook["secret"], body, event="ping"))
    assert answer.status_code == 422, answer.text
    error = answer.json()["error"]
    assert error["code"] == "inputs_invalid" and error["message"].startswith("branch: ")
    assert [i["path"] for i in error["issues"]] == ["branch"]

    ratio = orc.hooks.create(workflow="on_push", auth="github", hook_id="ratio", inputs={
        "repo": "{{ trigger.body.repository.full_name }}", "branch": "{{ trigger.body.ref }}",
        "event": "{{ trigger.body.repository.size // trigger.body.repository.open_issues }}"})
    body = json.dumps(PUSH).encode()  # open_issues is 0: the template fails on this delivery's data
    answer = await deliver(served, ratio, body, github(ratio["secret"], body))
    assert answer.status_code == 422 and "Traceback" not in answer.text
    error = answer.json()["error"]
    assert error["code"] == "inputs_invalid" and [i["path"] for i in error["issues"]] == ["event"]
    assert "ZeroDivisionError" in error["message"]
    tested = orc.hooks.test("ratio", PUSH)
    assert tested["inputs"] is None and [p["path"] for p in tested["problems"]] == ["event"]
    assert orc.list_runs(workflow="on_push") == []


async def test_the_tool_and_rpc_take_the_mapping_and_say_so(orc: Orchestrator, served: httpx2.AsyncClient) -> None:
    server = build_server(orc, make_options())
    async with Client(server) as client:
        tool = {t.name: t for t in (await client.list_tools()).tools}["webhook_create"]
        schema = tool.input_schema
        assert schema["additionalProperties"] is False and schema["properties"]["body_input"]["type"] == "string"
        assert "declares" in schema["properties"]["inputs"]["description"]
        made = structured(await client.call_tool("webhook_create", {
            "workflow": "archive", "auth": "github", "id": "by-mcp", "body_input": "payload"}))
        assert made["body_input"] == "payload" and made["inputs"] is None
        refused = await client.call_tool("webhook_create", {"workflow": "on_push", "inputs": {"repo": "{{ x }}"}})
        assert refused.is_error is True
        error = structured(refused)["error"]
        assert error["code"] == "invalid_webhook"
        assert [e["path"] for e in error["details"]["errors"]] == ["inputs.repo", "inputs.branch", "inputs.event"]
    methods = rpc_methods(orc, server.ice_calls)
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "webhook.create", "params": {
        "workflow": "on_push", "id": "by-rpc", "inputs": {"repo": "{{ trigger.body.repository.full_name }}",
                                                          "branch": "{{ trigger.body.ref }}",
                                                          "event": "{{ trigger.headers['x-github-event'] }}"}}})
    answer = await handle_rpc(body.encode(), methods)
    assert answer is not None and answer["result"]["id"] == "by-rpc" and answer["result"]["body_input"] is None
    assert [h["id"] for h in orc.hooks.list()["hooks"]] == ["by-mcp", "by-rpc"]
