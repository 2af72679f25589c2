"""The `/ui/api/evals` routes: the kept evaluations with their pass rates, and one evaluation's report (its
per-case table, failing cases first, each case linking to its runs).

Read-only, like the runs list: evaluations are run with `eval_run`, `/rpc` or `ice-mcp eval`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response

from ice_mcp.errors import IceError
from ice_mcp.evals import Evals
from ice_mcp.operations.run_ids import resolve_run_id

Endpoint = Callable[[Request], Awaitable[Response]]
Refusal = Callable[[int, str, str], Exception]
MAX_EVALS = 200


def _json(data: Any) -> Response:
    return Response(orjson.dumps(data, default=str, option=orjson.OPT_NON_STR_KEYS), media_type="application/json",
                    headers={"Cache-Control": "no-store"})


def eval_api(orc: Any, refuse: Refusal) -> list[tuple[str, Endpoint, str]]:
    """The GET routes, as (path, endpoint, method); `refuse(status, code, message)` makes the exception the page's
    guard turns into a JSON error."""
    desk = Evals(orc)

    async def evals(request: Request) -> Response:
        try:
            limit = max(1, min(int(request.query_params.get("limit") or 50), MAX_EVALS))
        except ValueError:
            raise refuse(400, "invalid_limit", "limit must be a whole number") from None
        target = request.query_params.get("target") or None
        return _json(await asyncio.to_thread(desk.list, target=target, limit=limit))

    async def evaluation(request: Request) -> Response:
        text = request.path_params["eval_id"]
        try:
            eval_id = resolve_run_id(orc, text)  # the id, or a unique start of it
            return _json(await asyncio.to_thread(desk.show, eval_id))
        except IceError as exc:
            if exc.code in ("unknown_run", "unknown_eval"):
                raise refuse(404, "unknown_eval", f"unknown evaluation {text!r}") from None
            if exc.code == "ambiguous_run_id":
                raise refuse(409, exc.code, exc.message) from None
            raise

    return [("/ui/api/evals", evals, "GET"), ("/ui/api/evals/{eval_id}", evaluation, "GET")]
