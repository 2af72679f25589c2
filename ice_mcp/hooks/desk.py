"""An orchestrator's webhooks: kept in the run store, and each delivery verified, mapped and started once.

A delivery's id (`webhook-id`, `X-GitHub-Delivery` or `Idempotency-Key`) is its run's idempotency key
`hook:{id}:{delivery}` (racing servers attach to one run) and is kept with the run id for good, so a
redelivery at any later time, on any server, answers with the same run and starts nothing.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import json
import math
import re
import time
import urllib.parse
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, cast, get_args

from ice_mcp.blueprint.issues import nearest
from ice_mcp.blueprint.models import SCHEDULE_ID
from ice_mcp.core.templates import Scope, compile_value
from ice_mcp.desks import NamedTargets, TargetStarter, visible
from ice_mcp.errors import IceError, RateLimited, TemplateCompileError, every_problem
from ice_mcp.hosts import HasRegistry, HasSettings
from ice_mcp.principals import acting_id, may_see
from ice_mcp.signing import Unverified, new_secret, secret_problem, verify
from ice_mcp.store.hooks import Auth, HookRecord, HookSecret
from ice_mcp.store.records import iso

if TYPE_CHECKING:
    from ice_mcp.core.plan import Plan
    from ice_mcp.run_handles import RunHandle
    from ice_mcp.store.base import HookStore

HOOK_ID_TEXT = re.compile(SCHEDULE_ID)  # the same shape as a schedule's id
AUTHS: tuple[str, ...] = get_args(Auth)
MAX_WAIT_SECONDS = 25.0


class HookInvalid(IceError):
    """A webhook definition with problems (all of them in details.errors)."""

    code = "invalid_webhook"


@dataclass(slots=True)
class Delivery:
    """What `POST /hooks/{id}` answers: an HTTP status, a JSON body and headers."""

    status: int
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)


def _refusal(status: int, code: str, message: str, **extra: Any) -> Delivery:
    return Delivery(status, {"error": {"code": code, "message": message, **extra}})


class HookHost(TargetStarter, NamedTargets, HasSettings, HasRegistry, Protocol):
    """What the webhook desk asks of its orchestrator: a delivery's run (or network run) started, waited on and
    looked up, the workflows and networks a hook may name, the run store hooks are kept in, where senders reach it."""

    @property
    def store(self) -> HookStore | None: ...
    def watch(self, run_id: str) -> RunHandle | None: ...


class Hooks:
    """The webhook desk of one orchestrator. `base_url` is where senders reach this server (`serve --http`
    sets it; ICE_MCP_PUBLIC_URL overrides it behind a proxy)."""

    def __init__(self, orc: HookHost) -> None:
        self._orc = orc
        self.base_url: str | None = orc.settings.public_url  # `serve --http` sets its own address without it
        self.clock = time.time

    @property
    def store(self) -> HookStore:
        if self._orc.store is None:
            raise IceError("webhooks are kept in the run store, and this orchestrator has none", code="no_store")
        return self._orc.store

    # -- managing ---------------------------------------------------------------------------------------

    def create(self, *, workflow: str | None = None, network: str | None = None,
               inputs: Mapping[str, Any] | None = None, body_input: str | None = None, auth: str = "standard",
               hook_id: str | None = None, secret: str | None = None) -> dict[str, Any]:
        """Check everything, then keep the hook; its secret (`secret`: the sender's own, as Stripe makes one;
        default: a new one) is in this answer only.

        How a delivery becomes the workflow's inputs: `inputs` (name -> template over `trigger.body`,
        `trigger.headers`, `trigger.query`) and/or `body_input` (the input that takes the whole body); with
        neither, the body's top-level fields the workflow declares (the rest ignored)."""
        errors: list[dict[str, str]] = []
        hook_id = hook_id or f"h_{uuid.uuid4().hex[:12]}"
        if not HOOK_ID_TEXT.match(hook_id):
            errors.append({"path": "id", "message": "1-64 letters, digits, '_', '.' or '-'"})
        if bool(workflow) == bool(network):
            errors.append({"path": "workflow", "message": "name one of workflow, network"})
        elif network and network not in self._orc.networks:
            errors.append({"path": "network", "message": f"no network named {network!r}",
                           **_hint(nearest(network, self._orc.networks))})
        elif workflow and workflow not in self._orc.registry.workflows:
            errors.append({"path": "workflow", "message": f"no workflow named {workflow!r}",
                           **_hint(nearest(workflow, self._orc.registry.workflows))})
        if auth not in AUTHS:
            errors.append({"path": "auth", "message": f"one of {', '.join(AUTHS)}"})
        target_plan = None
        if workflow and not network and workflow in self._orc.registry.workflows:
            with contextlib.suppress(IceError):  # a workflow that does not compile refuses each delivery instead
                target_plan = self._orc.workflow_plan(workflow)
        errors += _mapping_problems(inputs, body_input, target_plan, network=bool(network))
        if secret is not None and (problem := secret_problem(auth, secret)):
            errors.append({"path": "secret", "message": problem})
        if errors:
            raise HookInvalid(every_problem(f"{errors[0]['path']}: {errors[0]['message']}", len(errors)),
                              details={"errors": errors})
        if self.store.hook(hook_id) is not None:
            raise IceError(f"a webhook {hook_id!r} exists: delete it first", code="webhook_exists",
                           details={"id": hook_id})
        secret = secret if secret is not None else new_secret()
        hook = HookRecord(hook_id, str(workflow or network), "network" if network else "workflow",
                          auth=cast(Auth, auth), inputs=dict(inputs) if inputs is not None else None,
                          body_input=body_input, secrets=[HookSecret(secret)], created_at=self.clock(),
                          principal=acting_id())
        self.store.save_hook(hook)
        return {**self._summary(hook), "secret": secret}

    def list(self) -> dict[str, Any]:
        return {"hooks": [self._summary(h) for h in self.store.hooks() if may_see(h.principal)]}

    def delete(self, hook_id: str) -> dict[str, Any]:
        self._hook(hook_id)  # unknown_webhook (another principal's too) with the nearest id
        self.store.delete_hook(hook_id)
        return {"id": hook_id, "deleted": True}

    def rotate_secret(self, hook_id: str, overlap_seconds: float = 86400.0) -> dict[str, Any]:
        """A new secret; the current one stays valid `overlap_seconds` more (senders move over meanwhile)."""
        if overlap_seconds < 0:
            raise HookInvalid("overlap_seconds: 0 or more", details={"errors": [
                {"path": "overlap_seconds", "message": "0 or more"}]})
        hook = self._hook(hook_id)
        now = self.clock()
        ends = now + overlap_seconds
        kept = [HookSecret(s.secret, min(s.expires_at or ends, ends)) for s in hook.secrets if _live(s, now)]
        secret = new_secret()
        hook.secrets = [HookSecret(secret), *(s for s in kept if s.expires_at is not None and s.expires_at > now)]
        self.store.save_hook(hook)
        return {**self._summary(hook), "secret": secret, "previous_valid_until": iso(ends)}

    def test(self, hook_id: str, body: Any, headers: Mapping[str, str] | None = None) -> dict[str, Any]:
        """Verify (when signature headers are given), map and validate a delivery; runs nothing."""
        hook = self._hook(hook_id)
        raw = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        lowered = {k.lower(): v for k, v in (headers or {}).items()}
        answer: dict[str, Any] = {"verified": None, "delivery_id": None, "inputs": None, "problems": []}
        if headers:
            try:
                answer["delivery_id"] = verify(hook.auth, self._secrets(hook), lowered, raw, self.clock())
                answer["verified"] = True
            except Unverified as exc:
                answer["verified"] = False
                answer["problems"].append({"path": "headers", "message": exc.message})
        mapped = self._inputs(hook, raw, lowered.get("content-type", "application/json"), lowered, {},
                              answer["delivery_id"])
        if isinstance(mapped, Delivery):
            answer["problems"].extend(mapped.body["error"].get("issues") or [
                {"path": "body", "message": mapped.body["error"]["message"]}])
        else:
            answer["inputs"] = mapped
        return answer

    # -- deliveries -------------------------------------------------------------------------------------

    async def receive(self, hook_id: str, body: bytes, headers: Mapping[str, str], query: Mapping[str, str],
                      wait: float | None) -> Delivery:
        """One delivery, as `POST /hooks/{id}` answers it; never raises."""
        try:
            return await self._receive(hook_id, body, headers, query, wait)
        except RateLimited as exc:
            return Delivery(429, {"error": {"code": exc.code, "message": exc.message, **exc.details}},
                            {"Retry-After": str(max(1, math.ceil(exc.retry_after)))})
        except IceError as exc:
            if exc.code in ("state_unavailable", "no_store"):
                return Delivery(503, {"error": {"code": exc.code, "message": exc.message}}, {"Retry-After": "5"})
            return _refusal(422, exc.code, exc.message, **({"issues": exc.details["errors"]}
                                                            if "errors" in exc.details else {}))

    async def _receive(self, hook_id: str, body: bytes, headers: Mapping[str, str], query: Mapping[str, str],
                       wait: float | None) -> Delivery:
        hook = self.store.hook(hook_id)
        if hook is None:
            return _refusal(404, "unknown_webhook", f"no webhook {hook_id!r}")
        try:
            delivery_id = verify(hook.auth, self._secrets(hook), headers, body, self.clock())
        except Unverified:
            return _refusal(401, "unverified", "the delivery's signature does not check out")
        if delivery_id is not None and (known := self.store.delivery_run(hook_id, delivery_id)) is not None:
            return await self._answer(known, wait)  # a redelivery: the same run, nothing started
        mapped = self._inputs(hook, body, headers.get("content-type", ""), headers, query, delivery_id)
        if isinstance(mapped, Delivery):
            return mapped
        trigger = {"kind": "webhook", "hook_id": hook_id, "delivery_id": delivery_id}
        key = f"hook:{hook_id}:{delivery_id}" if delivery_id is not None else None
        if hook.target_kind == "network":
            run_id = self._orc.start_network(hook.target, idempotency_key=key, trigger=trigger,
                                             from_client=False, caller=hook.principal).network_id
        else:
            run_id = (await self._orc.start(hook.target, mapped, idempotency_key=key, trigger=trigger,
                                            caller=hook.principal)).run_id
        if delivery_id is not None:
            run_id = self.store.note_delivery(hook_id, delivery_id, run_id)
        return await self._answer(run_id, wait)

    async def _answer(self, run_id: str, wait: float | None) -> Delivery:
        """202 with where to follow the run; 200 with its result if it ends within `wait` seconds."""
        if wait:
            network = self._orc.get_network(run_id)
            handle = self._orc.watch(run_id) if network is None else None
            if network is not None:
                await network.wait(wait)
            elif handle is not None:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(asyncio.shield(handle.wait()), wait)
        status = self._status(run_id)
        if wait is not None and status is not None and status.get("status") not in (
                "running", "queued", "input_required"):
            return Delivery(200, status)
        url = f"{self.base_url or ''}/ui/api/runs/{run_id}"
        return Delivery(202, {"run_id": run_id, "status": (status or {}).get("status", "running"),
                              "status_url": url}, {"Location": url})

    def _status(self, run_id: str) -> dict[str, Any] | None:
        if (network := self._orc.network_status(run_id)) is not None:
            return {"run_id": run_id, **network}
        record = self._orc.get_run(run_id)
        return None if record is None else record.envelope()

    def _inputs(self, hook: HookRecord, body: bytes, content_type: str, headers: Mapping[str, str],
                query: Mapping[str, str], delivery_id: str | None) -> dict[str, Any] | Delivery:
        """The run's inputs from the verified body, checked against the workflow (a network takes none)."""
        media = content_type.split(";")[0].strip().lower()
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError:
            return _refusal(422, "invalid_body", "the body is not UTF-8")
        if media == "application/json" or media.endswith("+json"):
            try:
                parsed: Any = json.loads(text) if text.strip() else {}
            except (ValueError, RecursionError):
                return _refusal(422, "invalid_body", "the body is not valid JSON")
        elif media == "application/x-www-form-urlencoded":
            parsed = {k: v[0] if len(v) == 1 else v for k, v in urllib.parse.parse_qs(text).items()}
        else:
            return _refusal(415, "unsupported_media_type", "send application/json or a form")
        if hook.target_kind == "network":
            return {}
        try:
            plan = self._orc.workflow_plan(hook.target)
        except IceError as exc:
            return _refusal(422, exc.code, exc.message)
        if hook.inputs is not None or hook.body_input is not None:
            seen = {"kind": "webhook", "hook_id": hook.id, "delivery_id": delivery_id, "body": parsed,
                    "headers": dict(headers), "query": dict(query)}
            inputs, failed = _render_inputs(hook.inputs or {}, Scope({"trigger": seen}))
            if failed:
                return _refusal(422, "inputs_invalid", f"{failed[0]['path']}: {failed[0]['message']}", issues=failed)
            if hook.body_input is not None:
                inputs[hook.body_input] = parsed
        elif isinstance(parsed, dict):
            declared = _declared(plan)  # a sender's other fields are not the workflow's business: left out
            inputs = parsed if declared is None else {k: v for k, v in parsed.items() if k in declared}
        else:
            return _refusal(422, "inputs_invalid", "the body must be a JSON object (its fields the workflow declares "
                                                   "are the inputs), or give the webhook a body_input")
        prepared, problems = plan.prepare_inputs(inputs)
        if problems:
            return _refusal(422, "inputs_invalid", f"{problems[0]['path'] or 'inputs'}: {problems[0]['message']}",
                            issues=problems)
        return dict(prepared)

    # -- helpers ----------------------------------------------------------------------------------------

    def _hook(self, hook_id: str) -> HookRecord:
        return visible("webhook", hook_id, self.store.hook(hook_id), self.store.hooks)

    def _secrets(self, hook: HookRecord) -> builtins.list[str]:
        now = self.clock()
        return [s.secret for s in hook.secrets if _live(s, now)]

    def _summary(self, hook: HookRecord) -> dict[str, Any]:
        now = self.clock()
        return {"id": hook.id, hook.target_kind: hook.target, "auth": hook.auth, "inputs": hook.inputs,
                "body_input": hook.body_input, "url": f"{self.base_url or ''}/hooks/{hook.id}",
                "created_at": iso(hook.created_at),
                "secrets": [{"valid_until": iso(s.expires_at)} for s in hook.secrets if _live(s, now)]}


def _live(secret: HookSecret, now: float) -> bool:
    return secret.expires_at is None or secret.expires_at > now


def _hint(suggestion: str | None) -> dict[str, str]:
    return {"suggestion": suggestion} if suggestion else {}


def _declared(plan: Plan) -> Mapping[str, Any] | None:
    """The inputs a workflow names when it refuses any other (None: it takes any field)."""
    if plan.declared_inputs is not None:
        return plan.declared_inputs
    schema = plan.blueprint.inputs
    properties = schema.get("properties")
    closed = schema.get("additionalProperties") is False and "patternProperties" not in schema
    return properties if closed and isinstance(properties, Mapping) else None


def _mapping_problems(inputs: Any, body_input: Any, plan: Plan | None, *, network: bool
                      ) -> builtins.list[dict[str, str]]:
    """Every problem with how deliveries become inputs: a template that does not compile or reads more than
    `trigger`, an input the workflow does not declare, a required input no mapping provides."""
    if inputs is None and body_input is None:
        return []
    if network:
        return [{"path": "inputs", "message": "a network takes no inputs"}] if inputs or body_input else []
    errors: builtins.list[dict[str, str]] = []
    mapped: dict[str, str] = {}  # input name -> where the mapping names it
    if inputs is not None and not isinstance(inputs, Mapping):
        errors.append({"path": "inputs", "message": "an object: input name -> template over trigger.body, "
                                                    "trigger.headers and trigger.query"})
    for name, source in (inputs.items() if isinstance(inputs, Mapping) else ()):
        mapped[str(name)] = f"inputs.{name}"
        try:
            names = compile_value(source).names
        except TemplateCompileError as exc:
            errors.append({"path": f"inputs.{name}", "message": str(exc)})
            continue
        if names - {"trigger"}:
            errors.append({"path": f"inputs.{name}", "message": "templates here read only `trigger` (body, headers, "
                                                                f"query), not {sorted(names - {'trigger'})}"})
    if body_input is not None:
        if not isinstance(body_input, str) or not body_input:
            errors.append({"path": "body_input", "message": "the name of the input that takes the whole body"})
        elif body_input in mapped:
            errors.append({"path": "body_input", "message": f"{body_input!r} is in inputs too: map it once"})
        else:
            mapped[body_input] = "body_input"
    if plan is None:
        return errors
    declared = _declared(plan)
    if declared is not None:
        errors.extend({"path": where, "message": f"the workflow has no input {name!r}",
                       **_hint(nearest(name, declared))} for name, where in mapped.items() if name not in declared)
    properties = plan.blueprint.inputs.get("properties") or {}
    for name in plan.blueprint.inputs.get("required") or ():
        schema = properties.get(name)
        if name not in mapped and not (isinstance(schema, Mapping) and "default" in schema):
            errors.append({"path": f"inputs.{name}", "message": "the workflow requires this input and no mapping "
                                                                "(inputs or body_input) provides it"})
    return errors


def _render_inputs(inputs: Mapping[str, Any], scope: Scope) -> tuple[dict[str, Any], builtins.list[dict[str, str]]]:
    """Each mapped input rendered over the delivery, and the problem of each template that failed (named)."""
    rendered: dict[str, Any] = {}
    failed: builtins.list[dict[str, str]] = []
    for name, source in inputs.items():
        try:
            rendered[name] = compile_value(source).render(scope)
        except IceError as exc:  # a template failing on this delivery's data: the sender's 422, not a 500
            failed.append({"path": name, "message": exc.message})
    return rendered, failed
