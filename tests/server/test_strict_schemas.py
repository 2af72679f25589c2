"""Typed results and strict schemas: every tool's input and output schema compiles in ajv's strict mode (the
TypeScript SDK client over HTTP and stdio, validating real results with it), converts to OpenAI's strict form, and a
strict caller's arguments (null for "not given", JSON text for free-form objects) run as the tool's own would."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from live import live_server
from mcp import Client
from mcp_fixture_tools import measure
from mcp_helpers import (
    ROOT,
    TOOLS,
    external_tools,
    make_options,
    structured,
    subprocess_env,
    write_blueprints,
)

from ice_mcp.operations.result_schemas import ENVELOPE_STATUSES
from ice_mcp.operations.tool_table import RUN_STATUSES
from ice_mcp.orchestrator import Orchestrator
from ice_mcp.server import build_server
from ice_mcp.server.protocol.strict import FORMATS, KEPT, read_strict, strict_schema

SCRIPT = Path(__file__).parent / "ts" / "strict_schemas.mjs"
TEMPLATES = sorted((ROOT / "blueprints").glob("*.json"))


# -- ajv strict, through the TypeScript SDK client ----------------------------------------------------------------


def run_strict_client(*target: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    node = external_tools()
    done = subprocess.run([str(node), str(SCRIPT), str(TOOLS / "node_modules"), *target], capture_output=True,
                          text=True, timeout=180, check=False, env=env, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    seen: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return seen


def check_strict_client(seen: dict[str, Any]) -> None:
    assert seen["problems"] == [], "\n".join(seen["problems"])
    tools = set(seen["tools"])
    assert {"workflow_steps", "workflow_csv_report", "tool_measure", "run_status", "schedule_create",
            "webhook_create", "notify_set", "workflow_start"} <= tools
    results = seen["results"]
    assert not [label for label, result in results.items() if "thrown" in result], results
    assert results["workflow"]["structured"]["outputs"] == {"upper": "HI"}
    assert results["tool"]["structured"]["outputs"] == {"result": {"words": 2, "upper": "TWO WORDS"}}
    assert results["tool"]["typed"] == ["upper", "words"]  # its outputSchema as the client read it
    assert results["start"]["structured"]["status"] == "succeeded"
    assert results["search"]["structured"]["results"]
    assert results["result"]["structured"]["status"] == "succeeded"
    assert results["status"]["structured"]["status"] == "succeeded"
    assert results["validate"]["structured"]["ok"] is False


def test_every_schema_passes_strict_ajv_over_http(tmp_path: Path) -> None:
    with live_server(tmp_path, "--templates", "--tools", "mcp_fixture_tools") as url:
        check_strict_client(run_strict_client("http", f"{url}/mcp"))


def test_every_schema_passes_strict_ajv_over_stdio(tmp_path: Path) -> None:
    folder = write_blueprints(tmp_path / "blueprints")
    env = subprocess_env(tmp_path)
    check_strict_client(run_strict_client("stdio", sys.executable, "-m", "ice_mcp", "serve", "--templates",
                                          "--blueprints", str(folder), "--tools", "mcp_fixture_tools", env=env))


# -- the result schemas ------------------------------------------------------------------------------------------


@pytest.fixture
async def typed(orc: Orchestrator) -> Orchestrator:
    """The test orchestrator with the bundled templates and a tool whose result is typed."""
    for path in TEMPLATES:
        orc.register_blueprint(path)
    orc.registry.add_tool(measure)
    return orc


async def listed(orc: Orchestrator) -> dict[str, dict[str, Any]]:
    async with Client(build_server(orc, make_options())) as client:
        tools = (await client.list_tools()).tools
    return {tool.name: tool.model_dump(by_alias=True, mode="json", exclude_none=True) for tool in tools}


async def test_each_tool_says_what_it_returns(typed: Orchestrator) -> None:
    tools = await listed(typed)
    assert all("outputSchema" in tool for tool in tools.values()), [n for n, t in tools.items() if "outputSchema" not in t]
    steps = tools["workflow_steps"]["outputSchema"]
    assert set(steps["required"]) == {"run_id", "status", "outputs", "error", "cost_usd", "duration_ms"}
    assert set(steps["properties"]["status"]["enum"]) == {*RUN_STATUSES, "error"} == set(ENVELOPE_STATUSES)
    assert list(steps["properties"]["outputs"]["properties"]) == ["upper"]  # its declared outputs
    assert list(tools["workflow_noop"]["outputSchema"]["properties"]["outputs"]["properties"]) == ["echo"]  # sinks
    result = tools["tool_measure"]["outputSchema"]["properties"]["outputs"]["properties"]["result"]
    assert result["properties"] == {"words": {"type": "integer"}, "upper": {"type": "string"}}
    assert result["required"] == ["words", "upper"]
    assert tools["tool_echo"]["outputSchema"]["properties"]["outputs"]["properties"]["result"] == {"type": "object"}
    assert set(tools["run_list"]["outputSchema"]["required"]) == {"runs"}
    for name, tool in tools.items():  # every `required` name is a property (ajv's strictRequired, in Python)
        for schema in walk(tool["outputSchema"]):
            assert set(schema.get("required", [])) <= set(schema.get("properties", {})), name


async def test_input_schemas_are_closed_where_the_server_refuses_unknown_inputs(typed: Orchestrator) -> None:
    tools = await listed(typed)
    open_ones = [name for name, tool in tools.items() if tool["inputSchema"].get("additionalProperties") is not False]
    assert open_ones == ["workflow_broken"]  # it declares no inputs: the server takes any
    async with Client(build_server(typed, make_options())) as client:
        refused = await client.call_tool("workflow_steps", {"word": "x", "wrd": "y"})
        taken = await client.call_tool("workflow_broken", {"anything": 1})
    assert refused.is_error and "unknown input" in structured(refused)["error"]["message"]
    assert structured(taken)["error"]["code"] != "invalid_inputs"


# -- OpenAI strict --------------------------------------------------------------------------------------------------

STRUCTURE = frozenset({"type", "properties", "required", "additionalProperties", "items", "anyOf"})


def walk(schema: Any) -> list[dict[str, Any]]:
    """Every subschema of a schema, itself first."""
    if not isinstance(schema, dict):
        return []
    found = [schema]
    for key in ("properties", "$defs"):
        for sub in (schema.get(key) or {}).values():
            found += walk(sub)
    for sub in schema.get("anyOf", []):
        found += walk(sub)
    if isinstance(schema.get("items"), dict):
        found += walk(schema["items"])
    if isinstance(schema.get("additionalProperties"), dict):
        found += walk(schema["additionalProperties"])
    return found


def openai_problems(schema: dict[str, Any]) -> list[str]:
    """What OpenAI's strict mode would refuse, by its documented rules (structured outputs, "supported schemas")."""
    problems = []
    if schema.get("type") != "object" or "anyOf" in schema:
        problems.append("the root is not an object")
    for sub in walk(schema):
        if unknown := set(sub) - STRUCTURE - KEPT:
            problems.append(f"keywords strict mode lacks: {sorted(unknown)}")
        if sub.get("format") is not None and sub["format"] not in FORMATS:
            problems.append(f"format {sub['format']}")
        if not ({"type", "anyOf", "enum", "const"} & set(sub)):
            problems.append(f"no type: {sub}")
        if "object" in (sub.get("type") if isinstance(sub.get("type"), list) else [sub.get("type")]):
            if sub.get("additionalProperties") is not False:
                problems.append(f"an object not closed: {sub}")
            if sorted(sub.get("required", [])) != sorted(sub.get("properties", {})):
                problems.append(f"not every property required: {sub}")
    return problems


async def test_every_input_schema_converts_to_openai_strict_with_defaults_still_optional(typed: Orchestrator) -> None:
    tools = await listed(typed)
    for name, tool in tools.items():
        original = tool["inputSchema"]
        converted = strict_schema(original)
        assert openai_problems(converted) == [], (name, openai_problems(converted))
        required = set(original.get("required", []))
        for key, sub in converted["properties"].items():
            if key in required:
                continue  # what the tool needs stays a value; the rest may be null, which the server reads as unset
            assert jsonschema.Draft202012Validator(sub).is_valid(None), (name, key, sub)
    csv = strict_schema(tools["workflow_csv_report"]["inputSchema"])["properties"]
    assert csv["threshold"]["type"] == ["number", "null"] and "default" not in csv["threshold"]
    assert strict_schema(tools["workflow_start"]["inputSchema"])["properties"]["inputs"]["type"] == "string"


async def test_a_strict_callers_arguments_run_as_the_tools_own(typed: Orchestrator, tmp_path: Path) -> None:
    async with Client(build_server(typed, make_options())) as client:
        summary = await client.call_tool("workflow_render_summary", {
            "rows": [json.dumps({"day": "mon", "amount": 50})], "title": None, "path": None})
        started = await client.call_tool("workflow_start", {"name": "steps", "inputs": json.dumps({"word": "hey"}),
                                                            "wait_seconds": None, "idempotency_key": None})
        rows = await client.call_tool("tool_csv_reader", {"path": "data/sales.csv", "delimiter": None,
                                                          "limit": None, "encoding": None})
        runs = await client.call_tool("run_list", {"workflow": None, "status": None, "schedule_id": None,
                                                   "trigger": None, "limit": None, "cursor": None,
                                                   "all_principals": None})
        broken_text = await client.call_tool("workflow_start", {"name": "steps", "inputs": "{not json"})
    assert structured(summary)["status"] == "succeeded", structured(summary)
    assert (tmp_path / "reports" / "summary.md").exists()  # the default path
    assert structured(started)["outputs"] == {"upper": "HEY"}
    assert structured(rows)["outputs"]["result"]["count"] == 3
    assert structured(runs)["runs"]
    assert broken_text.is_error and "inputs" in structured(broken_text)["error"]["message"]


def test_read_strict_leaves_what_the_schema_takes_as_it_is() -> None:
    schema = {"type": "object", "properties": {"x": {"type": ["string", "null"]}, "y": {"type": "integer"},
                                               "z": {"type": "object"}, "w": {"anyOf": [{"type": "object"},
                                                                                       {"type": "string"}]}},
              "required": ["y"]}
    arguments = {"x": None, "y": None, "z": '{"a": 1}', "w": '{"a": 1}'}
    assert read_strict(schema, arguments) == {"x": None, "y": None, "z": {"a": 1}, "w": '{"a": 1}'}
    assert arguments["z"] == '{"a": 1}'  # the caller's dict is not changed
    plain = {"y": 3}
    assert read_strict(schema, plain) is plain
