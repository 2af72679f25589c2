"""Hostile validation against a real server: each call gets a clear error while /healthz stays under 100 ms."""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from live import HealthWatch, healthz_watch, live_server
from mcp_helpers import http_client

from ice_mcp.blueprint.loading import MAX_NESTING_DEPTH

HOSTILE_SECONDS = 1.0  # keep hostile calls in flight this long, so many probes overlap them


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with live_server(tmp_path_factory.mktemp("validation_dos")) as base_url:
        yield base_url


def regex_blueprint(pattern: str) -> dict[str, Any]:
    return {
        "name": "regex",
        "inputs": {"type": "object", "properties": {"s": {"type": "string", "pattern": pattern}}},
        "nodes": [{"id": "e", "type": "tool", "tool_name": "render_template", "tool_args": {"template": "{{ inputs.s }}"}}],
    }


def alias_bomb(levels: int) -> str:
    lines = ["defs:", "  - &v0 ['lol', 'lol']"]
    lines += [f"  - &v{i} [*v{i - 1}, *v{i - 1}]" for i in range(1, levels)]
    lines += ["name: bomb", "nodes:", f"  - {{id: e, type: tool, tool_name: echo, tool_args: {{value: *v{levels - 1}}}}}"]
    return "\n".join(lines) + "\n"


async def keep_in_flight(call: Callable[[], Awaitable[Any]], watch: HealthWatch) -> tuple[list[Any], float]:
    """Repeat `call` for HOSTILE_SECONDS, and until three /healthz probes came back meanwhile; its answers and
    the slowest call's duration."""
    answers: list[Any] = []
    slowest = 0.0
    deadline = time.monotonic() + HOSTILE_SECONDS
    while time.monotonic() < deadline or len(answers) < 3 or (len(watch.latencies) < 3 and len(answers) < 10_000):
        started = time.perf_counter()
        answers.append(await call())
        slowest = max(slowest, time.perf_counter() - started)
    return answers, slowest


def error_code(result: Any) -> str:
    assert result.is_error is True, result
    return str(result.structured_content["error"]["code"])


async def test_catastrophic_regex_is_matched_by_re2(url: str) -> None:
    blueprint = regex_blueprint("^(a+)+$")
    hostile = {"s": "a" * 50_000 + "!"}  # hours on a backtracking engine
    async with http_client(url) as client:
        with healthz_watch(url) as watch:
            answers, slowest = await keep_in_flight(
                lambda: client.call_tool("blueprint_run", {"blueprint": blueprint, "inputs": hostile}), watch)
        for answer in answers:
            assert error_code(answer) == "invalid_inputs"
            assert "does not match" in json.dumps(answer.structured_content["error"])
        watch.assert_responsive()
        print(f"regex: {len(answers)} calls, slowest {slowest * 1000:.0f} ms, worst /healthz {watch.worst * 1000:.0f} ms")

        report = await client.call_tool("blueprint_validate", {"blueprint": regex_blueprint(r"^(a+)\1$")})
        [issue] = report.structured_content["errors"]
        assert issue["code"] == "unsupported_pattern" and issue["field"] == "inputs.properties.s"


async def test_yaml_alias_bomb_is_refused(url: str) -> None:
    bomb = alias_bomb(30)  # 2**30 strings once expanded, 600 bytes of text
    async with http_client(url) as client:
        with healthz_watch(url) as watch:
            answers, slowest = await keep_in_flight(
                lambda: client.call_tool("blueprint_validate", {"blueprint": bomb}), watch)
        for answer in answers:
            assert error_code(answer) == "yaml_too_complex"
            assert "aliases" in answer.structured_content["error"]["message"]
        watch.assert_responsive()
        print(f"alias bomb: {len(answers)} calls, slowest {slowest * 1000:.0f} ms, worst /healthz {watch.worst * 1000:.0f} ms")


async def test_fifty_thousand_nodes_are_refused(url: str) -> None:
    nodes = [{"id": f"n{i}", "type": "tool", "tool_name": "render_template"} for i in range(50_000)]
    # As text: the same 2 MiB as a JSON object costs the MCP transport 0.2-0.4 s to decode before ice_mcp sees it.
    huge = json.dumps({"name": "huge", "nodes": nodes}, separators=(",", ":"))
    async with http_client(url) as client:
        with healthz_watch(url) as watch:
            answers, slowest = await keep_in_flight(
                lambda: client.call_tool("blueprint_validate", {"blueprint": huge}), watch)
        for answer in answers:
            assert error_code(answer) == "document_too_large"
            assert "larger than 1048576 bytes" in answer.structured_content["error"]["message"]
        watch.assert_responsive()
        print(f"50,000 nodes ({len(huge) // 1024} KiB): {len(answers)} calls, "
              f"slowest {slowest * 1000:.0f} ms, worst /healthz {watch.worst * 1000:.0f} ms")


@pytest.mark.parametrize("loops", [50, 300])
async def test_deep_nesting_is_refused(url: str, loops: int) -> None:
    node: dict[str, Any] = {"id": "leaf", "type": "tool", "tool_name": "render_template"}
    for i in range(loops):
        node = {"id": f"l{i}", "type": "loop", "items": "{{ [1] }}", "body": [node]}
    text = json.dumps({"name": "deep", "nodes": [node]})  # sent as text: 2 levels of JSON a loop
    async with http_client(url) as client:
        with healthz_watch(url) as watch:
            answers, slowest = await keep_in_flight(
                lambda: client.call_tool("blueprint_run", {"blueprint": text}), watch)
        for answer in answers:
            if loops * 2 < MAX_NESTING_DEPTH:  # read, then refused by the blueprint's own (configurable) limit
                assert error_code(answer) == "invalid_blueprint"
                [issue] = answer.structured_content["error"]["details"]["errors"]
                assert issue["code"] == "blueprint_too_large" and "max_blueprint_depth" in issue["message"]
            else:  # refused while read, as a YAML document as deep would be
                assert error_code(answer) == "yaml_too_complex"
                assert f"deeper than {MAX_NESTING_DEPTH} levels" in answer.structured_content["error"]["message"]
        watch.assert_responsive()
        print(f"deep: {len(answers)} calls, slowest {slowest * 1000:.0f} ms, worst /healthz {watch.worst * 1000:.0f} ms")


async def test_costly_templates_are_validated_off_the_event_loop(url: str) -> None:
    # Jinja compiles a long operator chain in time quadratic in its length: ~0.5 s for these 30.
    heavy = [{"id": f"n{i}", "type": "tool", "tool_name": "render_template",
              "tool_args": {"template": "{{ " + " + ".join(f"inputs.a{i}x{j}" for j in range(40)) + " }}"}}
             for i in range(30)]
    async with http_client(url) as client:
        with healthz_watch(url) as watch:
            answers, slowest = await keep_in_flight(
                lambda: client.call_tool("blueprint_validate", {"blueprint": {"name": "heavy", "nodes": heavy}}), watch)
        for answer in answers:
            assert not answer.is_error and answer.structured_content["ok"] is True
        watch.assert_responsive()
        print(f"heavy templates: {len(answers)} calls, slowest {slowest * 1000:.0f} ms, "
              f"worst /healthz {watch.worst * 1000:.0f} ms")


async def test_a_normal_blueprint_still_runs(url: str, tmp_path: Path) -> None:
    async with http_client(url) as client:
        result = await client.call_tool("blueprint_run", {"blueprint": regex_blueprint("^a+$"), "inputs": {"s": "aaa"}})
        assert result.is_error is not True, result
        assert result.structured_content["status"] == "succeeded"
