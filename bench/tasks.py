"""Tasks and questions over MCP: what a task costs a client, measured against a real HTTP server.

1. Create: `tools/call` of an `execution: task` workflow until its CreateTaskResult (the run started and
   its record on disk, SQLite WAL with the writer thread) - the median and p95 over N calls.
2. Poll: `tasks/get` of a working task (the record read from the live run).
3. Answer: `tasks/update` of an approval gate until the ack (validated, journaled, flushed to disk).
Run: `PYTHONPATH=. .venv/bin/python bench/tasks.py [--calls N]` (the Python SDK client, one process).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
# bench/ holds mcp.py: keep it off sys.path so `import mcp` finds the SDK; the test helpers are reused.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]
sys.path[:0] = [str(HERE.parent), str(HERE.parent / "tests" / "server")]

from mcp_helpers import http_client, http_server, make_options  # noqa: E402
from tasks_client import TasksClient, task_request  # noqa: E402

from ice_mcp import Orchestrator, Settings  # noqa: E402

WAIT = {"name": "wait", "execution": "task",
        "nodes": [{"id": "nap", "type": "tool", "tool_name": "sleep", "tool_args": {"seconds": 60}}]}
GATE = {"name": "gate", "execution": "task", "nodes": [{"id": "ok", "type": "human", "approval": "Go?"}]}


def summary(name: str, samples: list[float]) -> str:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]
    return f"{name:<40} median {statistics.median(samples) * 1000:7.2f} ms   p95 {p95 * 1000:7.2f} ms   n={len(samples)}"


async def main(calls: int) -> None:
    with tempfile.TemporaryDirectory() as folder:
        orc = Orchestrator(settings=Settings(data_dir=Path(folder), workspace=Path(folder)))
        for blueprint in (WAIT, GATE):
            orc.register_blueprint(blueprint)
        created: list[float] = []
        polled: list[float] = []
        answered: list[float] = []
        async with http_server(orc, make_options()) as url, http_client(url, extensions=[TasksClient()]) as client:
            session = client.session
            task_ids: list[str] = []
            for _ in range(calls):
                started = time.perf_counter()
                task: Any = await session.call_tool("workflow_wait", {}, allow_claimed=True)
                created.append(time.perf_counter() - started)
                task_ids.append(task.task_id)
                started = time.perf_counter()
                await task_request(session, "tasks/get", taskId=task.task_id)
                polled.append(time.perf_counter() - started)
            for task_id in task_ids:
                await task_request(session, "tasks/cancel", taskId=task_id)
            for _ in range(calls):
                gate: Any = await session.call_tool("workflow_gate", {}, allow_claimed=True)
                while (await task_request(session, "tasks/get", taskId=gate.task_id))["status"] != "input_required":
                    await asyncio.sleep(0.005)
                started = time.perf_counter()
                await task_request(session, "tasks/update", taskId=gate.task_id,
                                   inputResponses={"ok": {"action": "accept", "content": {"approved": True}}})
                answered.append(time.perf_counter() - started)
        await orc.aclose()
    print(summary("tools/call -> CreateTaskResult (durable)", created))
    print(summary("tasks/get (working)", polled))
    print(summary("tasks/update (answer journaled on disk)", answered))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    asyncio.run(main(parser.parse_args().calls))
