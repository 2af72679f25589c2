"""The four tiers together, on one backend chosen by URL: `memory` (in-process) or `redis://...`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

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

if TYPE_CHECKING:
    from ice_mcp.services import Services

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
        from ice_mcp.memory.redis_backend import redact

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
        from ice_mcp.memory.redis_backend import (
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
    raise ValueError(f"unknown memory backend {backend!r}: use 'memory' or a redis:// URL")


def memory_for(services: Services, backend: str | None = None) -> MemoryStore:
    """The run's memory store on `backend` (default: the `memory_backend` setting), shared per URL."""
    url = backend or services.settings.memory_backend or "memory"
    return services.resource(f"memory:{url}", lambda _services: open_memory(url))
