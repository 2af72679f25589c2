"""Tell clients what changed: the catalogue, the prompts, a subscribed resource (a run, a workflow).

2025 sessions hear by notification on their connection (resource updates only for the URIs they subscribed
to, log messages at or above the level they set); 2026 listeners through the subscription bus."""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import Callable
from typing import Any

from mcp.server.connection import allowed_log_levels
from mcp.server.context import ServerRequestContext
from mcp.server.subscriptions import (
    InMemorySubscriptionBus,
    PromptsListChanged,
    ResourcesListChanged,
    ResourceUpdated,
    ServerEvent,
    SubscriptionBus,
    ToolsListChanged,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

LOG_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
DEFAULT_LOG_LEVEL = "warning"  # what a 2025 session hears before it sets a level


def connection_of(ctx: ServerRequestContext[Any, Any]) -> Any:
    """The connection a request came on (one per 2025 session; a fresh one per 2026 request)."""
    return getattr(ctx.session, "_connection", None)

logger = logging.getLogger(__name__)


class CountedBus:
    """A subscription bus that knows how many listeners it has, so that a run's status change with nobody
    listening costs no task (one per status event of every call otherwise)."""

    def __init__(self, bus: SubscriptionBus) -> None:
        self._bus = bus
        self.listeners = 0

    async def publish(self, event: ServerEvent) -> None:
        await self._bus.publish(event)

    def subscribe(self, listener: Callable[[ServerEvent], None]) -> Callable[[], None]:
        unsubscribe = self._bus.subscribe(listener)
        self.listeners += 1
        done = False

        def counted() -> None:
            nonlocal done
            if not done:
                done = True
                self.listeners -= 1
            unsubscribe()

        return counted


class ChangeNotifier:
    """Remembers 2025-era connections; on a change, notifies them and publishes to the bus."""

    def __init__(self, bus: SubscriptionBus | None = None) -> None:
        self.bus = CountedBus(bus or InMemorySubscriptionBus())
        self._connections: dict[int, weakref.ref[Any]] = {}  # by id: a request costs one dict lookup
        self._tasks: set[asyncio.Task[None]] = set()
        # Per 2025 connection: the log level it set, the resource URIs it subscribed to.
        self._levels: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()
        self._subscriptions: weakref.WeakKeyDictionary[Any, set[str]] = weakref.WeakKeyDictionary()

    # -- logging/setLevel and resources/subscribe (2025 sessions) ----------------------------------

    def set_level(self, ctx: ServerRequestContext[Any, Any], level: str) -> None:
        if (connection := connection_of(ctx)) is not None:
            self._levels[connection] = level

    def wants_log(self, ctx: ServerRequestContext[Any, Any], level: str) -> bool:
        """A 2025 session hears levels from the one it set; a 2026 request the levels its `_meta` opts in to."""
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            return level in allowed_log_levels(ctx.protocol_version, ctx.meta)
        wanted = self._levels.get(connection_of(ctx), DEFAULT_LOG_LEVEL)
        return LOG_LEVELS.index(level) >= LOG_LEVELS.index(wanted)

    def subscribe(self, ctx: ServerRequestContext[Any, Any], uri: str) -> None:
        if (connection := connection_of(ctx)) is not None:
            self._subscriptions.setdefault(connection, set()).add(uri)

    def unsubscribe(self, ctx: ServerRequestContext[Any, Any], uri: str) -> None:
        if (connection := connection_of(ctx)) is not None:
            self._subscriptions.get(connection, set()).discard(uri)

    def resource_updated(self, uri: str) -> None:
        """`uri` changed: tell the 2025 sessions subscribed to it and the 2026 listeners (from any thread of the loop)."""
        if self.bus.listeners or (self._subscriptions and any(uri in uris for uris in list(self._subscriptions.values()))):
            self._spawn(self._announce_update(uri))

    async def _announce_update(self, uri: str) -> None:
        for connection, uris in list(self._subscriptions.items()):
            if uri in uris:
                try:
                    await connection.send_resource_updated(uri)
                except Exception:
                    logger.debug("resources/updated to a closed session", exc_info=True)
        await self.bus.publish(ResourceUpdated(uri))

    def _spawn(self, coroutine: Any) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            coroutine.close()
            return  # no server running: nobody to tell
        task = loop.create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def remember(self, ctx: ServerRequestContext[Any, Any]) -> None:
        """Called by each request handler: a 2025-era connection is told of changes from then on."""
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            return
        connection = getattr(ctx.session, "_connection", None)
        if connection is not None and id(connection) not in self._connections:
            key = id(connection)
            self._connections[key] = weakref.ref(connection, lambda _ref: self._connections.pop(key, None))

    def connections(self) -> list[Any]:
        return [c for c in (ref() for ref in list(self._connections.values())) if c is not None]

    def changed(self) -> None:
        """Called from the registry's (synchronous) listener."""
        self._spawn(self._announce())

    def prompts_changed_soon(self) -> None:
        self._spawn(self.prompts_changed())

    async def _announce(self) -> None:
        for connection in self.connections():
            try:
                await connection.send_tool_list_changed()
                await connection.send_resource_list_changed()
            except Exception:  # a closed session: it will be collected
                logger.debug("list_changed to a closed session", exc_info=True)
        try:
            await self.bus.publish(ToolsListChanged())
            await self.bus.publish(ResourcesListChanged())
        except Exception:
            logger.warning("publishing list_changed failed", exc_info=True)

    async def prompts_changed(self) -> None:
        for connection in self.connections():
            try:
                await connection.send_prompt_list_changed()
            except Exception:
                logger.debug("prompt list_changed to a closed session", exc_info=True)
        await self.bus.publish(PromptsListChanged())
