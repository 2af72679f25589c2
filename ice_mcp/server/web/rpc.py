"""`/rpc`: plain JSON-RPC 2.0 for agents that are not MCP clients (batches refused)."""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from jsonrpcserver import Error, Result, Success, async_dispatch
from jsonrpcserver.main import default_validator

from ice_mcp.errors import ArgumentsInvalid, IceError
from ice_mcp.operations.builtins import BUILTINS
from ice_mcp.operations.run_relay import run_and_wait
from ice_mcp.operations.tool_table import MAX_WAIT_PARAM, BuiltinTool
from ice_mcp.orchestrator import Orchestrator
from ice_mcp.server.protocol.calls import ToolCalls
from ice_mcp.server.untrusted import lone_surrogate
from ice_mcp.server.web import bodies

logger = logging.getLogger(__name__)

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
INVALID_PARAMS = -32602
SERVER_ERROR = -32000
FORBIDDEN = -32003


def error_body(code: int, message: str, request_id: Any = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "error": {"code": code, "message": message}, "id": request_id}


Method = Callable[..., Coroutine[Any, Any, Result]]


@dataclass(frozen=True, slots=True)
class RpcCaller:
    """Who sent a request: the key its budgets are kept under (a hash of its bearer token, or None), and whether
    it may administer (the admin token, or an OAuth token with ice:admin, on a server that is not read-only)."""

    id: str | None = None
    admin: bool = False


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
    """The methods: every built-in tool with an `rpc` name, and `workflow.run`; each takes the `RpcCaller` first,
    as jsonrpcserver's context."""

    async def workflow_run(
        caller: RpcCaller,
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
            lambda on_event: orc.start(plan, dict(inputs or {}), idempotency_key=key, caller=caller.id),
            wait_seconds=calls.wait_budget(wait_seconds), progress=None, total=None,
        )
        return Success(record.envelope())

    methods: dict[str, Method] = {"workflow.run": workflow_run}
    for tool in BUILTINS:
        if tool.rpc is not None:
            methods[tool.rpc] = _builtin_method(tool, calls, read_only)
    return {name: _guard(fn) for name, fn in methods.items()}


def _builtin_method(tool: BuiltinTool, calls: ToolCalls, read_only: bool) -> Method:
    """A built-in tool as a method: its params checked against the tool's input schema, its answer as data."""

    async def method(caller: RpcCaller, **params: Any) -> Result:
        if tool.admin and not caller.admin:  # as over MCP: the catalogue's changes need the admin token
            raise IceError(f"{tool.rpc} changes the catalogue and needs the admin token", code="forbidden")
        return Success(await calls.settled(tool, params, caller.id, f"rpc:{tool.rpc}", read_only=read_only))

    return method


def _parse(body: bytes) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """(the request, None), or (None, the error answering it). The decoding and the checks that walk the whole
    request are kept together, so that a big body goes through all of them off the event loop."""
    try:
        decoded = bodies.decode(body)
    except (ValueError, RecursionError):
        return None, error_body(PARSE_ERROR, "Parse error")
    if isinstance(decoded, list):
        return None, error_body(INVALID_REQUEST, "Batches are not supported: send one request per call")
    if not isinstance(decoded, dict):
        return None, error_body(INVALID_REQUEST, "Invalid request")
    request_id = decoded.get("id") if isinstance(decoded.get("id"), str | int) else None
    params = decoded.get("params")
    if params is not None and not isinstance(params, dict | list):
        return None, error_body(INVALID_REQUEST, "params must be an object or an array", request_id)
    if (where := lone_surrogate(params)) is not None:
        message = f"params/{where}: a string holds a lone UTF-16 surrogate (not valid Unicode)"
        return None, error_body(INVALID_PARAMS, message, request_id)
    if lone_surrogate(_envelope(decoded)) is not None:  # the params were looked at just above
        return None, error_body(INVALID_REQUEST, "a string holds a lone UTF-16 surrogate", request_id)
    return decoded, None


def _envelope(request: dict[str, Any]) -> dict[str, Any]:
    """The request with empty params of the same type: all of it that the JSON-RPC schema looks at."""
    params = request.get("params")
    if not isinstance(params, dict | list):
        return request
    return {**request, "params": type(params)()}


def _validate(request: Any) -> Any:
    # The schema checks only the type of params; checking the envelope spares a walk (and, on failure, the repr)
    # of a big request.
    return default_validator(_envelope(request))


async def handle_rpc(body: bytes, methods: dict[str, Method], caller: RpcCaller | None = None
                     ) -> dict[str, Any] | None:
    """One JSON-RPC request in, its response out (None for a notification); `caller` reaches every method."""
    request, refusal = await bodies.off_loop(_parse, body)
    if request is None:
        return refusal
    request_id = request.get("id") if isinstance(request.get("id"), str | int) else None
    try:
        # Decoded once, above: jsonrpcserver is handed the request rather than its text to decode again.
        text = await async_dispatch("", methods=methods, context=caller or RpcCaller(),
                                    deserializer=lambda _text: request, validator=_validate)
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
