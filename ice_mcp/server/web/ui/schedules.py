"""The `/ui/api/schedules` routes: a store's schedules with their next fires, and one schedule's firings.

Read-only, like the runs list: schedules are changed with the schedule tools, `/rpc` or `ice-mcp schedules`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from starlette.requests import Request

from ice_mcp.errors import IceError
from ice_mcp.server.web.ui.views import json_text

Handler = Callable[[Request], Awaitable[dict[str, Any]]]
Refusal = Callable[[int, str, str], Exception]

MAX_SCHEDULES = 500  # schedules one list shows
FIRINGS = 50  # firings a schedule's page shows unless ?limit= says otherwise
MAX_FIRINGS = 500
NO_STORE = ("this server keeps no run store, and schedules live in the run store: "
            "start it with a data folder (or a state URL) to schedule workflows")


def describe(orc: Any, spec: Mapping[str, Any]) -> str | None:
    """A stored spec in words ("At 09:00 AM, only on Monday (Europe/Paris)"), or None when it cannot be."""
    try:
        return str(orc.schedules.preview(spec, count=0)["description"])
    except IceError:  # a spec this version refuses (kept by a newer one): shown as JSON only
        return None


def _shown(orc: Any, schedule: dict[str, Any]) -> dict[str, Any]:
    """A schedule as the page shows it: the desk's summary, its spec in words, its inputs as text."""
    return {**schedule, "description": describe(orc, schedule.get("spec") or {}),
            "inputs_text": json_text(schedule.get("inputs") or {}, 20_000)}


def list_schedules(orc: Any, workflow: str | None = None) -> dict[str, Any]:
    """Every schedule (of one workflow), each with its last firing; blocking (the store is read)."""
    if orc.store is None:
        return {"schedules": [], "scheduler_alive_at": None, "note": NO_STORE}
    listed = orc.schedules.list(workflow=workflow)
    shown = []
    for schedule in listed["schedules"][:MAX_SCHEDULES]:
        try:
            last = orc.schedules.history(schedule["id"], limit=1)["firings"]
        except IceError:  # deleted between the two reads
            continue
        shown.append({**_shown(orc, schedule), "last_firing": last[0] if last else None})
    answer = {"schedules": shown, "scheduler_alive_at": listed["scheduler_alive_at"]}
    if len(listed["schedules"]) > MAX_SCHEDULES:
        answer["note"] = f"only the first {MAX_SCHEDULES} of {len(listed['schedules'])} schedules are shown"
    return answer


def schedule_page(orc: Any, schedule_id: str, limit: int = FIRINGS) -> dict[str, Any]:
    """One schedule, its next 10 fires and its last `limit` firings (each with its run's status).
    Blocking; an unknown schedule raises the desk's `unknown_schedule` (with the nearest id)."""
    schedule = orc.schedules.get(schedule_id)
    firings = orc.schedules.history(schedule_id, limit=limit)["firings"]
    for firing in firings:
        record = orc.get_run(firing["run_id"]) if firing.get("run_id") else None
        firing["run_status"] = None if record is None else record.status
    return {**_shown(orc, schedule), "firings": firings}


def schedule_api(orc: Any, refuse: Refusal) -> list[tuple[str, Handler]]:
    """The GET routes, as (path, handler answering JSON data); `refuse(status, code, message)` makes the
    exception the page's guard turns into a JSON error."""

    async def schedules(request: Request) -> dict[str, Any]:
        workflow = request.query_params.get("workflow") or None
        return await asyncio.to_thread(list_schedules, orc, workflow)

    async def schedule(request: Request) -> dict[str, Any]:
        schedule_id = request.path_params["schedule_id"]
        try:
            limit = max(1, min(int(request.query_params.get("limit") or FIRINGS), MAX_FIRINGS))
        except ValueError:
            raise refuse(400, "invalid_limit", "limit must be a whole number") from None
        if orc.store is None:
            raise refuse(404, "unknown_schedule", f"unknown schedule {schedule_id!r}: {NO_STORE}")
        try:
            return await asyncio.to_thread(schedule_page, orc, schedule_id, limit)
        except IceError as exc:
            if exc.code == "unknown_schedule":
                raise refuse(404, exc.code, exc.message) from None
            raise

    return [("/ui/api/schedules", schedules), ("/ui/api/schedules/{schedule_id}", schedule)]
