"""A schedule's catch-up policies across a real server: every server of the folder down for ten slots, then
started again: `latest` runs the last missed slot, `none` none, `all` each (up to its cap)."""

from __future__ import annotations

import json
import math
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import pytest
from live import ServerProcess


def wait_until(moment: float) -> None:
    time.sleep(max(0.0, moment - time.time()))


@pytest.mark.slow
def test_catch_up_after_every_server_was_down(tmp_path: Path) -> None:
    """12 one-second slots; the only server is SIGKILLed after the first 2 and back after the last: the 10
    slots missed become what each schedule's catch-up policy says."""
    marks = tmp_path / "marks.txt"
    marks.touch()
    folder = tmp_path / "blueprints"
    folder.mkdir()
    (folder / "tick.json").write_text(json.dumps({"name": "tick", "nodes": [
        {"id": "mark", "type": "tool", "tool_name": "mark",
         "tool_args": {"label": "{{ trigger.schedule_id }}@{{ trigger.slot }}"}}]}))
    workspace = tmp_path / "server"
    workspace.mkdir()
    server = ServerProcess(workspace, "--data-dir", str(tmp_path / "data"), "--tools", "durable_tools",
                           "--blueprints", str(folder), env={"ICE_TEST_MARKS": str(marks)})
    policies = {"latest": {"catchup": {"mode": "latest"}}, "none": {"catchup": {"mode": "none"}},
                "all": {"catchup": {"mode": "all", "max_runs": 5}, "overlap": "allow_all"}}
    try:
        server.start()
        first = math.ceil(time.time()) + 3.0
        spec = {"every_seconds": 1, "start_at": datetime.fromtimestamp(first, UTC).isoformat(),
                "end_at": datetime.fromtimestamp(first + 11, UTC).isoformat()}
        for name, policy in policies.items():
            server.rpc("schedule.create", workflow="tick", id=name, spec=spec, policy=policy)
        wait_until(first + 1.5)
        server.kill()  # after slots 1 and 2: nothing runs slots 3..12
        wait_until(first + 13)
        server.start()
        wait_until(time.time() + 3)
        history = {name: server.rpc("schedule.history", id=name, limit=50)["firings"] for name in policies}
    finally:
        server.stop()

    def slot(n: int) -> str:
        return datetime.fromtimestamp(first + n - 1, UTC).isoformat().replace("+00:00", "Z")

    def outcomes(name: str) -> list[tuple[str, str, int]]:
        return sorted((f["slot"], f["outcome"], f["count"]) for f in history[name])

    on_time = [(slot(1), "started", 1), (slot(2), "started", 1)]
    assert outcomes("latest") == [*on_time, (slot(11), "missed", 9), (slot(12), "started", 1)]
    assert outcomes("none") == [*on_time, (slot(12), "missed", 10)]
    assert outcomes("all") == sorted([*on_time, (slot(7), "missed", 5),
                                      *((slot(n), "started", 1) for n in range(8, 13))])
    ran = Counter(line.split()[0] for line in marks.read_text().splitlines())
    assert sum(count for label, count in ran.items() if label.startswith("latest@")) == 3
    assert sum(count for label, count in ran.items() if label.startswith("none@")) == 2
    assert sum(count for label, count in ran.items() if label.startswith("all@")) == 7
