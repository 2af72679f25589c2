"""`POST /hooks/{id}`: a webhook delivery, read (bounded), handed to the orchestrator's webhook desk, answered.

The hook's signature is the sender's credential (the MCP bearer token is not asked for here); the desk
verifies the raw bytes before anything is parsed.
"""

from __future__ import annotations

from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ice_mcp.hooks.desk import MAX_WAIT_SECONDS
from ice_mcp.observability import tracing
from ice_mcp.orchestrator import Orchestrator


def hook_routes(orc: Orchestrator) -> list[Route]:
    limit = orc.settings.webhook_max_bytes

    async def receive(request: Request) -> Response:
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            return _error(413, "too_large", f"a delivery is at most {limit} bytes")
        body = bytearray()
        try:
            async for chunk in request.stream():
                body += chunk
                if len(body) > limit:
                    return _error(413, "too_large", f"a delivery is at most {limit} bytes")
        except ClientDisconnect:
            return Response(status_code=400)
        wait_text = request.query_params.get("wait")
        wait = None
        if wait_text is not None:
            try:
                wait = float(wait_text)
            except ValueError:
                wait = -1.0
            if not 0 <= wait <= MAX_WAIT_SECONDS:
                return _error(400, "invalid_wait", f"wait: seconds from 0 to {MAX_WAIT_SECONDS:g}")
        headers = {name.lower(): value for name, value in request.headers.items()}
        query = {k: v for k, v in request.query_params.items() if k != "wait"}
        with tracing.continuing(headers.get("traceparent")):  # the sender's trace goes on in the run
            answer = await orc.hooks.receive(request.path_params["hook_id"], bytes(body), headers, query, wait)
        return JSONResponse(answer.body, status_code=answer.status, headers=answer.headers)

    return [Route("/hooks/{hook_id}", receive, methods=["POST"])]


def _error(status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse({"error": {"code": code, "message": message}}, status_code=status)
