"""Workflows and validation over tools of real MCP servers nobody here wrote: @modelcontextprotocol's
server-everything and server-filesystem (npm) and mcp-server-time (PyPI), each over stdio."""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path
from typing import Any

import pytest
from upstream_servers import Connect, changing, everything, filesystem, time_server

pytestmark = pytest.mark.usefixtures("servers_installed")


def tool(node_id: str, name: str, args: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"id": node_id, "type": "tool", "tool_name": name, "tool_args": args, **extra}


def blueprint(*nodes: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return {"name": "upstream_test", "nodes": list(nodes), **fields}


def problems(report: Any) -> list[tuple[str, str | None, str | None]]:
    return [(issue.code, issue.node_id, issue.field) for issue in report.errors]


async def test_a_workflow_chains_tools_of_two_different_servers(connect: Connect, workspace: Path) -> None:
    orc = await connect({"time": time_server(), "files": filesystem(workspace)})
    target = workspace / "stamp.txt"
    chain = blueprint(
        tool("now", "time.get_current_time", {"timezone": "{{ inputs.tz }}"}),
        tool("save", "files.write_file", {"path": str(target), "content": "{{ now.timezone }} {{ now.datetime }}"}),
        tool("back", "files.read_text_file", {"path": str(target)}, dependencies=["save"]),
        inputs={"type": "object", "properties": {"tz": {"type": "string"}}, "required": ["tz"]},
        outputs={"written": "{{ back.content }}", "day": "{{ now.day_of_week }}"},
    )
    assert orc.validate(chain).ok
    record = await orc.run(chain, {"tz": "Asia/Tokyo"})
    assert record.status == "succeeded", record.error
    now = record.nodes["now"].output  # mcp-server-time answers structuredContent
    assert now["timezone"] == "Asia/Tokyo" and now["datetime"].endswith("+09:00")
    assert target.read_text() == f"Asia/Tokyo {now['datetime']}"
    assert record.outputs == {"written": target.read_text(), "day": now["day_of_week"]}


async def test_text_results_are_parsed_when_json_and_kept_as_text_otherwise(connect: Connect,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "must-not-reach-upstream")
    orc = await connect({"everything": everything(env={"GIVEN": "by the config"})})
    record = await orc.run(blueprint(tool("env", "everything.get-env", {}),
                                     tool("echo", "everything.echo", {"message": "hi"})))
    assert record.status == "succeeded", record.error
    # get-env answers JSON text: the process saw only what its config gives it, plus PATH.
    assert record.nodes["env"].output == {"PATH": os.environ["PATH"], "GIVEN": "by the config"}
    assert record.nodes["echo"].output == {"text": "Echo: hi"}


async def test_an_upstream_error_result_fails_the_node_with_the_upstream_text(connect: Connect, workspace: Path,
                                                                              tmp_path: Path) -> None:
    orc = await connect({"files": filesystem(workspace)})
    outside = tmp_path / "outside.txt"
    outside.write_text("secret")
    record = await orc.run(blueprint(tool("read", "files.read_text_file", {"path": str(outside)})))
    assert record.status == "failed"
    error = record.nodes["read"].error
    assert error is not None and error["code"] == "upstream_error"
    assert error["message"].startswith("files.read_text_file failed: ") and "outside allowed directories" in \
        error["message"]


async def test_validate_checks_arguments_against_the_upstream_schemas(connect: Connect) -> None:
    orc = await connect({"everything": everything(), "time": time_server()})
    report = orc.validate(blueprint(
        tool("sum", "everything.get-sum", {"a": "two", "bb": 3}),
        tool("echo", "everything.echoo", {"message": "hi"}),
        tool("other", "evrything.echo", {"message": "hi"}),
        tool("text", "everything.get-sum", {"a": "{{ inputs.n }} apples", "b": "{{ inputs.n }}"}),
        tool("typed", "time.get_current_time", {"timezone": "{{ inputs.n }}"}),
        tool("fine", "time.convert_time", {"source_timezone": "UTC", "time": "{{ inputs.hhmm }}",
                                           "target_timezone": "{{ inputs.zone }}"}),
        inputs={"type": "object", "properties": {"n": {"type": "integer"}, "hhmm": {"type": "string"},
                                                  "zone": {"type": "string"}}},
    ))
    assert not report.ok
    found = {(i.code, i.node_id, i.field): i for i in report.errors}
    assert set(found) == {
        ("invalid_tool_args", "sum", "tool_args.a"), ("invalid_tool_args", "sum", "tool_args.bb"),
        ("invalid_tool_args", "sum", "tool_args"), ("unknown_tool", "echo", "tool_name"),
        ("unknown_tool", "other", "tool_name"), ("invalid_tool_args", "text", "tool_args.a"),
        ("invalid_tool_args", "typed", "tool_args.timezone"),
    }  # text.b (an integer input for a number) and every argument of `fine` are right
    assert "'two' is not of type 'number'" in found["invalid_tool_args", "sum", "tool_args.a"].message
    assert found["invalid_tool_args", "sum", "tool_args.bb"].suggestion == "b"
    assert "needs argument 'b'" in found["invalid_tool_args", "sum", "tool_args"].message
    assert found["unknown_tool", "echo", "tool_name"].suggestion == "everything.echo"
    assert found["unknown_tool", "other", "tool_name"].suggestion == "everything.echo"
    assert found["invalid_tool_args", "text", "tool_args.a"].message.endswith("is number, but its template renders string")
    assert found["invalid_tool_args", "typed", "tool_args.timezone"].message.endswith(
        "is string, but its template renders integer")
    # Nothing ran: the same blueprint is refused before any upstream call.
    assert orc.services.upstream is not None
    assert orc.services.upstream.servers["everything"].connects == 1


async def test_a_server_that_cannot_start_is_named_in_validation(connect: Connect, tmp_path: Path) -> None:
    orc = await connect({"time": time_server(), "broken": {"command": str(tmp_path / "no-such-server")}})
    report = orc.validate(blueprint(tool("x", "broken.anything", {})))
    [issue] = report.errors
    assert issue.code == "unknown_tool"
    assert "MCP server 'broken'" in issue.message and "not found on PATH" in issue.message
    assert "time.get_current_time" in orc.registry.tools  # the other server is unaffected


async def test_upstream_annotations_reach_the_workflows_hints(connect: Connect, workspace: Path) -> None:
    orc = await connect({"time": time_server(), "files": filesystem(workspace)})
    orc.register_blueprint(blueprint(tool("now", "time.get_current_time", {"timezone": "UTC"}), name="reader"))
    orc.register_blueprint(blueprint(tool("now", "time.get_current_time", {"timezone": "UTC"}),
                                     tool("save", "files.write_file", {"path": "a.txt", "content": "x"}), name="writer"))
    assert orc.workflow_effects("reader").read_only is True
    writer = orc.workflow_effects("writer")
    assert (writer.read_only, writer.destructive) == (False, True)


async def test_upstream_progress_is_node_progress(connect: Connect) -> None:
    orc = await connect({"everything": everything()})
    events: list[dict[str, Any]] = []
    record = await orc.run(blueprint(tool("op", "everything.trigger-long-running-operation",
                                          {"duration": 0.4, "steps": 4})),
                           on_event=lambda event: events.append(event.to_dict()))
    assert record.status == "succeeded", record.error
    assert "Long running operation completed" in record.nodes["op"].output["text"]
    progress = [e["data"] for e in events if e["type"] == "node_event" and e["data"]["event"] == "progress"]
    assert [(p["progress"], p["total"]) for p in progress] == [(1, 4), (2, 4), (3, 4), (4, 4)]
    assert {p["tool"] for p in progress} == {"everything.trigger-long-running-operation"}
    assert {e["node_id"] for e in events if e["type"] == "node_event"} == {"op"}


async def test_calls_beyond_the_servers_limit_wait_their_turn(connect: Connect) -> None:
    orc = await connect({"everything": everything(maxConcurrency=1)})
    slow = {"duration": 0.6, "steps": 1}
    started = time.perf_counter()
    record = await orc.run(blueprint(tool("one", "everything.trigger-long-running-operation", slow),
                                     tool("two", "everything.trigger-long-running-operation", slow)))
    assert record.status == "succeeded", record.error
    assert time.perf_counter() - started >= 1.2  # one after the other, on one shared connection
    assert orc.services.upstream is not None and orc.services.upstream.servers["everything"].connects == 1


async def test_a_call_past_the_servers_timeout_fails_readably(connect: Connect) -> None:
    orc = await connect({"everything": everything(timeoutSeconds=0.5)})
    record = await orc.run(blueprint(tool("op", "everything.trigger-long-running-operation",
                                          {"duration": 5, "steps": 5})))
    assert record.status == "failed"
    error = record.nodes["op"].error
    assert error is not None and error["code"] == "upstream_timeout"
    assert error["message"] == "everything.trigger-long-running-operation did not answer within 0.5 s"
    again = await orc.run(blueprint(tool("echo", "everything.echo", {"message": "still here"})))
    assert again.nodes["echo"].output == {"text": "Echo: still here"}


async def test_tool_list_changes_refresh_the_registry(connect: Connect) -> None:
    orc = await connect({"plugins": changing()})
    assert "plugins.greet" not in orc.registry.tools
    first = await orc.run(blueprint(tool("add", "plugins.add_tool", {"name": "greet"})))
    assert first.status == "succeeded", first.error
    for _ in range(200):
        if "plugins.greet" in orc.registry.tools:
            break
        await asyncio.sleep(0.02)
    entry = orc.registry.tools["plugins.greet"]
    assert entry.description == "Greets (added at run time as greet)." and entry.parameters == ("who",)
    second = await orc.run(blueprint(tool("hello", "plugins.greet", {"who": "ada"})))
    assert second.status == "succeeded", second.error
    assert json.dumps(second.nodes["hello"].output) == '{"result": "hello ada from greet"}'
