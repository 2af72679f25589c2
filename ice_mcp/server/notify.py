"""Tell clients the catalogue changed: 2025 sessions by notification, 2026 listeners via the bus."""

from __future__ import annotations

import asyncio
import logging
import weakref
from typing import Any

from mcp.server.context import ServerRequestContext
from mcp.server.subscriptions import (
    InMemorySubscriptionBus,
    PromptsListChanged,
    ResourcesListChanged,
    SubscriptionBus,
    ToolsListChanged,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

logger = logging.getLogger(__name__)


class ChangeNotifier:
    """Remembers 2025-era connections; on a change, notifies them and publishes to the bus."""

    def __init__(self, bus: SubscriptionBus | None = None) -> None:
        self.bus: SubscriptionBus = bus or InMemorySubscriptionBus()
        self._connections: dict[int, weakref.ref[Any]] = {}  # by id: a request costs one dict lookup
        self._tasks: set[asyncio.Task[None]] = set()

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
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # no server running: nobody to tell
        task = loop.create_task(self._announce())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

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
