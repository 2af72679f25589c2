"""A webhook's input mapping on both run stores: kept with the hook, read by another process's orchestrator that
maps a delivery with it, and a hook saved before `body_input` existed still loads."""

from __future__ import annotations

import hashlib
import hmac
import json
import uuid
from pathlib import Path
from typing import Any

from ice_mcp import Orchestrator, Registry, Settings
from ice_mcp.store.base import RunStorage, dumps
from ice_mcp.store.hooks import HookRecord

ON_PUSH = {"name": "on_push",
           "inputs": {"type": "object", "additionalProperties": False, "required": ["repo", "payload"],
                      "properties": {"repo": {"type": "string"}, "event": {"type": "string"},
                                     "payload": {"type": "object"}}},
           "nodes": [{"id": "e", "type": "tool", "tool_name": "render_template",
                      "tool_args": {"template": "{{ inputs.event }} {{ inputs.repo }}"}}],
           "outputs": {"text": "{{ e.text }}"}}
PUSH: dict[str, Any] = {
    "ref": "refs/heads/main", "after": "6dcb09b5b57875f334f61aebed695e2e4193db5e",
    "repository": {"id": 1296269, "full_name": "octo-org/ice", "default_branch": "main"},
    "pusher": {"name": "octocat", "email": "mona@github.com"}, "commits": [], "head_commit": None}
MAPPING = {"repo": "{{ trigger.body.repository.full_name }}", "event": "{{ trigger.headers['x-github-event'] }}"}


def put_raw(store: RunStorage, hook_id: str, document: dict[str, Any]) -> None:
    """A hook record as an earlier version wrote it, straight into the store (no HookRecord in between)."""
    redis = getattr(store, "_redis", None)
    if redis is not None:
        redis.hset(store._key("hooks"), hook_id, dumps(document))  # type: ignore[attr-defined]
    elif getattr(store, "_pool", None) is not None:  # PostgreSQL
        with store._conn() as conn:  # type: ignore[attr-defined]
            conn.execute("INSERT INTO hooks (id, body) VALUES (%s, %s)", (hook_id, dumps(document)))
    else:
        with store._read_lock:  # type: ignore[attr-defined]
            store._read.execute("INSERT INTO hooks (id, body) VALUES (?, ?)",  # type: ignore[attr-defined]
                                (hook_id, dumps(document)))


def test_the_mapping_is_kept_and_an_earlier_hook_loads(store: RunStorage, other: RunStorage) -> None:
    hook = HookRecord("gh", "on_push", "workflow", auth="github", inputs=MAPPING, body_input="payload")
    store.save_hook(hook)
    assert other.hook("gh") == hook
    put_raw(store, "old", {"id": "old", "target": "on_push", "target_kind": "workflow", "auth": "github",
                           "inputs": None, "secrets": [{"secret": "whsec_x", "expires_at": None}],
                           "created_at": 5.0, "principal": None})
    old = other.hook("old")
    assert old is not None and old.body_input is None and old.inputs is None and old.secrets[0].secret == "whsec_x"
    assert [h.id for h in other.hooks()] == ["gh", "old"]


async def test_another_process_maps_a_delivery_with_the_kept_mapping(url: str, tmp_path: Path) -> None:
    made = [Orchestrator(registry=Registry(), settings=Settings(data_dir=tmp_path / f"p{n}", workspace=tmp_path,
                                                                state_url=url)) for n in range(2)]
    try:
        for orc in made:
            orc.register_blueprint(ON_PUSH, origin="file")
        created = made[0].hooks.create(workflow="on_push", auth="github", hook_id="gh", inputs=MAPPING,
                                       body_input="payload")
        [listed] = made[1].hooks.list()["hooks"]
        assert listed["inputs"] == MAPPING and listed["body_input"] == "payload"
        body = json.dumps(PUSH).encode()
        headers = {"x-hub-signature-256": "sha256=" + hmac.new(created["secret"].encode(), body,
                                                              hashlib.sha256).hexdigest(),
                   "x-github-delivery": str(uuid.uuid4()), "x-github-event": "push",
                   "content-type": "application/json"}
        answer = await made[1].hooks.receive("gh", body, headers, {}, wait=10)
        assert answer.status == 200, answer.body
        assert answer.body["outputs"] == {"text": "push octo-org/ice"}
        run = made[1].get_run(answer.body["run_id"])
        assert run is not None and run.inputs == {"repo": "octo-org/ice", "event": "push", "payload": PUSH}
    finally:
        for orc in made:
            await orc.aclose()
