"""`subscriptions/listen` (2026-07-28): the SDK's change events, plus task status for the tasks a client names.

A client that negotiated the tasks extension may add `taskIds` to the listen filter; the acknowledgement
echoes the ids it will hear of, and each status change of those runs (started, waiting, answered,
finished) comes as `notifications/tasks` carrying the task as `tasks/get` would answer it. Everything else
behaves as the SDK's `ListenHandler`: the ack first, every frame tagged with the subscription id, no
replay, a bounded backlog per stream.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

import anyio
import mcp_types as types
from mcp import MCPError
from mcp.server.context import ServerRequestContext
from mcp.server.subscriptions import SubscriptionBus
from mcp.shared.subscriptions import (
    SUBSCRIPTION_ID_META_KEY,
    ServerEvent,
    event_matches,
    event_to_notification,
)
from pydantic import BaseModel

from ice_mcp.server.protocol.resources import visible_uri
from ice_mcp.server.protocol.tasks import TaskView, negotiated

logger = logging.getLogger(__name__)

MAX_TASK_IDS = 1000  # per stream


@dataclass(frozen=True, slots=True)
class TaskChanged:
    """A run's status changed (its task's, for those who listen)."""

    run_id: str


class Notification(BaseModel):
    """A notification the SDK has no type for (the extension's own, an ack with extension fields)."""

    method: str
    params: dict[str, Any]


class Listen:
    """Serves `subscriptions/listen`; `task_changed(run_id)` tells the streams that listen for that task."""

    def __init__(self, bus: SubscriptionBus, view: TaskView, *, max_subscriptions: int = 1024,
                 max_buffered_events: int = 1024) -> None:
        self._bus = bus
        self._view = view
        self._max_subscriptions = max_subscriptions
        self._max_buffered = max_buffered_events
        self._streams: dict[Any, frozenset[str]] = {}  # send stream -> the task ids it listens for

    def task_changed(self, run_id: str) -> None:
        for stream, task_ids in list(self._streams.items()):
            if run_id in task_ids:
                self._offer(stream, TaskChanged(run_id))

    def _offer(self, stream: Any, event: ServerEvent | TaskChanged) -> None:
        try:
            stream.send_nowait(event)
        except anyio.ClosedResourceError:
            pass
        except anyio.WouldBlock:  # a client that stopped reading: end its stream (it re-listens, no replay)
            logger.warning("listen stream backlog full; ending the stream")
            self._streams.pop(stream, None)
            stream.close()

    async def __call__(self, ctx: ServerRequestContext[Any, Any],
                       params: types.SubscriptionsListenRequestParams) -> types.SubscriptionsListenResult:
        subscription_id = ctx.request_id
        if subscription_id is None:
            raise MCPError(types.INVALID_REQUEST, "subscriptions/listen requires a request id")
        if len(self._streams) >= self._max_subscriptions:
            raise MCPError(types.INTERNAL_ERROR, "Subscription limit reached")
        requested = params.notifications
        honored: dict[str, Any] = {key: True for key, flag in (
            ("toolsListChanged", requested.tools_list_changed), ("promptsListChanged", requested.prompts_list_changed),
            ("resourcesListChanged", requested.resources_list_changed)) if flag}
        if requested.resource_subscriptions:
            honored["resourceSubscriptions"] = list(requested.resource_subscriptions)
        task_ids = self._task_ids(ctx)
        if task_ids:
            honored["taskIds"] = sorted(task_ids)
        meta = {SUBSCRIPTION_ID_META_KEY: subscription_id}
        honored_filter = types.SubscriptionFilter.model_validate(honored)
        uris = frozenset(requested.resource_subscriptions or ())
        send, receive = anyio.create_memory_object_stream[ServerEvent | TaskChanged](self._max_buffered)

        def deliver(event: ServerEvent) -> None:
            if event_matches(honored_filter, uris, event):
                self._offer(send, event)

        unsubscribe: Callable[[], None] = self._bus.subscribe(deliver)
        self._streams[send] = task_ids
        try:
            await self._send(ctx, Notification(method="notifications/subscriptions/acknowledged",
                                               params={"notifications": honored, "_meta": meta}))
            async for event in receive:
                if isinstance(event, TaskChanged):
                    if (notification := self._task_notification(event.run_id, meta)) is not None:
                        await self._send(ctx, notification)
                elif visible_uri(self._view.record, str(getattr(event, "uri", ""))):  # not another user's run
                    await ctx.session.send_notification(event_to_notification(event, meta),
                                                        related_request_id=subscription_id)
        finally:
            try:
                unsubscribe()
            except Exception:  # a custom bus's bug must not keep the stream's slot
                logger.exception("bus unsubscribe failed")
            self._streams.pop(send, None)
            send.close()
            receive.close()
        return types.SubscriptionsListenResult(_meta=meta)

    @staticmethod
    def _task_ids(ctx: ServerRequestContext[Any, Any]) -> frozenset[str]:
        """The `taskIds` of the raw filter (the SDK's typed filter drops extension fields)."""
        raw = (ctx.params or {}).get("notifications")
        ids = raw.get("taskIds") if isinstance(raw, dict) and negotiated(ctx) else None
        if not isinstance(ids, list):
            return frozenset()
        return frozenset(i for i in ids[:MAX_TASK_IDS] if isinstance(i, str))

    def _task_notification(self, run_id: str, meta: dict[str, Any]) -> Notification | None:
        record = self._view.record(run_id)
        if record is None:
            return None
        return Notification(method="notifications/tasks", params={**self._view.detailed(record), "_meta": meta})

    @staticmethod
    async def _send(ctx: ServerRequestContext[Any, Any], notification: Notification) -> None:
        await ctx.session.send_notification(cast(types.ServerNotification, notification),
                                            related_request_id=ctx.request_id)

    def close(self) -> None:
        for stream in list(self._streams):
            stream.close()
