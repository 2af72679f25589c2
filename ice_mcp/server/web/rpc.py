"""`/rpc`: plain JSON-RPC 2.0 for agents that are not MCP clients (batches refused)."""

from __future__ import annotations

import asyncio
import functools
import json
import logging
from collections.abc import Callable, Coroutine
from typing import Any

from jsonrpcserver import Error, Result, Success, async_dispatch

from ice_mcp.errors import ArgumentsInvalid, IceError
from ice_mcp.orchestrator import Orchestrator
from ice_mcp.server.edges import lone_surrogate
from ice_mcp.server.protocol.calls import ToolCalls
from ice_mcp.server.protocol.documents import parse_document
from ice_mcp.server.protocol.runs import run_and_wait

logger = logging.getLogger(__name__)

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
INVALID_PARAMS = -32602
SERVER_ERROR = -32000
FORBIDDEN = -32003
MAX_WAIT_PARAM = 1e9  # seconds; larger is not a wait but an attack on float conversion


def error_body(code: int, message: str, request_id: Any = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "error": {"code": code, "message": message}, "id": request_id}


Method = Callable[..., Coroutine[Any, Any, Result]]


def _guard(fn: Method) -> Method:
    @functools.wraps(fn)
    async def wrapper(*args: Any, **kwargs: Any) -> Result:
        try:
            return await fn(*args, **kwargs)
        except IceError as exc:
            code = FORBIDDEN if exc.code == "forbidden" else INVALID_PARAMS
            return Error(code, exc.message, exc.as_dict())
        except Exception:
            logger.exception("rpc method failed")
            return Error(SERVER_ERROR, "internal error")

    return wrapper


def _check_wait(wait_seconds: Any) -> None:
    if wait_seconds is None:
        return
    if (
        isinstance(wait_seconds, bool)
        or not isinstance(wait_seconds, int | float)
        or not 0 <= wait_seconds <= MAX_WAIT_PARAM
    ):
        raise ArgumentsInvalid(f"wait_seconds: a number of seconds from 0 to {MAX_WAIT_PARAM:g}")


def _read_only_refusal(what: str) -> Result:
    return Error(FORBIDDEN, f"{what} may change data and the server is read-only")


def rpc_methods(orc: Orchestrator, calls: ToolCalls, *, read_only: bool = False) -> dict[str, Method]:
    """The methods; each takes the caller (a hash of the bearer token, or None) first, as jsonrpcserver's context."""

    async def network_execute(
        caller: str | None, manifest: Any, wait_seconds: float | None = None, idempotency_key: str | None = None
    ) -> Result:
        _check_wait(wait_seconds)
        key = None if idempotency_key is None else str(idempotency_key)
        return Success(await calls.network(manifest, wait_seconds, key, caller))

    async def workflow_run(
        caller: str | None,
        name: str,
        inputs: dict[str, Any] | None = None,
        idempotency_key: str | None = None,
        wait_seconds: float | None = None,
    ) -> Result:
        if not isinstance(name, str) or not isinstance(inputs or {}, dict):
            return Error(INVALID_PARAMS, "name must be a string and inputs an object")
        _check_wait(wait_seconds)
        tool = calls.catalogue.resolve(f"workflow:{name}")
        if tool is not None and calls.refusal(tool) is not None:
            return _read_only_refusal(f"workflow {name!r}")
        plan = orc.workflow_plan(name)  # the one lookup; its inputs are checked once, by the run
        key = None if idempotency_key is None else str(idempotency_key)
        record = await run_and_wait(
            lambda on_event: orc.start(plan, dict(inputs or {}), idempotency_key=key, caller=caller),
            wait_seconds=calls.wait_budget(wait_seconds), progress=None, total=None,
        )
        return Success(record.envelope())

    async def blueprint_validate(caller: str | None, blueprint: Any) -> Result:
        report = await asyncio.to_thread(lambda: orc.validate(parse_document(blueprint)))  # off the event loop
        return Success(report.model_dump(mode="json"))

    async def run_status(caller: str | None, run_id: str) -> Result:
        network = orc.get_network(str(run_id))
        if network is not None:
            return Success(network.result())
        record = orc.get_run(str(run_id))
        if record is None:
            return Error(INVALID_PARAMS, f"unknown run {run_id!r}")
        return Success(record.to_dict())

    async def run_cancel(caller: str | None, run_id: str) -> Result:
        if read_only:
            return _read_only_refusal("run.cancel")
        network = orc.get_network(str(run_id))
        if network is not None:
            return Success({"run_id": run_id, "cancelled": network.cancel()})
        if orc.get_run(str(run_id)) is None:
            return Error(INVALID_PARAMS, f"unknown run {run_id!r}")
        cancelled = await orc.cancel(str(run_id))
        return Success({"run_id": run_id, "cancelled": bool(cancelled)})

    async def run_retry(caller: str | None, run_id: str, from_node: str | None = None,
                        wait_seconds: float | None = None) -> Result:
        handle = await orc.retry(str(run_id), None if from_node is None else str(from_node), caller=caller)
        record = await handle.wait(timeout=calls.wait_budget(wait_seconds))
        return Success(record.envelope())

    async def run_respond(caller: str | None, run_id: str, node: str, answer: Any,
                          wait_seconds: float | None = None) -> Result:
        _check_wait(wait_seconds)
        return Success(await calls.respond(str(run_id), str(node), answer, wait_seconds, "rpc:run.respond"))

    methods: dict[str, Method] = {
        "network.execute": network_execute,
        "workflow.run": workflow_run,
        "blueprint.validate": blueprint_validate,
        "run.status": run_status,
        "run.cancel": run_cancel,
        "run.retry": run_retry,
        "run.respond": run_respond,
    }
    return {name: _guard(fn) for name, fn in methods.items()}


async def handle_rpc(body: bytes, methods: dict[str, Method], caller: str | None = None) -> dict[str, Any] | None:
    """One JSON-RPC request in, its response out (None for a notification); `caller` reaches every method."""
    try:
        decoded = json.loads(body)
    except (ValueError, RecursionError):
        return error_body(PARSE_ERROR, "Parse error")
    if isinstance(decoded, list):
        return error_body(INVALID_REQUEST, "Batches are not supported: send one request per call")
    if not isinstance(decoded, dict):
        return error_body(INVALID_REQUEST, "Invalid request")
    request_id = decoded.get("id") if isinstance(decoded.get("id"), str | int) else None
    params = decoded.get("params")
    if params is not None and not isinstance(params, dict | list):
        return error_body(INVALID_REQUEST, "params must be an object or an array", request_id)
    if (where := lone_surrogate(params)) is not None:
        message = f"params/{where}: a string holds a lone UTF-16 surrogate (not valid Unicode)"
        return error_body(INVALID_PARAMS, message, request_id)
    if lone_surrogate(decoded) is not None:
        return error_body(INVALID_REQUEST, "a string holds a lone UTF-16 surrogate", request_id)
    try:
        text = await async_dispatch(json.dumps(decoded), methods=methods, context=caller)
    except Exception:
        logger.exception("rpc dispatch failed")
        return error_body(SERVER_ERROR, "internal error", request_id)
    if not text:
        return None
    response: dict[str, Any] = json.loads(text)
    error = response.get("error")
    if isinstance(error, dict) and error.get("code") == SERVER_ERROR and "data" in error:
        # jsonrpcserver puts exception text in `data`: never show internals.
        error.pop("data", None)
    return response
