"""A large catalogue: 300 workflows behind tools/list, workflow_search's ranking and its latency.

    python bench/catalogue.py              # 20 rounds of the 52 labelled queries
    python bench/catalogue.py --rounds 50

Prints tools/list's size (tools, bytes), the top-5 hit rate over the labelled queries, and workflow_search's
p50/p95: through the MCP SDK client in memory (a whole tools/call) and the ranking alone.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
# bench/ holds mcp.py: keep it off sys.path so `import mcp` finds the SDK; the test fixtures are reused.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]
sys.path[:0] = [str(HERE.parent), str(HERE.parent / "tests" / "server")]

import argparse  # noqa: E402
import asyncio  # noqa: E402
import json  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

from catalogue_fixtures import LABELLED, catalogue, name_of  # noqa: E402
from mcp import Client  # noqa: E402
from mcp_helpers import make_options, make_orchestrator  # noqa: E402

from ice_mcp.server import build_server  # noqa: E402


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * fraction))]


async def main(rounds: int) -> None:
    with tempfile.TemporaryDirectory() as folder:
        orc = make_orchestrator(Path(folder))
        try:
            for blueprint in catalogue():
                orc.register_blueprint(blueprint)
            server = build_server(orc, make_options())
            async with Client(server) as client:
                listing = await client.list_tools()
                size = len(json.dumps(listing.model_dump(mode="json", by_alias=True, exclude_none=True)).encode())
                print(f"workflows: {len(orc.registry.workflows)}; tools/list: {len(listing.tools)} tools, "
                      f"{size / 1024:.1f} KB, cursor {listing.next_cursor}")

                hits, calls = 0, []
                for round_number in range(rounds):
                    for query, (domain, job) in LABELLED:
                        started = time.perf_counter()
                        result = await client.call_tool("workflow_search", {"query": query})
                        calls.append(time.perf_counter() - started)
                        if round_number == 0:
                            names = [found["name"] for found in (result.structured_content or {})["results"]]
                            hits += name_of(domain, job) in names
                print(f"top-5 hit rate: {hits}/{len(LABELLED)} = {hits / len(LABELLED):.1%}")
                print(f"workflow_search over MCP (in memory, {len(calls)} calls): "
                      f"p50 {percentile(calls, 0.5) * 1e3:.2f} ms, p95 {percentile(calls, 0.95) * 1e3:.2f} ms")

            ranking = []
            catalogue_ = server.ice_catalogue
            for _ in range(rounds):
                for query, _wanted in LABELLED:
                    started = time.perf_counter()
                    catalogue_.search(query, 5)
                    ranking.append(time.perf_counter() - started)
            print(f"ranking alone ({len(ranking)} queries): p50 {percentile(ranking, 0.5) * 1e3:.3f} ms, "
                  f"p95 {percentile(ranking, 0.95) * 1e3:.3f} ms")
            catalogue_.invalidate()
            started = time.perf_counter()
            catalogue_.search("rebuild", 5)
            print(f"rebuilding the catalogue and its index after a change: {(time.perf_counter() - started) * 1e3:.1f} ms")
        finally:
            await orc.aclose()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    asyncio.run(main(parser.parse_args().rounds))
