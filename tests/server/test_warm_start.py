"""A stdio server's warm start: a host's later session gets the kept `initialize` and `tools/list` answers at
once, and only while everything they depend on is unchanged (real `python -m ice_mcp serve` processes)."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp_helpers import ROOT, subprocess_env

from ice_mcp.server.cli import serve_settings
from ice_mcp.server.warm_start import KEPT_FILE, WarmStart, start_key

EARLY = "answered from what the last start kept"
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "host", "version": "1"}}}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
LIST = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
# Built-in tools only: a start with --tools modules is never answered early.
STEPS = {
    "name": "steps",
    "description": "Shout a word.",
    "inputs": {"type": "object", "properties": {"word": {"type": "string"}}, "required": ["word"]},
    "outputs": {"upper": "{{ shout.text }}"},
    "nodes": [{"id": "shout", "type": "tool", "tool_name": "render_template",
               "tool_args": {"template": "{{ inputs.word | upper }}"}}],
}


def session(home: Path, *after: dict[str, Any], answers: int = 0) -> tuple[list[dict[str, Any]], str]:
    """A host's session: initialize, tools/list, then `after` (waiting for `answers` more messages); the server's
    messages in order, and its log."""
    blueprints = home / "blueprints"
    proc = subprocess.Popen(
        [sys.executable, "-m", "ice_mcp", "serve", "--blueprints", str(blueprints), "--log-level", "INFO"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=subprocess_env(home), cwd=str(ROOT))
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    messages: list[dict[str, Any]] = []

    def send(*requests: dict[str, Any]) -> None:
        assert proc.stdin is not None
        proc.stdin.write("".join(json.dumps(r) + "\n" for r in requests))
        proc.stdin.flush()

    def read(count: int) -> None:
        assert proc.stdout is not None
        for _ in range(count):
            messages.append(json.loads(proc.stdout.readline()))

    try:
        send(INITIALIZE)
        read(1)
        send(INITIALIZED, LIST)
        read(1)
        if after:
            send(*after)
            read(answers)
    finally:
        proc.stdin.close()
        rest = proc.stdout.read()
        code = proc.wait(timeout=60)
        log = proc.stderr.read()
    assert code == 0, log
    messages.extend(json.loads(line) for line in rest.splitlines())
    return messages, log


def listed(answer: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {tool["name"]: tool for tool in answer["result"]["tools"]}


@pytest.fixture
def home(tmp_path: Path) -> Path:
    (tmp_path / "blueprints").mkdir()
    (tmp_path / "blueprints" / "steps.json").write_text(json.dumps(STEPS))
    return tmp_path


def test_a_later_session_gets_the_answers_of_the_last_start_at_once(home: Path) -> None:
    first, first_log = session(home)
    assert EARLY not in first_log
    assert (home / ".ice" / KEPT_FILE).exists()
    second, second_log = session(home)
    assert second_log.count(EARLY) == 2  # initialize and tools/list
    assert [m["result"] for m in second] == [m["result"] for m in first]  # what the built server answers too
    assert "workflow_steps" in listed(second[1])
    assert not any(m.get("method") == "notifications/tools/list_changed" for m in second)


def test_a_call_right_after_the_early_list_is_answered_by_the_built_server(home: Path) -> None:
    session(home)
    call = {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
            "params": {"name": "workflow_steps", "arguments": {"word": "warm"}}}
    messages, log = session(home, call, answers=1)
    assert EARLY in log
    assert [m.get("id") for m in messages] == [1, 2, 3]  # the server's own answers to 1 and 2 are not repeated
    assert messages[2]["result"]["structuredContent"]["outputs"] == {"upper": "WARM"}


def test_a_changed_blueprint_file_is_listed_as_it_is_now(home: Path) -> None:
    session(home)
    inputs: dict[str, Any] = json.loads(json.dumps(STEPS["inputs"]))
    inputs["properties"]["times"] = {"type": "integer", "default": 1}
    changed = {**STEPS, "inputs": inputs}
    (home / "blueprints" / "steps.json").write_text(json.dumps(changed))
    messages, log = session(home)
    assert EARLY not in log
    assert "times" in listed(messages[1])["workflow_steps"]["inputSchema"]["properties"]


def test_a_workflow_registered_at_run_time_is_listed_at_the_next_start(home: Path) -> None:
    session(home)
    blueprint = {**STEPS, "name": "registered_later"}
    register = {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                "params": {"name": "blueprint_register", "arguments": {"blueprint": blueprint}}}
    answers, _ = session(home, register, answers=1)
    assert answers[2]["result"].get("isError") is not True, answers[2]
    messages, log = session(home)
    assert EARLY not in log  # the store keeps a new blueprint: the kept answers no longer hold
    assert "workflow_registered_later" in listed(messages[1])


def test_a_kept_list_that_no_longer_holds_is_corrected_and_announced(home: Path) -> None:
    session(home)
    kept_file = home / ".ice" / KEPT_FILE
    kept = json.loads(kept_file.read_text())
    real = kept["tools/list"]["result"]
    # As if the key had missed a change: the kept list lacks a workflow the server has.
    kept["tools/list"]["result"] = {**real, "tools": [t for t in real["tools"] if t["name"] != "workflow_steps"]}
    kept_file.write_text(json.dumps(kept))
    again = {"jsonrpc": "2.0", "id": 3, "method": "tools/list"}
    messages, log = session(home, again, answers=2)
    assert log.count(EARLY) == 2
    assert "workflow_steps" not in listed(messages[1])  # the kept answer went out first
    assert messages[2] == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
    assert "workflow_steps" in listed(messages[3])
    assert json.loads(kept_file.read_text())["tools/list"]["result"] == real  # kept right for the next start


def namespace(**changes: Any) -> argparse.Namespace:
    values: dict[str, Any] = {"tools": [], "extend": [], "conformance_fixtures": False, "mcp_config": [],
                              "templates": True, "blueprints": [], "data_dir": None, "workspace": None,
                              "state": None}
    return argparse.Namespace(**{**values, **changes})


@pytest.mark.parametrize("changes", [{"tools": ["my_tools"]}, {"extend": ["my_extension"]},
                                     {"mcp_config": ["servers.json"]}, {"conformance_fixtures": True},
                                     {"state": "redis://127.0.0.1:6379/0"}])
def test_no_answer_is_kept_for_what_a_start_cannot_read_cheaply(tmp_path: Path, changes: dict[str, Any]) -> None:
    args = namespace(data_dir=tmp_path, **changes)
    assert start_key(args, serve_settings(args)) is None
    plain = namespace(data_dir=tmp_path)
    assert start_key(plain, serve_settings(plain)) is not None


FAILING_BUILD = """
import asyncio, contextlib, sys
from pathlib import Path
from ice_mcp.errors import IceError
from ice_mcp.server.stdio import serve_stdio_starting
from ice_mcp.server.warm_start import WarmStart

@contextlib.asynccontextmanager
async def broken():
    raise IceError("the engine is away", code="engine_unavailable")
    yield

try:
    asyncio.run(serve_stdio_starting(broken, None, WarmStart(Path(sys.argv[1]), "the key")))
except IceError as exc:
    print(f"error [{exc.code}]", file=sys.stderr)
    sys.exit(3)
"""


def test_a_warm_start_whose_build_fails_exits_with_the_error_while_the_host_keeps_stdin_open(home: Path) -> None:
    session(home)
    kept = home / ".ice" / KEPT_FILE
    kept.write_text(json.dumps({**json.loads(kept.read_text()), "key": "the key"}))
    proc = subprocess.Popen([sys.executable, "-c", FAILING_BUILD, str(kept)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=subprocess_env(home))
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.stdin.write(json.dumps(INITIALIZE) + "\n")
        proc.stdin.flush()
        assert json.loads(proc.stdout.readline())["id"] == 1  # answered early: the build starts after
        code = proc.wait(timeout=60)  # stdin still open: the waiting read must not hold the process
    finally:
        proc.kill()
        proc.stdin.close()
    assert code == 3
    assert proc.stderr is not None and "error [engine_unavailable]" in proc.stderr.read()


async def test_only_a_request_the_sdk_reads_is_answered_early(tmp_path: Path) -> None:
    params = INITIALIZE["params"]
    kept = {"key": "k", "initialize": {"params": params, "result": {"protocolVersion": "2025-11-25"}},
            "tools/list": {"params": None, "result": {"tools": []}}}
    path = tmp_path / KEPT_FILE
    path.write_text(json.dumps(kept))
    for wrong in ({**INITIALIZE, "jsonrpc": "1.0"}, {**INITIALIZE, "id": True},
                  {**INITIALIZE, "params": {**params, "clientInfo": {"name": "other", "version": "1"}}}):
        assert WarmStart(path, "k").look(json.dumps(wrong)) is None
    assert WarmStart(path, "another key").look(json.dumps(INITIALIZE)) is None
    early = WarmStart(path, "k").look(json.dumps(INITIALIZE))
    assert early is not None
    assert early.message.model_dump(exclude_unset=True) == {
        "jsonrpc": "2.0", "id": 1, "result": {"protocolVersion": "2025-11-25"}}
