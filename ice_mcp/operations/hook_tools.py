"""The webhook tools: create (the secret is shown once), list, delete, rotate a secret, and test a delivery.

Each is one `BuiltinTool` entry and one handler over the orchestrator's webhook desk (`orc.hooks`);
deliveries themselves arrive at `POST /hooks/{id}` (server/web/hooks.py).
"""

from __future__ import annotations

from typing import Any

from ice_mcp.hooks.desk import AUTHS
from ice_mcp.operations.result_schemas import (
    DELETED_SCHEMA,
    HOOK_LIST_SCHEMA,
    HOOK_SCHEMA,
    HOOK_TEST_SCHEMA,
)
from ice_mcp.operations.tool_table import (
    DELETES,
    READ_ONLY,
    BuiltinCall,
    BuiltinTool,
    Hints,
    obj_schema,
    replying,
)

_ID = {"type": "string", "description": "The webhook's id."}
_CHANGES = Hints(read_only=False, destructive=False, idempotent=False, open_world=False)


def _create(call: BuiltinCall) -> dict[str, Any]:
    args = call.args
    return call.orc.hooks.create(workflow=args.get("workflow"), network=args.get("network"),
                                 inputs=args.get("inputs"), body_input=args.get("body_input"),
                                 auth=args.get("auth", "standard"), hook_id=args.get("id"), secret=args.get("secret"))


webhook_create = replying(_create)
webhook_list = replying(lambda call: call.orc.hooks.list())
webhook_delete = replying(lambda call: call.orc.hooks.delete(call.args["id"]))
webhook_rotate_secret = replying(
    lambda call: call.orc.hooks.rotate_secret(call.args["id"], float(call.args.get("overlap_seconds", 86400))))
webhook_test = replying(lambda call: call.orc.hooks.test(call.args["id"], call.args["body"], call.args.get("headers")))


_INPUTS: dict[str, Any] = {
    "type": "object", "description": "Input name -> template over `trigger.body`, `trigger.headers` (lower-case "
    "names) and `trigger.query`, e.g. {\"repo\": \"{{ trigger.body.repository.full_name }}\"}. Without inputs "
    "or body_input, the body's top-level fields the workflow declares are its inputs (others are ignored)."}
_BODY_INPUT: dict[str, Any] = {
    "type": "string", "description": "The input that takes the whole body (any JSON value), beside any inputs."}

HOOK_TOOLS: tuple[BuiltinTool, ...] = (
    BuiltinTool(
        "webhook_create", "A URL that starts a workflow (or a served network) when a signed request arrives "
        "(POST /hooks/{id}). Returns {id, url, secret}: the secret (whsec_...) is shown only here.",
        obj_schema({"workflow": {"type": "string", "description": "The registered workflow to start."},
                    "network": {"type": "string", "description": "A served network to start instead."},
                    "inputs": _INPUTS, "body_input": _BODY_INPUT,
                    "auth": {"type": "string", "enum": list(AUTHS), "description":
                             "standard (Standard Webhooks: webhook-id, webhook-timestamp, webhook-signature; the "
                             "default), github (X-Hub-Signature-256, X-GitHub-Delivery), stripe (Stripe-Signature: "
                             "t=...,v1=...; the event's id dedupes) or bearer "
                             "(Authorization: Bearer <secret>, Idempotency-Key)."},
                    "id": {**_ID, "description": "An id of your own (default: generated)."},
                    "secret": {"type": "string", "minLength": 16, "description":
                               "The sender's own signing secret, for senders that make one (Stripe's whsec_... "
                               "endpoint secret); default: a new one, returned once."}}),
        _CHANGES, webhook_create, scope="run", output_schema=HOOK_SCHEMA, rpc="webhook.create",
        cli=("webhooks", "create")),
    BuiltinTool(
        "webhook_list", "Every webhook: what it starts, how senders sign, its URL and its secrets' validity "
        "(never the secrets).", obj_schema({}), READ_ONLY, webhook_list, output_schema=HOOK_LIST_SCHEMA,
        rpc="webhook.list",
        cli=("webhooks", "list")),
    BuiltinTool(
        "webhook_delete", "Delete a webhook (its runs stay).", obj_schema({"id": _ID}, ["id"]),
        DELETES, webhook_delete,
        scope="run", output_schema=DELETED_SCHEMA, rpc="webhook.delete", cli=("webhooks", "delete")),
    BuiltinTool(
        "webhook_rotate_secret", "A new secret for a webhook (shown only here); the current one stays valid for "
        "overlap_seconds (default a day) while senders move over.",
        obj_schema({"id": _ID, "overlap_seconds": {
            "type": "number", "minimum": 0,
            "description": "How long the old secret still verifies (default 86400: a day)."}}, ["id"]), _CHANGES,
        webhook_rotate_secret, scope="run", output_schema=HOOK_SCHEMA, rpc="webhook.rotate_secret",
        cli=("webhooks", "rotate-secret")),
    BuiltinTool(
        "webhook_test", "Check a delivery without running anything: verify its signature (when headers are "
        "given), map the body to inputs and validate them against the workflow.",
        obj_schema({"id": _ID, "body": {"description": "The body: JSON text, or a JSON value sent as JSON."},
                    "headers": {"type": "object", "additionalProperties": {"type": "string"},
                                "description": "The delivery's headers (signature ones included)."}},
                   ["id", "body"]),
        READ_ONLY, webhook_test, output_schema=HOOK_TEST_SCHEMA, rpc="webhook.test", cli=("webhooks", "test")),
)
