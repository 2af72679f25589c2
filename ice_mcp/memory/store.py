"""The four tiers together, on one backend chosen by URL: `memory` (in-process) or `redis://...`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ice_mcp.memory.inprocess import (
    InProcessEpisodic,
    InProcessProcedural,
    InProcessSemantic,
    InProcessWorking,
)
from ice_mcp.memory.types import (
    EpisodicMemory,
    MemoryUnavailable,
    ProceduralMemory,
    SemanticMemory,
    WorkingMemory,
)

DEFAULT_PREFIX = "ice_mcp:mem:"


@dataclass(slots=True)
class MemoryStore:
    backend: str
    working: WorkingMemory
    episodic: EpisodicMemory
    semantic: SemanticMemory
    procedural: ProceduralMemory
    _client: Any = None

    async def ping(self) -> None:
        """Raise `MemoryUnavailable` now rather than at first use."""
        if self._client is None:
            return
        from ice_mcp.memory.redis_backend import redact  # a client exists: redis is loaded already

        try:
            await self._client.ping()
        except Exception as exc:
            raise MemoryUnavailable(f"memory backend {redact(self.backend)} is unreachable: {exc}") from None

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()


def open_memory(backend: str = "memory", *, prefix: str = DEFAULT_PREFIX) -> MemoryStore:
    """A store on `backend`: `memory` / `memory://` (in-process) or a `redis://` / `rediss://` URL.

    Nothing connects yet; a Redis that is down fails the first operation within a second
    with `MemoryUnavailable`.
    """
    if backend in ("", "memory", "memory://", "inprocess"):
        return MemoryStore(
            backend="memory",
            working=InProcessWorking(),
            episodic=InProcessEpisodic(),
            semantic=InProcessSemantic(),
            procedural=InProcessProcedural(),
        )
    if backend.startswith(("redis://", "rediss://", "unix://")):
        from ice_mcp.memory.redis_backend import (  # the redis client, only for a Redis backend
            RedisEpisodic,
            RedisProcedural,
            RedisSemantic,
            RedisWorking,
            connect,
        )

        client = connect(backend)
        return MemoryStore(
            backend=backend,
            working=RedisWorking(client, backend, prefix),
            episodic=RedisEpisodic(client, backend, prefix),
            semantic=RedisSemantic(client, backend, prefix),
            procedural=RedisProcedural(client, backend, prefix),
            _client=client,
        )
    raise MemoryUnavailable(f"unknown memory backend {backend!r}: use 'memory' or a redis:// URL")

