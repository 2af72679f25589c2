"""Reading MCP server configs (the Claude Desktop file as it is), and the pure parts of upstream tools:
the environment and headers a server gets, names, annotations, outputs and argument checks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest

from ice_mcp.errors import IceError, NodeFailure
from ice_mcp.tools.registry import SchemaToolEntry
from ice_mcp.tools.upstream import (
    ENV_PROGRAM,
    annotations_of,
    http_headers,
    result_output,
    safe_name,
    stdio_parameters,
)
from ice_mcp.tools.upstream_config import UpstreamConfig, load_configs, read_config_file

# What a user already has: ice_mcp's own entry (as `ice-mcp claude-config` prints it) beside other servers.
CLAUDE_DESKTOP = {
    "mcpServers": {
        "ice-mcp": {"command": "/home/me/.venv/bin/ice-mcp",
                    "args": ["serve", "--templates", "--workspace", "/home/me/ice-mcp-workspace"]},
        "filesystem": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/home/me/Desktop"]},
        "github": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-github"],
                   "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "ghp_in_the_users_file"}},
        "time": {"command": "uvx", "args": ["mcp-server-time"]},
    }
}


def write(path: Path, document: Any) -> Path:
    path.write_text(json.dumps(document) if not isinstance(document, str) else document)
    return path


def test_a_claude_desktop_config_is_read_as_it_is_without_ice_mcp_itself(tmp_path: Path) -> None:
    configs, warnings = read_config_file(write(tmp_path / "claude_desktop_config.json", CLAUDE_DESKTOP))
    assert warnings == []
    assert [c.name for c in configs] == ["filesystem", "github", "time"]
    github = configs[1]
    assert (github.command, github.args, github.env) == (
        "npx", ["-y", "@modelcontextprotocol/server-github"], {"GITHUB_PERSONAL_ACCESS_TOKEN": "ghp_in_the_users_file"})
    assert not github.is_http


def test_ice_mcp_launched_under_another_name_is_skipped_too(tmp_path: Path) -> None:
    document = {"mcpServers": {"workflows": {"command": "python", "args": ["-m", "ice_mcp.server", "serve"]},
                               "me-too": {"command": "/opt/bin/ice-mcp", "args": ["serve"]}}}
    assert read_config_file(write(tmp_path / "c.json", document)) == ([], [])


def test_http_entries_with_headers_and_a_bearer_token_variable(tmp_path: Path) -> None:
    document = {"mcpServers": {"remote": {"type": "http", "url": "https://mcp.example.com/mcp",
                                          "headers": {"X-Team": "${TEAM}"}, "bearerTokenEnv": "REMOTE_TOKEN",
                                          "timeoutSeconds": 20, "maxConcurrency": 2}}}
    [remote], _ = read_config_file(write(tmp_path / "c.json", document))
    assert remote.is_http and remote.timeout_seconds == 20 and remote.max_concurrency == 2
    headers = http_headers(remote, {"TEAM": "blue", "REMOTE_TOKEN": "s3cret"})
    assert headers == {"X-Team": "blue", "Authorization": "Bearer s3cret"}
    assert "s3cret" not in repr(remote) and "s3cret" not in remote.model_dump_json()  # read when connecting only
    with pytest.raises(NodeFailure) as missing:
        http_headers(remote, {"TEAM": "blue"})
    assert missing.value.code == "upstream_unavailable"
    assert "REMOTE_TOKEN" in missing.value.message and "is not set" in missing.value.message


def test_entries_that_cannot_be_used_are_left_out_with_a_reason(tmp_path: Path) -> None:
    document = {"mcpServers": {
        "has.dot": {"command": "x"},
        "both": {"command": "x", "url": "http://127.0.0.1:1/mcp"},
        "neither": {"args": ["a"]},
        "legacy-sse": {"url": "sse://old"},
        "off": {"command": "x", "disabled": True},
        "not-an-object": ["x"],
        "fine": {"command": "x"},
    }}
    configs, warnings = read_config_file(write(tmp_path / "c.json", document))
    assert [c.name for c in configs] == ["fine"]
    assert len(warnings) == 5
    assert any("'has.dot' left out" in w and "SERVER.TOOL" in w for w in warnings)
    assert any("'both' left out" in w and "either `command`" in w for w in warnings)
    assert any("'legacy-sse' left out" in w and "SSE transport" in w for w in warnings)


@pytest.mark.parametrize(("content", "says"), [
    (None, "cannot read MCP config"),
    ("{not json", "is not valid JSON"),
    ({"servers": {}}, 'has no "mcpServers" object'),
])
def test_an_unusable_file_is_a_clear_error(tmp_path: Path, content: Any, says: str) -> None:
    path = tmp_path / "c.json"
    if content is not None:
        write(path, content)
    with pytest.raises(IceError) as error:
        read_config_file(path)
    assert error.value.code == "invalid_mcp_config" and says in error.value.message


def test_files_from_the_command_line_then_the_environment_later_ones_win(tmp_path: Path) -> None:
    first = write(tmp_path / "a.json", {"mcpServers": {"time": {"command": "one"}, "files": {"command": "f"}}})
    second = write(tmp_path / "b.json", {"mcpServers": {"time": {"command": "two"}}})
    configs, _ = load_configs([first], {"ICE_MCP_MCP_CONFIG": f" {second} ,"})
    assert {c.name: c.command for c in configs} == {"time": "two", "files": "f"}


def test_a_server_process_gets_only_its_config_env_plus_path() -> None:
    config = UpstreamConfig(name="s", command="npx", args=["-y", "pkg"], env={"TOKEN": "t", "HOME": "/srv"})
    parameters = stdio_parameters(config, {"PATH": "/usr/bin:/bin", "AWS_SECRET_ACCESS_KEY": "leak"})
    assert parameters.env == {"PATH": "/usr/bin:/bin", "TOKEN": "t", "HOME": "/srv"}
    # The SDK adds HOME, USER, SHELL, ... by default: env(1) unsets those the config did not give.
    assert parameters.command == ENV_PROGRAM
    separator = parameters.args.index("--")
    assert parameters.args[separator + 1:] == ["npx", "-y", "pkg"]
    unset = parameters.args[1:separator:2]
    assert {"USER", "SHELL", "LOGNAME"} <= set(unset) and "HOME" not in unset and "PATH" not in unset


def test_names_for_models_and_clients_stay_within_the_portable_rules() -> None:
    assert safe_name("time", "get_current_time") == "time__get_current_time"
    assert safe_name("everything", "get-sum") == "everything__get-sum"
    dotted = safe_name("files", "read.file")
    assert dotted.startswith("files__read_file_") and dotted != safe_name("files", "read_file")
    long = safe_name("s", "x" * 100)
    assert len(long) == 64 and long == safe_name("s", "x" * 100)


def test_annotations_take_mcps_defaults_when_missing() -> None:
    unannotated = annotations_of(None)
    assert (unannotated.read_only, unannotated.destructive, unannotated.open_world) == (False, True, True)
    reader = annotations_of(types.ToolAnnotations(read_only_hint=True))
    assert (reader.read_only, reader.destructive, reader.open_world) == (True, False, True)
    writer = annotations_of(types.ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True,
                                                  open_world_hint=False))
    assert (writer.read_only, writer.destructive, writer.idempotent, writer.open_world) == (False, False, True, False)


def _result(*content: Any, structured: Any = None) -> types.CallToolResult:
    return types.CallToolResult(content=list(content), structured_content=structured)


def test_outputs_are_structured_content_else_text_parsed_when_json() -> None:
    text = types.TextContent(type="text", text='{"a": 1}')
    assert result_output(_result(text, structured={"b": 2})) == {"b": 2}
    assert result_output(_result(text)) == {"a": 1}
    assert result_output(_result(types.TextContent(type="text", text="[1, 2]"))) == {"result": [1, 2]}
    assert result_output(_result(types.TextContent(type="text", text="Echo: hi"))) == {"text": "Echo: hi"}
    image = types.ImageContent(type="image", data="iVBOR", mime_type="image/png")
    mixed = result_output(_result(types.TextContent(type="text", text="a tiny image"), image))
    assert mixed == {"text": "a tiny image", "content": [{"type": "image", "data": "iVBOR", "mimeType": "image/png"}]}
    assert result_output(_result()) == {}


async def test_schema_tools_check_arguments_against_their_schema() -> None:
    seen: list[dict[str, Any]] = []

    async def call(arguments: dict[str, Any]) -> dict[str, Any]:
        seen.append(arguments)
        return {"ok": True}

    schema = {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
              "properties": {"a": {"type": "number"}, "b": {"type": "number", "description": "second"}},
              "required": ["a", "b"], "additionalProperties": False}
    entry = SchemaToolEntry(name="calc.get-sum", description="Adds.", function=call, input_schema=schema,
                            server="calc", safe_name="calc__get-sum")
    assert entry.parameters == ("a", "b") and entry.constrained == {"a", "b"} and entry.model_name == "calc__get-sum"
    assert await entry.call({"a": 1, "b": 2}) == {"ok": True} and seen == [{"a": 1, "b": 2}]
    with pytest.raises(NodeFailure) as bad:
        entry.parse_arguments({"a": "one", "bb": 2})
    message = bad.value.message
    assert bad.value.code == "invalid_arguments" and not bad.value.retryable
    assert "a: 'one' is not of type 'number'" in message
    assert "bb: unknown argument; did you mean 'b'?" in message
    assert "'b' is a required property" in message
    assert entry.type_problem("a", frozenset({"string"})) == "argument 'a' is number, but its template renders string"
    assert entry.type_problem("a", frozenset({"integer"})) is None
