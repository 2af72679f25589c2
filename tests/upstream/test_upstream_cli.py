"""`ice-mcp validate|run --mcp-config FILE` (and ICE_MCP_MCP_CONFIG) as a user types them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from upstream_servers import ROOT, everything, time_server, write_config

pytestmark = pytest.mark.usefixtures("servers_installed")

BLUEPRINT = """\
name: stamp
inputs: {type: object, properties: {tz: {type: string}}, required: [tz]}
nodes:
  - {id: now, type: tool, tool_name: time.get_current_time, tool_args: {timezone: "{{ inputs.tz }}"}}
  - {id: say, type: tool, tool_name: everything.echo, tool_args: {message: "{{ now.datetime }}"}}
outputs: {said: "{{ say.text }}"}
"""


def ice_mcp(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, "PYTHONPATH": str(ROOT), "ICE_MCP_DATA_DIR": str(tmp_path / "data"), **(env or {})}
    return subprocess.run([sys.executable, "-m", "ice_mcp", *args], capture_output=True, text=True, cwd=tmp_path,
                          env=full_env, timeout=120, check=False)


def test_validate_and_run_with_upstream_servers(tmp_path: Path) -> None:
    config = write_config(tmp_path / "claude_desktop_config.json",
                          {"time": time_server(), "everything": everything(),
                           "ice-mcp": {"command": "ice-mcp", "args": ["serve"]}})
    good = tmp_path / "stamp.yaml"
    good.write_text(BLUEPRINT)
    bad = tmp_path / "bad.yaml"
    bad.write_text(BLUEPRINT.replace("timezone:", "time_zone:").replace("everything.echo", "everything.ecko"))

    checked = ice_mcp(tmp_path, "validate", str(bad), "--mcp-config", str(config))
    assert checked.returncode == 1
    assert "[invalid_tool_args] now.tool_args.time_zone: tool 'time.get_current_time' has no argument " \
           "'time_zone' (did you mean 'timezone'?)" in checked.stderr
    assert "[unknown_tool] say.tool_name: no tool named 'everything.ecko' (did you mean 'everything.echo'?)" \
           in checked.stderr

    ran = ice_mcp(tmp_path, "run", str(good), "-i", "tz=UTC", "--no-progress",
                  env={"ICE_MCP_MCP_CONFIG": str(config)})
    assert ran.returncode == 0, ran.stderr
    record = json.loads(ran.stdout)
    assert record["status"] == "succeeded"
    assert record["outputs"]["said"].startswith("Echo: ") and record["outputs"]["said"].endswith("+00:00")


def test_an_unreadable_config_is_one_clear_line(tmp_path: Path) -> None:
    (tmp_path / "x.yaml").write_text(BLUEPRINT)
    result = ice_mcp(tmp_path, "validate", "x.yaml", "--mcp-config", "missing.json")
    assert result.returncode == 1
    assert result.stderr.strip() == "error [invalid_mcp_config]: cannot read MCP config 'missing.json': " \
                                    "No such file or directory"
