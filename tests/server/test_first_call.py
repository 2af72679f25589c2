"""Issue 37, item 2: Claude Desktop's first call of a bundled workflow ends `succeeded` on a loaded machine.

The server is launched as `ice-mcp claude-config` prints it, in `/`, with what the SDK's stdio client passes (no
XDG_CACHE_HOME, no ICE_MCP_*) and a new home: no data folder, no warm start, no per-user sandbox cache.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from mcp import Client, StdioServerParameters
from mcp_helpers import structured

from ice_mcp.sandbox.cache import ensure_cache

BUSY_SECONDS = 120  # a busy process ends by itself even if the test is killed


@contextmanager
def busy_cores() -> Iterator[None]:
    """One spinning process per core until the block ends."""
    spin = f"import time\nend = time.monotonic() + {BUSY_SECONDS}\nwhile time.monotonic() < end: pass"
    busy = [subprocess.Popen([sys.executable, "-c", spin]) for _ in range(os.cpu_count() or 2)]
    try:
        yield
    finally:
        for process in busy:
            process.kill()
            process.wait()


async def test_claude_desktops_first_call_under_load_succeeds(tmp_path: Path) -> None:
    ensure_cache()  # what `make test-setup` did for this environment (a no-op since)
    home = {"HOME": str(tmp_path / "home")}
    printed = subprocess.run([sys.executable, "-m", "ice_mcp", "claude-config"], env={**home, "PATH": "/usr/bin:/bin"},
                             capture_output=True, text=True, timeout=120, check=True)
    server = json.loads(printed.stdout)["mcpServers"]["ice-mcp"]
    params = StdioServerParameters(command=server["command"], args=server["args"],
                                   env={**home, **server.get("env", {})}, cwd="/")
    with busy_cores():
        async with Client(params, mode="legacy") as client:
            assert client.protocol_version == "2025-11-25"
            assert "workflow_csv_report" in {tool.name for tool in (await client.list_tools()).tools}
            report = structured(await client.call_tool("workflow_csv_report", {"path": "examples/sales.csv"}))
    assert report["status"] == "succeeded", report
    assert report["outputs"] == {"total": 3108.0, "rows": 6, "report": "reports/sales.md",
                                 "verdict": "**Above threshold**: 3108.0 > 1000"}
