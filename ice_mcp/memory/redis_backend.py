"""Redis backends: episodes in sorted sets scored by time, facts in per-entity lists, strategy
counts in hashes. Every query is a keyed lookup or a bounded range read, never a scan."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import redis.asyncio as aioredis
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError
from redis.retry import Retry

from ice_mcp.memory.types import (
    Episode,
    EpisodicMemory,
    MemoryUnavailable,
    ProceduralMemory,
    StrategyStats,
)

CONNECT_TIMEOUT = 0.8
SOCKET_TIMEOUT = 5.0
WORKING_TTL_SECONDS = 7 * 24 * 3600

_ADD_FACT = """
if redis.call('SADD', KEYS[2], ARGV[1]) == 1 then
  redis.call('RPUSH', KEYS[1], ARGV[1])
  redis.call('SADD', KEYS[3], ARGV[2])
end
return 1
"""


# One round trip for a search: walk the time index newest first, read the episodes, filter by tag.
_SEARCH = """
local limit, page, tag = tonumber(ARGV[3]), tonumber(ARGV[4]), ARGV[5]
local found, offset = {}, 0
while #found < limit do
  local ids = redis.call('ZRANGE', KEYS[1], ARGV[1], ARGV[2], 'BYSCORE', 'REV', 'LIMIT', offset, page)
  if #ids == 0 then break end
  offset = offset + #ids
  local rows = redis.call('HMGET', KEYS[2], unpack(ids))
  for i = 1, #rows do
    local row = rows[i]
    if row then
      local keep = tag == ''
      if not keep then
        for _, t in ipairs(cjson.decode(row)['tags']) do
          if t == tag then keep = true break end
        end
      end
      if keep then
        found[#found + 1] = row
        if #found >= limit then break end
      end
    end
  end
  if #ids < page then break end
end
return found
"""


def redact(url: str) -> str:
    parts = urlsplit(url)
    if parts.password:
        netloc = f"{parts.username or ''}:***@{parts.hostname}" + (f":{parts.port}" if parts.port else "")
        return urlunsplit(parts._replace(netloc=netloc))
    return url


def connect(url: str) -> aioredis.Redis:
    """A client that fails fast: a down server is an error within a second, not a hang."""
    return aioredis.Redis.from_url(
        url,
        socket_connect_timeout=CONNECT_TIMEOUT,
        socket_timeout=SOCKET_TIMEOUT,
        retry=Retry(NoBackoff(), 0),
        decode_responses=True,
    )


def _dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


class _RedisTier:
    def __init__(self, client: aioredis.Redis, url: str, prefix: str) -> None:
        self.r = client
        self.url = url
        self.prefix = prefix

    @contextmanager
    def guard(self) -> Iterator[None]:
        try:
            yield
        except (RedisConnectionError, RedisTimeoutError, OSError) as exc:
            raise MemoryUnavailable(f"memory backend {redact(self.url)} is unreachable: {exc}") from None
        except RedisError as exc:
            raise MemoryUnavailable(f"memory backend {redact(self.url)} failed: {exc}") from None

    @asynccontextmanager
    async def guarded_pipeline(self, *, transaction: bool) -> AsyncIterator[aioredis.client.Pipeline]:
        """A pipeline (queue its commands, then execute it) whose Redis errors are `MemoryUnavailable`."""
        with self.guard():
            async with self.r.pipeline(transaction=transaction) as pipe:
                yield pipe


class RedisWorking(_RedisTier):
    def _key(self, session: str) -> str:
        return f"{self.prefix}wm:{session}"

    async def set(self, session: str, key: str, value: Any) -> None:
        async with self.guarded_pipeline(transaction=True) as pipe:
            pipe.hset(self._key(session), key, _dumps(value))
            pipe.expire(self._key(session), WORKING_TTL_SECONDS)
            await pipe.execute()

    async def get(self, session: str, key: str, default: Any = None) -> Any:
        with self.guard():
            raw = await self.r.hget(self._key(session), key)
        return default if raw is None else json.loads(raw)

    async def all(self, session: str) -> dict[str, Any]:
        with self.guard():
            raw = await self.r.hgetall(self._key(session))
        return {str(k): json.loads(v) for k, v in raw.items()}

    async def clear(self, session: str) -> None:
        with self.guard():
            await self.r.delete(self._key(session))


class RedisEpisodic(_RedisTier, EpisodicMemory):
    """`ep:data` holds episodes by id; `ep:all`, `ep:key:<key>` and `ep:tag:<tag>` are sorted
    sets of ids scored by timestamp, read newest first within the time window."""

    def __init__(self, client: aioredis.Redis, url: str, prefix: str) -> None:
        super().__init__(client, url, prefix)
        self._search_script = client.register_script(_SEARCH)

    def _data(self) -> str:
        return f"{self.prefix}ep:data"

    def _index(self, kind: str, name: str | None = None) -> str:
        return f"{self.prefix}ep:{kind}" + (f":{name}" if name is not None else "")

    async def _keep(self, episode: Episode) -> Episode:
        await self.add_many([episode])
        return episode

    async def add_many(self, episodes: list[Episode]) -> None:
        async with self.guarded_pipeline(transaction=False) as pipe:
            for episode in episodes:
                member = {episode.id: episode.timestamp}
                pipe.hset(self._data(), episode.id, _dumps(episode.as_dict()))
                pipe.zadd(self._index("all"), member)
                pipe.zadd(self._index("key", episode.key), member)
                for tag in episode.tags:
                    pipe.zadd(self._index("tag", tag), member)
            await pipe.execute()

    async def _search(self, key: str | None, tag: str | None, since: float | None, until: float | None,
                      limit: int) -> list[Episode]:
        if key is not None:
            index = self._index("key", key)
        elif tag is not None:
            index = self._index("tag", tag)
        else:
            index = self._index("all")
        high = "+inf" if until is None else until
        low = "-inf" if since is None else since
        page = max(limit, 1) * (4 if key is not None and tag is not None else 1)
        tag_filter = tag if key is not None and tag is not None else ""
        with self.guard():
            rows = await self._search_script(keys=[index, self._data()], args=[high, low, limit, page, tag_filter])
        return [Episode.from_dict(json.loads(row)) for row in rows]


class RedisSemantic(_RedisTier):
    """Facts of one entity in a list `sem:<domain>:e:<entity>` (deduplicated through a set);
    the domain's entities in a set `sem:<domain>:entities`."""

    def __init__(self, client: aioredis.Redis, url: str, prefix: str) -> None:
        super().__init__(client, url, prefix)
        self._add_fact = client.register_script(_ADD_FACT)

    def _facts(self, domain: str, entity: str) -> str:
        return f"{self.prefix}sem:{domain}:e:{entity}"

    def _entities(self, domain: str) -> str:
        return f"{self.prefix}sem:{domain}:entities"

    async def add(self, domain: str, entity: str, fact: Any) -> None:
        key = self._facts(domain, entity)
        with self.guard():
            await self._add_fact(keys=[key, f"{key}:seen", self._entities(domain)], args=[_dumps(fact), entity])

    async def add_many(self, items: list[tuple[str, str, Any]]) -> None:
        """Bulk load without deduplication (imports, benchmarks)."""
        async with self.guarded_pipeline(transaction=False) as pipe:
            for domain, entity, fact in items:
                encoded = _dumps(fact)
                key = self._facts(domain, entity)
                pipe.rpush(key, encoded)
                pipe.sadd(f"{key}:seen", encoded)
                pipe.sadd(self._entities(domain), entity)
            await pipe.execute()

    async def get(self, domain: str, entity: str) -> list[Any]:
        with self.guard():
            raw = await self.r.lrange(self._facts(domain, entity), 0, -1)
        return [json.loads(item) for item in raw]

    async def entities(self, domain: str) -> list[str]:
        with self.guard():
            return sorted(str(e) for e in await self.r.smembers(self._entities(domain)))

    async def forget(self, domain: str, entity: str) -> None:
        key = self._facts(domain, entity)
        async with self.guarded_pipeline(transaction=True) as pipe:
            pipe.delete(key, f"{key}:seen")
            pipe.srem(self._entities(domain), entity)
            await pipe.execute()


class RedisProcedural(_RedisTier, ProceduralMemory):
    """`proc:<category>` is a hash of `<strategy>|a` (attempts) and `<strategy>|s` (successes)."""

    def _key(self, category: str) -> str:
        return f"{self.prefix}proc:{category}"

    async def record(self, category: str, strategy: str, success: bool) -> StrategyStats:
        async with self.guarded_pipeline(transaction=True) as pipe:
            pipe.hincrby(self._key(category), f"{strategy}|a", 1)
            pipe.hincrby(self._key(category), f"{strategy}|s", int(success))
            attempts, successes = await pipe.execute()
        return StrategyStats(category, strategy, int(attempts), int(successes))

    async def stats(self, category: str) -> list[StrategyStats]:
        with self.guard():
            raw = await self.r.hgetall(self._key(category))
        counts: dict[str, list[int]] = {}
        for field_name, value in raw.items():
            strategy, _, kind = str(field_name).rpartition("|")
            slot = counts.setdefault(strategy, [0, 0])
            slot[0 if kind == "a" else 1] = int(value)
        return [StrategyStats(category, s, a, ok) for s, (a, ok) in sorted(counts.items())]
