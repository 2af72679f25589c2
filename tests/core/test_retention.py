"""Retention: `ice-mcp runs prune --older-than` and ICE_MCP_RETENTION_DAYS delete runs that ended long enough
ago (their journals too) and never touch one under way or waiting; run_list pages by cursor and trigger."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

from ice_mcp import Orchestrator, Registry, Settings

ROOT = Path(__file__).resolve().parents[2]
QUICK = {"name": "quick", "nodes": [{"id": "q", "type": "tool", "tool_name": "render_template",
                                     "tool_args": {"template": "ok"}}]}
ASK = {"name": "ask", "nodes": [{"id": "ok", "type": "human", "approval": "Go?"}]}


def orchestrator(tmp_path: Path, **settings: object) -> Orchestrator:
    orc = Orchestrator(registry=Registry(), settings=Settings(data_dir=tmp_path / "data", workspace=tmp_path,
                                                              **settings))  # type: ignore[arg-type]
    orc.register_blueprint(QUICK)
    orc.register_blueprint(ASK)
    return orc


async def test_the_command_prunes_ended_runs_and_leaves_a_waiting_one(tmp_path: Path) -> None:
    orc = orchestrator(tmp_path)
    done = [await orc.run("quick", {}) for _ in range(3)]
    waiting = await orc.start("ask", {})
    await asyncio.sleep(0.2)
    assert orc.store is not None and orc.store.flush()
    command = [sys.executable, "-m", "ice_mcp", "runs", "prune", "--older-than", "0s", "--data-dir",
               str(tmp_path / "data"), "--workspace", str(tmp_path)]
    answer = subprocess.run(command, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert answer.returncode == 0, answer.stderr
    assert json.loads(answer.stdout)["pruned"] == 3
    assert all(orc.store.get(r.run_id) is None and orc.store.events(r.run_id) == [] for r in done)
    assert orc.get_run(waiting.run_id) is not None and orc.get_run(waiting.run_id).status == "input_required"
    bad = subprocess.run([*command[:5], "soon", *command[6:]], capture_output=True, text=True, timeout=120,
                         stdin=subprocess.DEVNULL, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert bad.returncode != 0 and "Traceback" not in bad.stderr
    waiting.cancel()
    await orc.aclose()


async def test_a_server_with_retention_days_prunes_at_start_and_lists_page_by_cursor(tmp_path: Path) -> None:
    first = orchestrator(tmp_path)
    old = [await first.run("quick", {}) for _ in range(2)]
    await first.aclose()
    await asyncio.sleep(3.5)
    server = orchestrator(tmp_path, retention_days=3 / 86400)  # three seconds
    newer = [await server.run("quick", {}) for _ in range(5)]
    server.recover_interrupted_runs()  # a server starts: retention runs now, then hourly
    for _ in range(100):
        if server.store is not None and server.store.get(old[0].run_id) is None:
            break
        await asyncio.sleep(0.05)
    assert server.get_run(old[0].run_id) is None and server.get_run(old[1].run_id) is None
    rows, cursor = server.runs_page(limit=3)
    more, end = server.runs_page(limit=3, cursor=cursor)
    assert [r["run_id"] for r in rows + more] == [r.run_id for r in reversed(newer)] and end is None
    assert server.runs_page(trigger="schedule")[0] == [] and len(server.runs_page(trigger="call")[0]) == 5
    await server.aclose()
