"""max_concurrent_runs (`serve --max-runs`, ICE_MCP_MAX_RUNS): a replica runs at most N runs at once,
the others wait for a slot in arrival order and can be cancelled while they wait."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from ice_mcp import Orchestrator, Registry, Settings


async def test_runs_beyond_the_slots_wait_their_turn(tmp_path: Path) -> None:
    running, most = 0, 0
    order: list[int] = []

    async def hold(n: int) -> dict[str, Any]:
        nonlocal running, most
        running += 1
        most = max(most, running)
        order.append(n)
        await asyncio.sleep(0.1)
        running -= 1
        return {"n": n}

    registry = Registry()
    registry.add_tool(hold)
    orc = Orchestrator(registry=registry, settings=Settings(data_dir=tmp_path, max_concurrent_runs=2))
    bp = {"name": "held", "inputs": {"type": "object", "properties": {"n": {"type": "integer"}}},
          "nodes": [{"id": "h", "type": "tool", "tool_name": "hold", "tool_args": {"n": "{{ inputs.n }}"}}]}
    try:
        handles = [await orc.start(bp, {"n": n}) for n in range(6)]
        queued = handles[5]
        await asyncio.sleep(0.05)
        assert queued.record.status == "running" and not queued.record.nodes  # waiting for a slot
        assert orc.get_run(queued.run_id) is not None
        assert await orc.cancel(queued.run_id)
        records = [await handle.wait(timeout=5) for handle in handles]
        assert [r.status for r in records] == ["succeeded"] * 5 + ["cancelled"]
        assert most == 2 and order == [0, 1, 2, 3, 4]
    finally:
        await orc.aclose()
