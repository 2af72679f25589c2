"""The MCP surface through the SDK's own Client: in memory and over real HTTP, both protocol eras."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import mcp_types as types
import pytest
from mcp import Client, MCPError
from mcp_helpers import ADMIN, http_client, http_server, make_options, structured

from ice_mcp.orchestrator import Orchestrator
from ice_mcp.server import ServerOptions, build_server

NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
MANIFEST = """
api_version: network.v0
name: nightly_report
workflows:
  - id: extract
    ref: extract_rows
    inputs: {path: data/sales.csv, filter: "[?to_number(amount) > `100`]"}
  - id: summary
    ref: render_summary
    after: extract
    inputs: {rows: "{{ extract.rows }}", title: Big sales, path: reports/nightly.md}
"""
NEW_BLUEPRINT = {
    "name": "fresh",
    "description": "Registered during the test.",
    "inputs": {"type": "object", "properties": {"value": {"type": "string"}}},
    "nodes": [
        {
            "id": "e",
            "type": "tool",
            "tool_name": "echo",
            "tool_args": {"value": "{{ inputs.value }}"},
        }
    ],
}


@dataclass
class Harness:
    transport: str  # memory | http
    era: str  # legacy | modern
    orc: Orchestrator

    @contextlib.asynccontextmanager
    async def serve(self, options: ServerOptions | None = None) -> AsyncIterator[Any]:
        options = options or make_options()
        if self.transport == "memory":
            yield build_server(self.orc, options)
        else:
            async with http_server(self.orc, options) as url:
                yield url

    def client(self, target: Any, *, token: str | None = ADMIN, **kwargs: Any) -> Client:
        mode = "legacy" if self.era == "legacy" else "auto"
        if self.transport == "memory":
            return Client(target, mode=mode, **kwargs)
        return http_client(target, mode=mode, token=token, **kwargs)

    @contextlib.asynccontextmanager
    async def connect(
        self, options: ServerOptions | None = None, **kwargs: Any
    ) -> AsyncIterator[Client]:
        async with self.serve(options) as target, self.client(target, **kwargs) as client:
            yield client


@pytest.fixture(params=["memory-legacy", "memory-modern", "http-legacy", "http-modern"])
def harness(request: pytest.FixtureRequest, orc: Orchestrator) -> Harness:
    transport, era = request.param.split("-")
    return Harness(transport, era, orc)


async def wait_for(predicate: Any, attempts: int = 500) -> Any:
    """Poll a condition (bounded): no timed assertion, just enough patience."""
    for _ in range(attempts):
        value = predicate()
        if value:
            return value
        await asyncio.sleep(0.02)
    raise AssertionError("condition never became true")


async def test_list_and_call(harness: Harness) -> None:
    async with harness.connect() as client:
        expected = "2025-11-25" if harness.era == "legacy" else "2026-07-28"
        assert client.protocol_version == expected
        tools = (await client.list_tools()).tools
        names = [t.name for t in tools]
        assert all(NAME.match(n) for n in names), names
        assert (
            names
            == sorted(
                names[: names.index("run_status")],
                key=lambda n: (["workflow", "tool", "agent"].index(n.split("_")[0]), n),
            )
            + names[names.index("run_status") :]
        )
        steps = next(t for t in tools if t.name == "workflow_steps")
        assert steps.title == "workflow:steps"
        assert steps.meta is not None and steps.meta["io.ice_mcp/id"] == "workflow:steps"
        assert steps.input_schema["required"] == ["word"]
        assert steps.annotations is not None and steps.annotations.read_only_hint is True
        assert {"network_execute", "run_result", "blueprint_validate"} <= set(names)

        result = await client.call_tool("workflow_steps", {"word": "hello"})
        assert result.is_error is False
        envelope = structured(result)
        assert set(envelope) == {"run_id", "status", "outputs", "error", "cost_usd", "duration_ms"}
        assert envelope["status"] == "succeeded"
        assert envelope["outputs"] == {"upper": "HELLO"}

        canonical = await client.call_tool("workflow:steps", {"word": "again"})
        assert structured(canonical)["outputs"] == {"upper": "AGAIN"}

        direct = await client.call_tool("tool_echo", {"value": [1, 2]})
        assert structured(direct)["outputs"] == {"result": {"value": [1, 2]}}


async def test_failed_run_names_the_node(harness: Harness) -> None:
    async with harness.connect() as client:
        result = await client.call_tool("workflow_broken", {})
        assert result.is_error is True
        envelope = structured(result)
        assert envelope["status"] == "failed"
        text = " ".join(c.text for c in result.content if isinstance(c, types.TextContent))
        assert "explode" in text and "boom" in text


async def test_unknown_tool_and_bad_arguments(harness: Harness) -> None:
    async with harness.connect() as client:
        with pytest.raises(MCPError) as caught:
            await client.call_tool("workflow_nope", {})
        assert "workflow_nope" in str(caught.value)
        bad = await client.call_tool("workflow_steps", {"word": 42})
        assert bad.is_error is True
        assert "word" in bad.content[1].text and "string" in bad.content[1].text
        missing = await client.call_tool("workflow_steps", {})
        assert missing.is_error is True and "word" in missing.content[1].text


async def test_progress_per_finished_node(harness: Harness) -> None:
    seen: list[tuple[float, float | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total))

    async with harness.connect() as client:
        result = await client.call_tool(
            "workflow_steps", {"word": "x"}, progress_callback=on_progress
        )
        assert structured(result)["status"] == "succeeded"
        await wait_for(lambda: len(seen) >= 4)
    assert [p for p, _ in seen] == [1.0, 2.0, 3.0, 4.0]
    assert {t for _, t in seen} == {4.0}


async def test_cancelling_the_call_cancels_the_run(harness: Harness) -> None:
    async with harness.connect() as client:
        call = asyncio.create_task(client.call_tool("workflow_slow", {"seconds": 60}))
        running = await wait_for(lambda: harness.orc.list_runs(status="running"))
        run_id = running[0].run_id
        call.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await call
        record = await wait_for(
            lambda: (r := harness.orc.get_run(run_id)) and r.status != "running" and r
        )
        assert record.status == "cancelled"


async def test_register_notifies_both_eras_and_delete_removes(harness: Harness) -> None:
    legacy_events: list[Any] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            legacy_events.append(message)

    async with (
        harness.serve() as target,
        harness.client(target, message_handler=on_message) as client,
    ):
        if True:
            # The other era listens too: a modern listener, and for memory/http also a legacy session.
            other_mode = "legacy" if harness.era != "legacy" else "auto"
            other = Harness(
                harness.transport, "legacy" if other_mode == "legacy" else "modern", harness.orc
            )
            async with other.client(target, message_handler=on_message) as other_client:
                modern = client if harness.era == "modern" else other_client
                legacy = client if harness.era == "legacy" else other_client
                await legacy.list_tools()  # the session is known to the server
                async with modern.listen(tools_list_changed=True) as subscription:
                    result = await client.call_tool(
                        "blueprint_register", {"blueprint": json.dumps(NEW_BLUEPRINT)}
                    )
                    assert result.is_error is False, result
                    assert structured(result)["tool"] == "workflow_fresh"
                    event = await asyncio.wait_for(anext(aiter(subscription)), timeout=30)
                    assert event is not None
                await wait_for(lambda: legacy_events)
                names = [t.name for t in (await client.list_tools(cache_mode="bypass")).tools]
                assert "workflow_fresh" in names
                ran = await client.call_tool("workflow_fresh", {"value": "v"})
                assert structured(ran)["outputs"] == {"e": {"value": "v"}}

                deleted = await client.call_tool("blueprint_delete", {"name": "fresh"})
                assert deleted.is_error is False
                names = [t.name for t in (await client.list_tools(cache_mode="bypass")).tools]
                assert "workflow_fresh" not in names
                with pytest.raises(MCPError):
                    await client.call_tool("workflow_fresh", {"value": "v"})


async def test_same_idempotency_key_one_run(harness: Harness) -> None:
    async with harness.connect() as client:
        first = structured(
            await client.call_tool("workflow_slow", {"seconds": 0.05, "idempotency_key": "k-1"})
        )
        second = structured(
            await client.call_tool("workflow_slow", {"seconds": 0.05, "idempotency_key": "k-1"})
        )
        assert first["run_id"] == second["run_id"]
        meta_key = {"idempotency_key": "k-2"}
        third = structured(
            await client.call_tool("workflow_slow", {"seconds": 0.05}, meta=meta_key)
        )
        fourth = structured(
            await client.call_tool("workflow_slow", {"seconds": 0.05}, meta=meta_key)
        )
        assert third["run_id"] == fourth["run_id"] != first["run_id"]
        assert len([r for r in harness.orc.list_runs(limit=100) if r.workflow == "slow"]) == 2


async def test_run_outliving_the_budget_returns_running(harness: Harness) -> None:
    async with harness.connect(make_options(wait_seconds=0.05)) as client:
        first = structured(await client.call_tool("workflow_slow", {"seconds": 0.6}))
        assert first["status"] == "running"
        status = structured(await client.call_tool("run_status", {"run_id": first["run_id"]}))
        assert status["run_id"] == first["run_id"]
        final = structured(
            await client.call_tool("run_result", {"run_id": first["run_id"], "wait_seconds": 30})
        )
        assert final["status"] == "succeeded"
        assert final["outputs"] == {"slept": 0.6}
        listed = structured(await client.call_tool("run_list", {"status": "succeeded"}))
        assert first["run_id"] in [r["run_id"] for r in listed["runs"]]


async def test_resources_templates_prompts_completions(harness: Harness) -> None:
    async with harness.connect() as client:
        run = structured(await client.call_tool("workflow_steps", {"word": "abc"}))
        uris = {str(r.uri) for r in (await client.list_resources()).resources}
        assert {
            "ice://docs/getting-started",
            "ice://blueprints/csv_report",
            "ice://workflows/steps",
        } <= uris
        templates = {
            t.uri_template for t in (await client.list_resource_templates()).resource_templates
        }
        assert "ice://workflows/{name}/diagram" in templates and "ice://runs/{run_id}" in templates

        doc = (await client.read_resource("ice://docs/blueprint-format")).contents[0]
        assert isinstance(doc, types.TextResourceContents) and "## Top level" in doc.text
        template = (await client.read_resource("ice://blueprints/csv_report")).contents[0]
        assert (
            isinstance(template, types.TextResourceContents)
            and json.loads(template.text)["name"] == "csv_report"
        )
        diagram = (await client.read_resource("ice://workflows/steps/diagram")).contents[0]
        assert isinstance(diagram, types.TextResourceContents)
        assert diagram.text.startswith("flowchart TD") and "first --> second" in diagram.text
        record = (await client.read_resource(f"ice://runs/{run['run_id']}")).contents[0]
        assert (
            isinstance(record, types.TextResourceContents)
            and json.loads(record.text)["status"] == "succeeded"
        )
        with pytest.raises(MCPError):
            await client.read_resource("ice://runs/missing")

        prompts = {p.name: p for p in (await client.list_prompts()).prompts}
        assert {"create_workflow", "explain_run", "harden_workflow"} <= set(prompts)
        assert next(a.name for a in prompts["create_workflow"].arguments or []) == "goal"
        created = await client.get_prompt("create_workflow", {"goal": "total my invoices"})
        text = created.messages[0].content.text  # type: ignore[union-attr]
        assert "total my invoices" in text and "`csv_reader`" in text and "`steps`" in text
        explained = await client.get_prompt("explain_run", {"run_id": run["run_id"]})
        text = explained.messages[0].content.text  # type: ignore[union-attr]
        assert run["run_id"] in text and "succeeded" in text and '"second"' in text
        hardened = await client.get_prompt("harden_workflow", {"workflow": "steps"})
        assert '"render_template"' in hardened.messages[0].content.text  # type: ignore[union-attr]

        names = await client.complete(
            types.ResourceTemplateReference(type="ref/resource", uri="ice://workflows/{name}"),
            {"name": "name", "value": "st"},
        )
        assert names.completion.values == ["steps"]
        docs = await client.complete(
            types.ResourceTemplateReference(type="ref/resource", uri="ice://docs/{name}"),
            {"name": "name", "value": "node"},
        )
        assert docs.completion.values == ["node-types"]
        workflows = await client.complete(
            types.PromptReference(type="ref/prompt", name="harden_workflow"),
            {"name": "workflow", "value": "br"},
        )
        assert workflows.completion.values == ["broken"]


async def test_network_execute(harness: Harness) -> None:
    async with harness.connect() as client:
        result = await client.call_tool("network_execute", {"manifest": MANIFEST})
        assert result.is_error is False, result.content
        data = result.structured_content
        assert data is not None and data["status"] == "succeeded"
        assert data["workflows"]["extract"]["status"] == "succeeded"
        assert data["workflows"]["summary"]["outputs"]["count"] == 2
        alias = await client.call_tool("network.execute", {"manifest": MANIFEST})
        assert (
            alias.structured_content is not None
            and alias.structured_content["status"] == "succeeded"
        )
