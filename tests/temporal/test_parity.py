"""The same blueprints give the same outputs on the embedded engine and on Temporal: every bundled template,
and one workflow with a node of every type (code, llm and agent on the LLM mock, nested and recursive flows)."""

from __future__ import annotations

import contextlib
import http.server
import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from temporal_cluster import Cluster

from ice_mcp.bundled import bundled_dir

TEMPLATES = sorted(path.stem for path in bundled_dir("blueprints").glob("*.json"))

DOUBLE_IT = {
    "name": "double_it", "description": "Double a number.",
    "inputs": {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]},
    "outputs": {"result": "{{ d.result }}"},
    "nodes": [{"id": "d", "type": "code", "code": "return inputs['x'] * 2", "inputs": {"x": "{{ inputs.x }}"}}],
}
PRICER = {"model": "gpt-4o-mini", "system": "You price things.", "tools": ["lookup_price"], "workflows": ["double_it"]}
EVERY_TYPE = {
    "name": "every_type",
    "inputs": {"type": "object", "properties": {"values": {"type": "array"}}, "required": ["values"]},
    "nodes": [
        {"id": "pick", "type": "tool", "tool_name": "json_query", "tool_args": {"data": {"v": "{{ inputs['values'] }}"},
                                                                             "path": "v"}},
        {"id": "total", "type": "code", "code": "return sum(inputs['v'])", "inputs": {"v": "{{ pick.result }}"}},
        {"id": "big", "type": "condition", "expression": "total.result > 5", "true_path": ["each"], "false_path": ["small"]},
        {"id": "small", "type": "tool", "tool_name": "render_template", "tool_args": {"template": "small"}},
        {"id": "each", "type": "loop", "items": "{{ pick.result }}", "item_var": "n", "concurrency": 2, "body": [
            {"id": "twice", "type": "workflow", "workflow_ref": "double_it", "inputs": {"x": "{{ n }}"}}]},
        {"id": "both", "type": "parallel", "dependencies": ["total"], "branches": [
            [{"id": "hello", "type": "llm", "model": "gpt-4o-mini", "prompt": "say hello"}],
            [{"id": "pricer", "type": "agent", "agent": PRICER, "input": "price report for A1"}]]},
        {"id": "grow", "type": "recursive", "workflow_ref": "double_it", "max_iterations": 6,
         "inputs": {"x": "{{ previous.result if previous else 1 }}"}, "convergence_condition": "previous.result >= 8"},
        {"id": "count", "type": "recursive", "max_iterations": 5, "convergence_condition": "iteration >= 3",
         "body": [{"id": "step", "type": "code", "code": "return {'i': inputs['i']}", "inputs": {"i": "{{ iteration }}"}}]},
    ],
    "outputs": {"doubled": "{{ each.results }}", "hello": "{{ both.branches[0] }}", "agent": "{{ both.branches[1] }}",
                "grow": "{{ grow }}", "count": "{{ count }}", "small": "{{ small }}"},
}


def lookup_price(sku: str) -> dict[str, Any]:
    """Price of a product by SKU."""
    return {"sku": sku, "price": 9.5}


@contextlib.contextmanager
def json_server() -> Iterator[str]:
    """A loopback HTTP server answering every GET with the same JSON document (for api_extract)."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = json.dumps({"items": [{"name": "ice"}, {"name": "mcp"}]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

        def date_time_string(self, timestamp: float | None = None) -> str:
            return "Mon, 23 Nov 2026 00:00:00 GMT"  # the same answer on both engines, whenever each asks

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/data"
    finally:
        server.shutdown()


def inputs_for(case: str, url: str) -> dict[str, Any]:
    return {
        "api_extract": {"url": url, "query": "items[].name"},
        "csv_report": {"path": "sales.csv", "threshold": 100},
        "document_qa": {"path": "doc.txt", "question": "What melts?"},
        "extract_rows": {"path": "sales.csv", "filter": "[?week == '2']"},
        "render_summary": {"rows": [{"week": 1, "amount": 10}], "title": "Weekly"},
        "research_fanout": {"topic": "ice", "questions": ["Why does it float?", "Why is it slippery?"]},
        "retry_until_valid": {"request": "a flag", "schema": {"type": "object"}},
        "sales_insights": {"path": "sales.csv", "total": 250, "week_of": "2026-11-30T08:00:00Z",
                           "report_path": "reports/weekly.md"},
        "every_type": {"values": [1, 2, 3]},
    }[case]


@pytest.mark.slow
@pytest.mark.parametrize("case", [*TEMPLATES, "every_type"])
async def test_same_outputs_on_both_engines(cluster: Cluster, case: str) -> None:
    assert set(TEMPLATES) >= {"csv_report", "research_fanout", "retry_until_valid"}
    workspace = cluster.client.settings.workspace
    (workspace / "sales.csv").write_text("week,amount\n1,40\n2,90\n3,120\n")
    (workspace / "doc.txt").write_text("Ice melts above zero degrees.")
    engines = (cluster.embedded, cluster.client)
    for orc in (*engines, cluster.worker):
        orc.registry.add_tool(lookup_price)
        orc.register_blueprint(DOUBLE_IT)
        orc.load_blueprints(bundled_dir("blueprints"))
    target = EVERY_TYPE if case == "every_type" else case
    with json_server() as url:
        embedded, temporal = [await orc.run(target, inputs_for(case, url)) for orc in engines]
    assert embedded.status == "succeeded", embedded.error
    assert temporal.status == embedded.status, temporal.error
    assert temporal.outputs == embedded.outputs
    assert {n: (r.status, r.output) for n, r in temporal.nodes.items()} == {
        n: (r.status, r.output) for n, r in embedded.nodes.items()}
    assert temporal.cost_usd == pytest.approx(embedded.cost_usd)
    # The workers wrote the record and the journal where every server reads them.
    stored = cluster.client.store.get(temporal.run_id)
    assert stored is not None and stored.status == "succeeded" and stored.outputs == embedded.outputs
    kinds = [e["type"] for e in cluster.client.store.events(temporal.run_id)]
    assert kinds[0] == "run_started" and kinds[-1] == "run_finished"
    assert [e["seq"] for e in cluster.client.store.events(temporal.run_id)] == list(range(len(kinds)))


async def test_a_node_timeout_counts_each_attempt_alike_on_both_engines(cluster: Cluster) -> None:
    """`timeout_seconds` holds per attempt on both engines (on Temporal the activity keeps it): an attempt that
    outlives it fails as `timeout`, is retried as `retries` says, and the run fails with the same error."""
    slow = {"name": "too_slow", "nodes": [{"id": "wait", "type": "tool", "tool_name": "sleep",
                                           "tool_args": {"seconds": 5}, "timeout_seconds": 0.5, "retries": 1,
                                           "backoff_seconds": 0.1}]}
    records = [await orc.run(slow, {}) for orc in (cluster.embedded, cluster.client)]
    for record in records:
        assert record.status == "failed", record.error
        assert record.nodes["wait"].attempts == 2
        assert record.error is not None and "attempt timed out after 0.5 s" in str(record.error)
    assert records[0].error == records[1].error
