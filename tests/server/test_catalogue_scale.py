"""A catalogue that scales: 300 workflows behind a short, stable tools/list, found by workflow_search and run by
workflow_start exactly as by their own tools, through the official MCP SDK client."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import jsonschema
import mcp_types as types
import pytest
from catalogue_fixtures import LABELLED, catalogue, name_of
from mcp import Client
from mcp_helpers import (
    SLOW,
    http_client,
    http_server,
    make_options,
    serve_subprocess,
    structured,
    subprocess_env,
    write_blueprints,
)
from tasks_client import TasksClient

from ice_mcp.cli import build_parser
from ice_mcp.operations.search import SearchDoc, SearchIndex, stem, words
from ice_mcp.orchestrator import Orchestrator
from ice_mcp.server import build_server
from ice_mcp.server.cli import _options
from ice_mcp.server.protocol.envelope import ENVELOPE_SCHEMA

PINNED = name_of("invoice", "summarize")  # `pinned: true` in its blueprint
MAX_TOOLS, MAX_LIST_BYTES, MAX_NAME = 32, 40 * 1024, 40
FRESH = {"name": "fresh_payroll_check", "description": "Check this month's payroll run for missing overtime.",
         "inputs": {"type": "object", "properties": {"month": {"type": "string"}}, "required": ["month"]},
         "outputs": {"value": "{{ e.value }}"},
         "nodes": [{"id": "e", "type": "tool", "tool_name": "echo", "tool_args": {"value": "{{ inputs.month }}"}}]}


@pytest.fixture
async def big(orc: Orchestrator) -> AsyncIterator[Orchestrator]:
    """The test orchestrator (6 workflows) plus the 300 of the fixture catalogue, one pinned in its blueprint."""
    for blueprint in catalogue():
        orc.register_blueprint({**blueprint, "pinned": blueprint["name"] == PINNED})
    yield orc


def connect(orc: Orchestrator, era: str = "modern", **options: Any) -> Client:
    server = build_server(orc, make_options(pinned=("steps",), **options))
    return Client(server, mode="legacy" if era == "legacy" else "auto")


def listing_bytes(result: types.ListToolsResult) -> int:
    return len(json.dumps(result.model_dump(mode="json", by_alias=True, exclude_none=True)).encode())


def envelope_without_ids(result: types.CallToolResult) -> dict[str, Any]:
    data = structured(result)
    return {key: value for key, value in data.items() if key not in ("run_id", "duration_ms")}


# -- tools/list -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_300_workflows_list_as_a_short_stable_list(big: Orchestrator, era: str) -> None:
    assert len(big.registry.workflows) == 306
    async with connect(big, era) as client:
        first = await client.list_tools(cache_mode="bypass")
        again = [await client.list_tools(cache_mode="bypass") for _ in range(3)]
        names = [tool.name for tool in first.tools]
        assert len(names) <= MAX_TOOLS and listing_bytes(first) <= MAX_LIST_BYTES, (len(names), listing_bytes(first))
        assert first.next_cursor is None and all(result.next_cursor is None for result in again)
        assert all(result.model_dump() == first.model_dump() for result in again)  # same order, same tools
        assert all(len(name) <= MAX_NAME for name in names), names
        assert {"workflow_search", "workflow_start", "run_status", "run_result", "blueprint_run"} <= set(names)
        assert {f"workflow_{PINNED}", "workflow_steps"} <= set(names)  # pinned: by blueprint, by --pin
        assert not {"workflow_noop", f"workflow_{name_of('ticket', 'archive')}", "schedule_create"} & set(names)

        # Unlisted is not gone: every workflow tool (and built-in) still answers to its own name.
        direct = await client.call_tool(f"workflow_{name_of('ticket', 'archive')}", {"queue": "billing"})
        assert structured(direct)["outputs"] == {"echoed": "billing"}
        assert structured(await client.call_tool("workflow:noop", {"value": 3}))["outputs"] == {"echo": {"value": 3}}
        schedules = await client.call_tool("schedule_list", {})  # reached: it answers that there is no store here
        assert structured(schedules)["error"]["code"] == "no_store"


async def test_a_small_catalogue_lists_every_workflow(orc: Orchestrator) -> None:
    async with connect(orc) as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
    assert {f"workflow_{name}" for name in orc.registry.workflows} <= names
    assert {"schedule_create", "webhook_create", "notify_set"} <= names
    # Listed at every size: a client that never rereads the list can still start what is registered later.
    assert {"workflow_search", "workflow_start"} <= names


async def test_schemas_tell_the_truth(big: Orchestrator) -> None:
    async with connect(big) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        start, search = tools["workflow_start"], tools["workflow_search"]
        assert start.input_schema["additionalProperties"] is False
        assert start.input_schema["required"] == ["name", "inputs"]
        assert start.input_schema["properties"]["inputs"]["type"] == "object"
        assert start.output_schema is not None and start.output_schema["type"] == ENVELOPE_SCHEMA["type"]
        assert start.output_schema["required"] == ENVELOPE_SCHEMA["required"]
        assert start.annotations is not None and start.annotations.read_only_hint is False
        assert search.annotations is not None and search.annotations.read_only_hint is True

        found = await client.call_tool("workflow_search", {"query": "merge duplicate employee records", "limit": 3})
        assert search.output_schema is not None
        jsonschema.validate(structured(found), search.output_schema)
        assert len(structured(found)["results"]) == 3

        # What the schema forbids the server refuses, with the direct tools' error shape.
        for arguments in ({"name": "steps", "inputs": {"word": "x"}, "extra": 1},
                          {"name": "steps", "inputs": ["x"]}, {"name": "steps"},
                          {"name": "steps", "inputs": {"word": "x"}, "wait_seconds": -1}):
            refused = await client.call_tool("workflow_start", arguments)
            assert refused.is_error is True, arguments
            assert structured(refused)["error"]["code"] == "invalid_arguments", arguments
            assert "invalid arguments for workflow_start" in refused.content[1].text
        too_many = await client.call_tool("workflow_search", {"query": "x", "limit": 50})
        assert too_many.is_error is True and structured(too_many)["error"]["code"] == "invalid_arguments"


# -- workflow_search ------------------------------------------------------------------------------------


async def test_search_puts_the_wanted_workflow_in_the_top_5(big: Orchestrator) -> None:
    async with connect(big) as client:
        found = 0
        for query, (domain, job) in LABELLED:
            results = structured(await client.call_tool("workflow_search", {"query": query}))["results"]
            assert len(results) <= 5
            found += name_of(domain, job) in [result["name"] for result in results]
        first = structured(await client.call_tool("workflow_search", {"query": "vendor invoices digest"}))
    assert len(LABELLED) >= 50
    assert found / len(LABELLED) >= 0.9, f"{found} of {len(LABELLED)}"
    top = first["results"][0]
    assert top["name"] == PINNED and top["tool"] == f"workflow_{PINNED}"
    assert top["inputs"]["required"] == ["period"] and top["score"] > first["results"][-1]["score"]


async def test_search_answers_nothing_rather_than_noise(big: Orchestrator) -> None:
    async with connect(big) as client:
        none = structured(await client.call_tool("workflow_search", {"query": "the of and please"}))
        assert none == {"results": []}
        same = [structured(await client.call_tool("workflow_search", {"query": "archive old logs"}))
                for _ in range(2)]
        assert same[0] == same[1]


# -- workflow_start -------------------------------------------------------------------------------------


async def test_start_is_the_workflows_own_call(big: Orchestrator) -> None:
    progress: dict[str, list[float]] = {"direct": [], "start": []}

    def recorder(key: str) -> Any:
        async def record(value: float, total: float | None, message: str | None) -> None:
            progress[key].append(value)
        return record

    async with connect(big) as client:
        direct = await client.call_tool("workflow_steps", {"word": "hello"}, progress_callback=recorder("direct"))
        started = await client.call_tool("workflow_start", {"name": "steps", "inputs": {"word": "hello"}},
                                         progress_callback=recorder("start"))
        assert started.is_error is False and envelope_without_ids(started) == envelope_without_ids(direct)
        assert structured(started)["outputs"] == {"upper": "HELLO"}
        assert structured(started)["run_id"] != structured(direct)["run_id"]
        assert progress["start"] == progress["direct"] == [1.0, 2.0, 3.0, 4.0]

        unlisted = name_of("patient", "redact")
        direct = await client.call_tool(f"workflow_{unlisted}", {"clinic": "north"})
        started = await client.call_tool("workflow_start", {"name": unlisted, "inputs": {"clinic": "north"}})
        assert envelope_without_ids(started) == envelope_without_ids(direct)
        assert structured(started)["outputs"] == {"echoed": "north"}

        # A failed run, invalid inputs: the same isError results as the workflow's own tool gives.
        assert envelope_without_ids(await client.call_tool("workflow_start", {"name": "broken", "inputs": {}})) \
            == envelope_without_ids(await client.call_tool("workflow_broken", {}))
        wrong = await client.call_tool("workflow_start", {"name": "steps", "inputs": {"word": 3}})
        direct_wrong = await client.call_tool("workflow_steps", {"word": 3})
        assert wrong.is_error is direct_wrong.is_error is True
        assert [c.text for c in wrong.content] == [c.text for c in direct_wrong.content]  # type: ignore[union-attr]

        # The same idempotency key attaches to the same run, as with the direct tool.
        keyed = [structured(await client.call_tool(
            "workflow_start", {"name": "noop", "inputs": {"value": 1}, "idempotency_key": "k-1"}))["run_id"]
            for _ in range(2)]
        assert keyed[0] == keyed[1]
        # The tool's own name and canonical id are accepted for `name` too.
        assert structured(await client.call_tool(
            "workflow_start", {"name": "workflow:noop", "inputs": {"value": 2}}))["outputs"] == {"echo": {"value": 2}}


async def test_start_names_the_closest_workflows_for_an_unknown_one(big: Orchestrator) -> None:
    async with connect(big) as client:
        unknown = await client.call_tool("workflow_start", {"name": "employee_dedup", "inputs": {}})
    assert unknown.is_error is True
    error = structured(unknown)["error"]
    assert error["code"] == "unknown_workflow" and error["details"]["name"] == "employee_dedup"
    assert name_of("employee", "dedupe") in error["details"]["suggestions"]
    assert "did you mean" in error["message"] and name_of("employee", "dedupe") in error["message"]


async def test_a_workflow_registered_after_listing_starts_at_once(big: Orchestrator) -> None:
    async with connect(big) as client:
        listed = {tool.name for tool in (await client.list_tools()).tools}
        assert "workflow_fresh_payroll_check" not in listed
        registered = await client.call_tool("blueprint_register", {"blueprint": FRESH})
        assert registered.is_error is False
        started = await client.call_tool("workflow_start", {"name": "fresh_payroll_check",
                                                            "inputs": {"month": "2026-05"}})
        assert structured(started)["status"] == "succeeded" and structured(started)["outputs"] == {
            "value": "2026-05"}
        found = structured(await client.call_tool("workflow_search", {"query": "overtime in payroll"}))
        assert found["results"][0]["name"] == "fresh_payroll_check"
        # The list itself keeps its size: the new workflow is not pinned.
        assert {tool.name for tool in (await client.list_tools(cache_mode="bypass")).tools} == listed


async def test_a_run_outliving_the_budget_becomes_a_task_through_start_too(orc: Orchestrator) -> None:
    options = make_options(wait_seconds=0.5, task_after_seconds=0.3, catalogue_max=2)
    async with http_server(orc, options) as url:
        tasks = TasksClient()
        async with http_client(url, extensions=[tasks]) as client:
            answer = await client.call_tool("workflow_start", {"name": SLOW["name"], "inputs": {"seconds": 1.0}})
        assert structured(answer)["outputs"] == {"slept": 1.0}
        assert tasks.created and tasks.created[0].task_id == structured(answer)["run_id"]
        async with http_client(url) as plain:  # no tasks: the envelope says `running`, as the direct tool's
            running = await plain.call_tool("workflow_start", {"name": SLOW["name"], "inputs": {"seconds": 5},
                                                               "wait_seconds": 0.2})
            assert structured(running)["status"] == "running"


async def test_a_read_only_server_starts_only_read_only_workflows(big: Orchestrator) -> None:
    async with connect(big, read_only=True) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        start = tools["workflow_start"]
        assert start.annotations is not None and start.annotations.read_only_hint is True
        refused = await client.call_tool("workflow_start", {"name": "render_summary", "inputs": {}})
        direct = await client.call_tool("workflow_render_summary", {})
        assert refused.is_error is True and structured(refused)["error"]["code"] == "forbidden"
        assert [c.text for c in refused.content] == [c.text for c in direct.content]  # type: ignore[union-attr]
        found = structured(await client.call_tool("workflow_search", {"query": "render summary report"}))
        assert "render_summary" not in {result["name"] for result in found["results"]}


async def test_a_workflow_named_search_does_not_take_the_tools_name(orc: Orchestrator) -> None:
    orc.register_blueprint({**FRESH, "name": "search"})
    async with connect(orc) as client:
        names = [tool.name for tool in (await client.list_tools()).tools]
        assert names.count("workflow_search") == 1
        own = next(name for name in names if name.startswith("workflow_search_"))
        assert structured(await client.call_tool(own, {"month": "m"}))["outputs"] == {"value": "m"}
        assert "results" in structured(await client.call_tool("workflow_search", {"query": "payroll"}))


# -- --pin and ICE_MCP_CATALOGUE_MAX through the command line ----------------------------------------------


def test_pin_is_repeatable() -> None:
    args = build_parser().parse_args(["serve", "--pin", "steps", "--pin", "noop"])
    assert _options(args).pinned == ("steps", "noop")


def test_serve_pins_what_it_is_told(tmp_path: Path) -> None:
    folder = write_blueprints(tmp_path / "blueprints")  # 6 workflows: over a maximum of 4
    env = {**subprocess_env(tmp_path), "ICE_MCP_CATALOGUE_MAX": "4"}
    with serve_subprocess("--blueprints", str(folder), "--tools", "mcp_fixture_tools", "--pin", "noop",
                          env=env) as url:

        async def listing() -> set[str]:
            async with http_client(url) as client:
                return {tool.name for tool in (await client.list_tools()).tools}

        names = asyncio.run(listing())
    assert "workflow_noop" in names and "workflow_steps" not in names and "workflow_start" in names


# -- the ranking itself ---------------------------------------------------------------------------------


def test_words_and_stems_meet_across_forms() -> None:
    assert words("exportLeads_to-CSV résumés") == ["export", "leads", "to", "csv", "resumes"]
    assert stem("invoices") == stem("invoicing") == stem("invoice")
    assert stem("creation") == stem("creating") == stem("create")
    assert stem("entries") == stem("entry")


def test_index_ranks_by_field_weight_and_prefix() -> None:
    index = SearchIndex([
        SearchDoc("summarize_tickets", "Write a digest of support tickets.", ("queue",), ("support",)),
        SearchDoc("ticket_export", "Export support tickets to CSV.", ("queue",), ("csv",)),
        SearchDoc("notify_team", "Send a notification to the team channel.", ("channel",), ("slack",)),
    ])
    assert index.search("summary of tickets")[0].name == "summarize_tickets"
    assert [hit.name for hit in index.search("notify", 1)] == ["notify_team"]  # notification, by prefix
    twins = SearchIndex([SearchDoc("b_copy", "Export tickets."), SearchDoc("a_copy", "Export tickets.")])
    assert [hit.name for hit in twins.search("export tickets")] == ["a_copy", "b_copy"]  # a tie goes by name
    assert index.search("nothing matches here") == [] and index.search("tickets", 0) == []
    assert len(SearchIndex([])) == 0 and SearchIndex([]).search("x") == []


def test_tags_are_searched_from_the_blueprint_and_from_its_older_metadata() -> None:
    from ice_mcp.blueprint.models import Blueprint
    from ice_mcp.server.protocol.catalogue import search_doc

    node = [{"id": "e", "type": "tool", "tool_name": "echo"}]
    both = Blueprint.model_validate({"name": "ledger", "tags": ["invoices"], "metadata": {"tags": "billing"},
                                     "nodes": node})
    assert search_doc(both).tags == ("invoices", "billing")
    index = SearchIndex([search_doc(both), search_doc(Blueprint.model_validate({"name": "other", "nodes": node}))])
    assert [hit.name for hit in index.search("invoices", 5)] == ["ledger"]


async def test_a_long_name_is_listed_within_40_characters_and_reached_every_way(big: Orchestrator) -> None:
    long = "quarterly_revenue_reconciliation_by_region_v2"  # 45 characters: `workflow_` makes 54
    big.register_blueprint({**FRESH, "name": long, "pinned": True})
    async with connect(big) as client:
        listed = [tool.name for tool in (await client.list_tools()).tools if tool.title == f"workflow:{long}"]
        assert len(listed) == 1 and len(listed[0]) <= MAX_NAME and listed[0].startswith("workflow_quarterly")
        for name in (listed[0], f"workflow_{long}", f"workflow:{long}"):
            answer = await client.call_tool(name, {"month": "2026-11"})
            assert structured(answer)["outputs"] == {"value": "2026-11"}, name
