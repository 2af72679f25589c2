"""The four memory tiers' records and interfaces, whatever the backend."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, fields
from typing import Any, Protocol

from ice_mcp.errors import IceError


class MemoryUnavailable(IceError):
    """The memory backend cannot be reached (Redis down, wrong URL)."""

    code = "memory_unavailable"


def _fields(record: Any) -> dict[str, Any]:
    """A dataclass's fields by name, values as they are (no deep copy, unlike dataclasses.asdict)."""
    return {f.name: getattr(record, f.name) for f in fields(record)}


@dataclass(frozen=True, slots=True)
class Episode:
    """Something that happened: under a key, at a time, with an outcome and tags."""

    id: str
    key: str
    content: Any
    timestamp: float
    outcome: str | None = None
    tags: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {**_fields(self), "tags": list(self.tags)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Episode:
        return cls(
            id=str(data["id"]),
            key=str(data["key"]),
            content=data.get("content"),
            timestamp=float(data["timestamp"]),
            outcome=data.get("outcome"),
            tags=tuple(data.get("tags") or ()),
        )


@dataclass(frozen=True, slots=True)
class StrategyStats:
    category: str
    strategy: str
    attempts: int = 0
    successes: int = 0

    @property
    def success_rate(self) -> float:
        return self.successes / self.attempts if self.attempts else 0.0

    @property
    def score(self) -> float:
        """Laplace-smoothed success rate: one lucky try does not beat a long good record."""
        return (self.successes + 1) / (self.attempts + 2)

    def as_dict(self) -> dict[str, Any]:
        return {**_fields(self), "success_rate": self.success_rate}


class WorkingMemory(Protocol):
    """Scratch space of one run or session; gone when the session is cleared."""

    async def set(self, session: str, key: str, value: Any) -> None: ...
    async def get(self, session: str, key: str, default: Any = None) -> Any: ...
    async def all(self, session: str) -> dict[str, Any]: ...
    async def clear(self, session: str) -> None: ...


class EpisodicMemory(Protocol):
    """Events with timestamps; searched by key, tag and time window, newest first.

    A backend subclasses it and implements `_keep` and `_search`: recording and the search's
    arguments are the same on every backend."""

    async def record(
        self,
        key: str,
        content: Any,
        *,
        outcome: str | None = None,
        tags: tuple[str, ...] | list[str] = (),
        timestamp: float | None = None,
    ) -> Episode:
        """Keep a new episode, stamped now unless `timestamp` is given, each tag once; returns it as kept."""
        return await self._keep(Episode(
            id=uuid.uuid4().hex,
            key=key,
            content=content,
            timestamp=time.time() if timestamp is None else float(timestamp),
            outcome=outcome,
            tags=tuple(dict.fromkeys(tags)),
        ))

    async def search(
        self,
        *,
        key: str | None = None,
        tag: str | None = None,
        since: float | None = None,
        until: float | None = None,
        limit: int = 20,
    ) -> list[Episode]:
        """At most `limit` episodes, newest first, under `key` and with `tag` (when given), timed within
        [`since`, `until`]."""
        return await self._search(key, tag, since, until, limit)

    async def _keep(self, episode: Episode) -> Episode:
        """Store a new episode; returns it as stored."""
        ...

    async def _search(self, key: str | None, tag: str | None, since: float | None, until: float | None,
                      limit: int) -> list[Episode]: ...


class SemanticMemory(Protocol):
    """Facts about entities, grouped by domain; constant-time lookup by domain and entity."""

    async def add(self, domain: str, entity: str, fact: Any) -> None: ...
    async def get(self, domain: str, entity: str) -> list[Any]: ...
    async def entities(self, domain: str) -> list[str]: ...
    async def forget(self, domain: str, entity: str) -> None: ...


class ProceduralMemory(Protocol):
    """Strategies per category with attempt and success counts."""

    async def record(self, category: str, strategy: str, success: bool) -> StrategyStats: ...
    async def stats(self, category: str) -> list[StrategyStats]: ...

    async def best(self, category: str, *, min_attempts: int = 1) -> StrategyStats | None:
        """The category's strategy with the best `score` among those tried `min_attempts` times or more."""
        eligible = [s for s in await self.stats(category) if s.attempts >= min_attempts]
        if not eligible:
            return None
        return max(eligible, key=lambda s: (s.score, s.attempts, s.strategy))
