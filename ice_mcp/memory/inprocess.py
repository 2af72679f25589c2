"""In-process backends (the default): dictionaries and time-sorted indexes, gone with the process."""

from __future__ import annotations

import bisect
import copy
import dataclasses
from array import array
from collections import defaultdict
from typing import Any

from ice_mcp.memory.types import Episode, EpisodicMemory, ProceduralMemory, StrategyStats


class InProcessWorking:
    def __init__(self) -> None:
        self._sessions: dict[str, dict[str, Any]] = defaultdict(dict)

    async def set(self, session: str, key: str, value: Any) -> None:
        self._sessions[session][key] = copy.deepcopy(value)

    async def get(self, session: str, key: str, default: Any = None) -> Any:
        return copy.deepcopy(self._sessions.get(session, {}).get(key, default))

    async def all(self, session: str) -> dict[str, Any]:
        return copy.deepcopy(self._sessions.get(session, {}))

    async def clear(self, session: str) -> None:
        self._sessions.pop(session, None)


class _TimeIndex:
    """Episodes sorted by time: timestamps in a packed array (cheap to bisect), episodes beside."""

    __slots__ = ("items", "times")

    def __init__(self) -> None:
        self.times = array("d")
        self.items: list[Episode] = []

    def __len__(self) -> int:
        return len(self.items)

    def add(self, episode: Episode) -> None:
        if not self.times or self.times[-1] <= episode.timestamp:
            self.times.append(episode.timestamp)
            self.items.append(episode)
        else:
            position = bisect.bisect_right(self.times, episode.timestamp)
            self.times.insert(position, episode.timestamp)
            self.items.insert(position, episode)

    def window(self, since: float | None, until: float | None) -> tuple[int, int]:
        low = 0 if since is None else bisect.bisect_left(self.times, since)
        high = len(self.times) if until is None else bisect.bisect_right(self.times, until)
        return low, high


_EMPTY = _TimeIndex()


class InProcessEpisodic(EpisodicMemory):
    """Each key, each tag and the whole log keep a time-sorted index: a search bisects to the
    time window and walks back from its end, so its cost does not grow with the log."""

    def __init__(self) -> None:
        self._all = _TimeIndex()
        self._by_key: dict[str, _TimeIndex] = defaultdict(_TimeIndex)
        self._by_tag: dict[str, _TimeIndex] = defaultdict(_TimeIndex)

    def __len__(self) -> int:
        return len(self._all)

    async def _keep(self, episode: Episode) -> Episode:
        kept = dataclasses.replace(episode, content=copy.deepcopy(episode.content))
        self.add(kept)
        return kept

    def add(self, episode: Episode) -> None:
        self._all.add(episode)
        self._by_key[episode.key].add(episode)
        for tag in episode.tags:
            self._by_tag[tag].add(episode)

    async def _search(self, key: str | None, tag: str | None, since: float | None, until: float | None,
                      limit: int) -> list[Episode]:
        by_key = self._by_key.get(key, _EMPTY) if key is not None else None
        by_tag = self._by_tag.get(tag, _EMPTY) if tag is not None else None
        if by_key is not None and (by_tag is None or len(by_key) <= len(by_tag)):
            index, check_key, check_tag = by_key, False, tag is not None
        elif by_tag is not None:
            index, check_key, check_tag = by_tag, key is not None, False
        else:
            index, check_key, check_tag = self._all, False, False
        low, high = index.window(since, until)
        items = index.items
        if not check_key and not check_tag:
            return items[max(low, high - limit):high][::-1]
        found: list[Episode] = []
        for position in range(high - 1, low - 1, -1):
            episode = items[position]
            if (check_key and episode.key != key) or (check_tag and tag not in episode.tags):
                continue
            found.append(episode)
            if len(found) >= limit:
                break
        return found


class InProcessSemantic:
    def __init__(self) -> None:
        self._domains: dict[str, dict[str, list[Any]]] = defaultdict(dict)

    async def add(self, domain: str, entity: str, fact: Any) -> None:
        facts = self._domains[domain].setdefault(entity, [])
        if fact not in facts:
            facts.append(copy.deepcopy(fact))

    def add_now(self, domain: str, entity: str, fact: Any) -> None:
        """`add` for bulk loading from synchronous code (benchmarks, imports)."""
        self._domains[domain].setdefault(entity, []).append(fact)

    async def get(self, domain: str, entity: str) -> list[Any]:
        facts = self._domains.get(domain, {}).get(entity, [])
        return [f if isinstance(f, str | int | float | bool) else copy.deepcopy(f) for f in facts]

    async def entities(self, domain: str) -> list[str]:
        return sorted(self._domains.get(domain, {}))

    async def forget(self, domain: str, entity: str) -> None:
        self._domains.get(domain, {}).pop(entity, None)

    async def domains(self) -> list[str]:
        return sorted(self._domains)


class InProcessProcedural(ProceduralMemory):
    def __init__(self) -> None:
        self._counts: dict[str, dict[str, list[int]]] = defaultdict(dict)

    async def record(self, category: str, strategy: str, success: bool) -> StrategyStats:
        counts = self._counts[category].setdefault(strategy, [0, 0])
        counts[0] += 1
        counts[1] += int(success)
        return StrategyStats(category, strategy, counts[0], counts[1])

    async def stats(self, category: str) -> list[StrategyStats]:
        return [
            StrategyStats(category, strategy, a, s)
            for strategy, (a, s) in sorted(self._counts.get(category, {}).items())
        ]
