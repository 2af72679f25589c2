from __future__ import annotations

import socket
import time
import uuid

import pytest

from ice_mcp.memory import MemoryStore, MemoryUnavailable, open_memory


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_working_memory_is_per_session(store: MemoryStore) -> None:
    await store.working.set("run1", "plan", {"steps": [1, 2]})
    await store.working.set("run2", "plan", "other")
    assert await store.working.get("run1", "plan") == {"steps": [1, 2]}
    assert await store.working.all("run2") == {"plan": "other"}
    await store.working.clear("run1")
    assert await store.working.get("run1", "plan", "gone") == "gone"


async def test_episodic_search_by_key_tag_and_window_newest_first(store: MemoryStore) -> None:
    base = 1_700_000_000.0
    for i in range(10):
        await store.episodic.record(
            "deploy" if i % 2 == 0 else "backup",
            {"n": i},
            outcome="ok" if i != 4 else "failed",
            tags=["prod"] if i < 6 else ["staging"],
            timestamp=base + i,
        )
    by_key = await store.episodic.search(key="deploy")
    assert [e.content["n"] for e in by_key] == [8, 6, 4, 2, 0]
    assert by_key[2].outcome == "failed"
    by_tag = await store.episodic.search(tag="prod", limit=3)
    assert [e.content["n"] for e in by_tag] == [5, 4, 3]
    window = await store.episodic.search(since=base + 3, until=base + 6)
    assert [e.content["n"] for e in window] == [6, 5, 4, 3]
    both = await store.episodic.search(key="deploy", tag="staging")
    assert [e.content["n"] for e in both] == [8, 6]
    keyed_window = await store.episodic.search(key="backup", since=base + 2, until=base + 7)
    assert [e.content["n"] for e in keyed_window] == [7, 5, 3]
    assert await store.episodic.search(key="nothing") == []


async def test_episodic_default_timestamp_is_now(store: MemoryStore) -> None:
    before = time.time()
    episode = await store.episodic.record("k", "hello", tags=("a", "a", "b"))
    assert episode.timestamp >= before
    assert episode.tags == ("a", "b")
    assert (await store.episodic.search(key="k"))[0] == episode


async def test_semantic_lookup_by_domain_and_entity(store: MemoryStore) -> None:
    await store.semantic.add("geo", "paris", "capital of France")
    await store.semantic.add("geo", "paris", {"population": 2_100_000})
    await store.semantic.add("geo", "paris", "capital of France")  # a repeat is not stored twice
    await store.semantic.add("geo", "lyon", "in France")
    await store.semantic.add("people", "paris", "a figure of Greek myth")
    assert await store.semantic.get("geo", "paris") == ["capital of France", {"population": 2_100_000}]
    assert await store.semantic.get("people", "paris") == ["a figure of Greek myth"]
    assert await store.semantic.get("geo", "rome") == []
    assert await store.semantic.entities("geo") == ["lyon", "paris"]
    await store.semantic.forget("geo", "lyon")
    assert await store.semantic.entities("geo") == ["paris"]


async def test_procedural_best_strategy(store: MemoryStore) -> None:
    for success in (True, True, True, False):
        await store.procedural.record("parse_csv", "pandas", success)
    for success in (True, False, False):
        await store.procedural.record("parse_csv", "regex", success)
    lucky = await store.procedural.record("parse_csv", "guess", True)
    assert (lucky.attempts, lucky.successes) == (1, 1)
    best = await store.procedural.best("parse_csv")
    assert best is not None and best.strategy == "pandas"
    assert (best.attempts, best.successes) == (4, 3)
    assert (await store.procedural.best("parse_csv", min_attempts=5)) is None
    assert await store.procedural.best("unknown") is None
    assert [s.strategy for s in await store.procedural.stats("parse_csv")] == ["guess", "pandas", "regex"]


async def test_redis_data_survives_a_new_connection(redis_url: str) -> None:
    prefix = f"test:{uuid.uuid4().hex}:"
    first = open_memory(redis_url, prefix=prefix)
    await first.episodic.record("job", {"rows": 3}, outcome="ok", tags=["nightly"], timestamp=100.0)
    await first.semantic.add("crm", "acme", "pays late")
    await first.procedural.record("retry", "backoff", True)
    await first.working.set("session", "cursor", 42)
    await first.aclose()

    second = open_memory(redis_url, prefix=prefix)
    try:
        [episode] = await second.episodic.search(tag="nightly")
        assert (episode.key, episode.content, episode.outcome, episode.timestamp) == ("job", {"rows": 3}, "ok", 100.0)
        assert await second.semantic.get("crm", "acme") == ["pays late"]
        best = await second.procedural.best("retry")
        assert best is not None and (best.strategy, best.attempts) == ("backoff", 1)
        assert await second.working.get("session", "cursor") == 42
    finally:
        await second.aclose()


async def test_redis_down_is_a_clear_error_quickly() -> None:
    url = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there
    memory = open_memory(url)
    try:
        with pytest.raises(MemoryUnavailable, match=r"memory backend redis://127\.0\.0\.1:\d+/0 is unreachable"):
            await memory.episodic.search(key="x")
        with pytest.raises(MemoryUnavailable):
            await memory.semantic.add("d", "e", "f")
        with pytest.raises(MemoryUnavailable):
            await memory.ping()
    finally:
        await memory.aclose()


def test_unknown_backend_is_refused() -> None:
    with pytest.raises(MemoryUnavailable, match="unknown memory backend"):
        open_memory("postgres://nope")
