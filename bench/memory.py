"""Memory lookups at 1k, 100k and 1M items, against a linear scan of the same data.

    .venv/bin/python bench/memory.py                 # in-process backend, 1k / 100k / 1M
    .venv/bin/python bench/memory.py --sizes 1000,100000 --redis redis://127.0.0.1:6379/15

Semantic: facts spread over 100 domains; a query is a lookup by (domain, entity).
Episodic: episodes spread over 100 keys, timestamps increasing; a query is "the 10 newest
episodes of this key", and "the 10 newest of this key in a time window". The linear scan
answers the same queries by walking every item. Prints microseconds per query and the ratio
of the largest size to the smallest: flat means the index does not grow with the data.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import random
import statistics
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ice_mcp.memory import open_memory
from ice_mcp.memory.inprocess import InProcessEpisodic, InProcessSemantic
from ice_mcp.memory.types import Episode

DOMAINS = 100
KEYS = 100
LIMIT = 10
INDEXED_QUERIES = 2_000
SCAN_BUDGET_SECONDS = 1.0
COLD_QUERIES = 200


async def per_query(queries: list[Any], run: Callable[[Any], Awaitable[Any]], repeats: int = 3) -> float:
    """Median over `repeats` passes of the mean microseconds per query (after one warm-up pass)."""
    for query in queries[:200]:
        await run(query)
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        for query in queries:
            await run(query)
        samples.append((time.perf_counter() - start) / len(queries) * 1e6)
    return statistics.median(samples)


_SOURCE = bytearray(64 * 1024 * 1024)
_TARGET = bytearray(64 * 1024 * 1024)


async def cold_per_query(queries: list[Any], run: Callable[[Any], Awaitable[Any]]) -> float:
    """Median microseconds of one query with the CPU caches flushed before it (64 MiB copied,
    twice the L3 of this machine): the fair comparison between a data set that fits in cache
    (1k) and one that does not (1M)."""
    times = []
    for query in queries[:COLD_QUERIES]:
        _TARGET[:] = _SOURCE
        start = time.perf_counter_ns()
        await run(query)
        times.append((time.perf_counter_ns() - start) / 1000)
    return statistics.median(times)


def scan_queries(queries: list[Any], size: int) -> list[Any]:
    """As many queries as a linear scan can answer in about a second (at least 3)."""
    per_item_seconds = 60e-9
    count = max(3, min(len(queries), int(SCAN_BUDGET_SECONDS / (size * per_item_seconds))))
    return queries[:count]


def make_facts(size: int) -> list[tuple[str, str, str]]:
    entities_per_domain = max(1, size // DOMAINS)
    return [(f"d{i % DOMAINS}", f"e{i // DOMAINS % entities_per_domain}-{i}", f"fact {i}") for i in range(size)]


def make_episodes(size: int) -> list[Episode]:
    return [
        Episode(id=uuid.UUID(int=i).hex, key=f"k{i % KEYS}", content={"n": i}, timestamp=1_000_000.0 + i,
                outcome="ok", tags=(f"t{i % 7}",))
        for i in range(size)
    ]


async def bench_size(size: int, backend: str, rng: random.Random) -> dict[str, float]:
    facts = make_facts(size)
    episodes = make_episodes(size)
    store = open_memory(backend, prefix=f"bench:{uuid.uuid4().hex}:")
    start = time.perf_counter()
    if isinstance(store.semantic, InProcessSemantic) and isinstance(store.episodic, InProcessEpisodic):
        for domain, entity, fact in facts:
            store.semantic.add_now(domain, entity, fact)
        for episode in episodes:
            store.episodic.add(episode)
    else:
        for chunk in range(0, size, 10_000):
            await store.semantic.add_many(facts[chunk:chunk + 10_000])  # type: ignore[attr-defined]
            await store.episodic.add_many(episodes[chunk:chunk + 10_000])  # type: ignore[attr-defined]
    load_seconds = time.perf_counter() - start
    # Long-lived data out of the cyclic collector's way, as a server would do after loading.
    gc.collect()
    gc.freeze()

    fact_queries = [facts[rng.randrange(size)][:2] for _ in range(INDEXED_QUERIES)]
    key_queries = [f"k{rng.randrange(KEYS)}" for _ in range(INDEXED_QUERIES)]
    # A window holding about 30 episodes of each key, anywhere in the log.
    width = float(KEYS * 30)
    window_queries = []
    for key in key_queries:
        since = 1_000_000.0 + rng.random() * max(size - width, 0.0)
        window_queries.append((key, since, since + width))

    async def semantic_lookup(q: tuple[str, str]) -> Any:
        return await store.semantic.get(*q)

    async def episodic_by_key(key: str) -> Any:
        return await store.episodic.search(key=key, limit=LIMIT)

    async def episodic_window(q: tuple[str, float, float]) -> Any:
        return await store.episodic.search(key=q[0], since=q[1], until=q[2], limit=LIMIT)

    async def semantic_scan(q: tuple[str, str]) -> Any:
        return [f for d, e, f in facts if d == q[0] and e == q[1]]

    async def episodic_scan(key: str) -> Any:
        hits = [e for e in episodes if e.key == key]
        return sorted(hits, key=lambda e: e.timestamp, reverse=True)[:LIMIT]

    async def window_scan(q: tuple[str, float, float]) -> Any:
        hits = [e for e in episodes if e.key == q[0] and q[1] <= e.timestamp <= q[2]]
        return sorted(hits, key=lambda e: e.timestamp, reverse=True)[:LIMIT]

    # Both answer alike.
    assert await semantic_lookup(fact_queries[0]) == await semantic_scan(fact_queries[0])
    assert [e.id for e in await episodic_by_key(key_queries[0])] == [e.id for e in await episodic_scan(key_queries[0])]
    assert [e.id for e in await episodic_window(window_queries[0])] == [
        e.id for e in await window_scan(window_queries[0])
    ]
    indexed_count = INDEXED_QUERIES if store.backend == "memory" else 300
    result = {
        "load_s": load_seconds,
        "semantic_us": await per_query(fact_queries[:indexed_count], semantic_lookup),
        "episodic_key_us": await per_query(key_queries[:indexed_count], episodic_by_key),
        "episodic_window_us": await per_query(window_queries[:indexed_count], episodic_window),
        "semantic_cold_us": await cold_per_query(fact_queries, semantic_lookup),
        "episodic_key_cold_us": await cold_per_query(key_queries, episodic_by_key),
        "episodic_window_cold_us": await cold_per_query(window_queries, episodic_window),
        "semantic_scan_us": await per_query(scan_queries(fact_queries, size), semantic_scan, repeats=1),
        "episodic_scan_us": await per_query(scan_queries(key_queries, size), episodic_scan, repeats=1),
        "window_scan_us": await per_query(scan_queries(window_queries, size), window_scan, repeats=1),
    }
    await store.aclose()
    gc.unfreeze()
    return result


PAIRS = (("semantic_us", "semantic_scan_us"), ("episodic_key_us", "episodic_scan_us"),
         ("episodic_window_us", "window_scan_us"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1000,100000,1000000")
    parser.add_argument("--redis", default=None, help="a redis:// URL to bench the Redis backend instead")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    backend = args.redis or "memory"
    rng = random.Random(args.seed)
    print(f"backend: {backend}")
    print("microseconds per query: 'warm' = mean over a loop of queries, 'cold' = median of single")
    print("queries after flushing the CPU caches, 'scan' = a linear scan of the same data")
    print(f"{'':>17}{'semantic lookup':^30}{'episodic by key':^30}{'episodic key+window':^30}")
    print(f"{'items':>9} {'load s':>7}" + f"{'warm':>9} {'cold':>9} {'scan':>11}" * 3)
    results: dict[int, dict[str, float]] = {}
    for size in sizes:
        r = asyncio.run(bench_size(size, backend, rng))
        results[size] = r
        row = f"{size:>9} {r['load_s']:>7.2f}"
        for name, scan in PAIRS:
            row += f"{r[name]:>9.2f} {r[name.replace('_us', '_cold_us')]:>9.2f} {r[scan]:>11.1f}"
        print(row, flush=True)
    small, large = results[min(sizes)], results[max(sizes)]
    print(f"\n{max(sizes)} vs {min(sizes)} items, time per query:")
    for name, scan in PAIRS:
        cold = name.replace("_us", "_cold_us")
        print(f"  {name[:-3]:<16} cold x{large[cold] / small[cold]:.2f}   warm x{large[name] / small[name]:.2f}   "
              f"linear scan x{large[scan] / small[scan]:.0f}")


if __name__ == "__main__":
    main()
