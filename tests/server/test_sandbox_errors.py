"""Sandbox and template violations reach an MCP client as `isError` results it can read."""

from __future__ import annotations

from pathlib import Path

import mcp_types as types
from mcp import Client
from mcp_helpers import make_options, structured

from ice_mcp.orchestrator import Orchestrator
from ice_mcp.server import build_server
from ice_mcp.settings import Settings
from ice_mcp.tools.registry import Registry

BLUEPRINTS = [
    {"name": "divide", "inputs": {"type": "object", "properties": {"d": {"type": "integer"}}, "required": ["d"]},
     "outputs": {"q": "{{ calc.result }}"},
     "nodes": [{"id": "calc", "type": "code", "inputs": {"d": "{{ inputs.d }}"},
                "code": "n = 10\nreturn n // inputs['d']"}]},
    {"name": "spin", "nodes": [{"id": "loop", "type": "code", "limits": {"timeout_seconds": 0.3},
                                "code": "while True:\n    pass"}]},
    {"name": "abuse", "nodes": [{"id": "t", "type": "tool", "tool_name": "render_template",
                                 "tool_args": {"template": "{{ 'a' * 10 ** 10 }}"}}]},
]


def text_of(result: types.CallToolResult) -> str:
    return " ".join(c.text for c in result.content if isinstance(c, types.TextContent))


async def test_sandbox_and_template_violations_are_readable_tool_errors(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path / "data", workspace=tmp_path, persist_runs=False,
                        extra={"sandbox": {"workers": 1}})
    orc = Orchestrator(registry=Registry(), settings=settings)
    for blueprint in BLUEPRINTS:
        orc.register_blueprint(blueprint)
    try:
        async with Client(build_server(orc, make_options())) as client:
            failed = await client.call_tool("workflow_divide", {"d": 0})
            assert failed.is_error is True
            error = structured(failed)["error"]
            assert error["details"]["cause"]["code"] == "guest_exception"
            assert error["details"]["cause"]["details"]["type"] == "ZeroDivisionError"
            assert error["details"]["cause"]["details"]["line"] == 2
            assert "calc" in text_of(failed) and "ZeroDivisionError" in text_of(failed)
            assert "Traceback" not in text_of(failed)

            spun = await client.call_tool("workflow_spin", {})
            assert spun.is_error is True
            assert structured(spun)["error"]["details"]["cause"]["code"] == "timeout"

            abused = await client.call_tool("workflow_abuse", {})
            assert abused.is_error is True
            assert structured(abused)["error"]["details"]["cause"]["code"] == "template_error"
            assert "too large" in text_of(abused)

            fine = await client.call_tool("workflow_divide", {"d": 3})
            assert fine.is_error is False and structured(fine)["outputs"] == {"q": 3}
    finally:
        await orc.aclose()
