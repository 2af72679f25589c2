"""The MCP Inspector CLI (a client we did not write) lists and calls our tools over stdio."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from mcp_helpers import ROOT, TOOLS, external_tools, subprocess_env, write_blueprints

INSPECTOR = (
    TOOLS
    / "node_modules"
    / "@modelcontextprotocol"
    / "inspector"
    / "clients"
    / "launcher"
    / "build"
    / "index.js"
)


def inspector(tmp_path: Path, era: str, *method: str) -> subprocess.CompletedProcess[str]:
    node = external_tools()
    env = subprocess_env(tmp_path)
    blueprints = write_blueprints(tmp_path / "blueprints")
    passed = [f"{k}={env[k]}" for k in ("PYTHONPATH", "ICE_MCP_WORKSPACE", "ICE_MCP_DATA_DIR")]
    command = [str(node), str(INSPECTOR), "--cli", "--protocol-era", era]
    for item in passed:
        command += ["-e", item]
    command += [*method, "--", sys.executable, "-m", "ice_mcp", "serve"]
    command += ["--tools", "mcp_fixture_tools", "--blueprints", str(blueprints)]
    env["MCP_CATALOG_PATH"] = str(tmp_path / "catalog.json")
    return subprocess.run(
        command, capture_output=True, text=True, cwd=ROOT, env=env, timeout=300, check=False
    )


@pytest.mark.parametrize("era", ["legacy", "modern"])
def test_inspector_lists_and_calls_over_stdio(tmp_path: Path, era: str) -> None:
    listed = inspector(tmp_path, era, "--method", "tools/list", "--strict")
    assert listed.returncode == 0, listed.stderr
    names = [t["name"] for t in json.loads(listed.stdout)["tools"]]
    assert "workflow_steps" in names and "network_execute" in names

    called = inspector(
        tmp_path,
        era,
        "--method",
        "tools/call",
        "--tool-name",
        "workflow_steps",
        "--tool-arg",
        "word=hi",
    )
    assert called.returncode == 0, called.stderr
    result = json.loads(called.stdout)
    assert result["structuredContent"]["outputs"] == {"upper": "HI"}

    failed = inspector(tmp_path, era, "--method", "tools/call", "--tool-name", "workflow_broken")
    assert failed.returncode == 5  # the Inspector's exit code for an isError result
