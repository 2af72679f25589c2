"""The official TypeScript SDK client (npm @modelcontextprotocol/sdk, installed by scripts/setup_mcp.sh)
against the shipped server: it lists and calls tools, and answers an approval gate through elicitation."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from live import live_server
from mcp_helpers import TOOLS, external_tools

SDK = TOOLS / "node_modules" / "@modelcontextprotocol" / "sdk"
SCRIPT = Path(__file__).parent / "ts" / "sdk_client.mjs"
GATE = {"name": "gate", "inputs": {"type": "object", "properties": {"customer": {"type": "string"}}},
        "outputs": {"by": "{{ ok.answered_by }}", "reason": "{{ ok.answer.reason }}"},
        "nodes": [{"id": "ok", "type": "human", "approval": "Ship it to {{ inputs.customer }}?"}]}


def test_typescript_sdk_client_against_the_shipped_server(tmp_path: Path) -> None:
    node = external_tools()
    folder = tmp_path / "blueprints"
    folder.mkdir()
    (folder / "gate.json").write_text(json.dumps(GATE))
    with live_server(tmp_path, "--tools", "mcp_fixture_tools") as url:
        done = subprocess.run([str(node), str(SCRIPT), str(SDK), f"{url}/mcp"], capture_output=True, text=True,
                              timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert {"workflow_steps", "workflow_gate", "run_respond", "network_execute"} <= set(seen["tools"])
    assert seen["steps"]["outputs"] == {"upper": "HI"}
    assert seen["gate"]["status"] == "succeeded"
    assert seen["gate"]["outputs"] == {"by": "mcp:elicitation", "reason": "from TypeScript"}
    assert seen["asked"] == ["Ship it to ACME?"]
    assert seen["brokenIsError"] is True
