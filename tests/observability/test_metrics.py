"""Prometheus metrics: `GET /metrics` of real servers passes `promtool check metrics` and counts each run made
exactly once (a second server following a run on the same folder, a retry's reused nodes and a run resumed by
another server are not counted again), behind the same guards as `/mcp`; bounded labels, model tokens equal to
the runs' records, a worker's journal written twice counted once."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx2
import pytest
from live import ServerProcess
from mcp_helpers import (
    GATE,
    ROOT,
    http_client,
    http_server,
    make_options,
    make_orchestrator,
    structured,
)
from prometheus_client.parser import text_string_to_metric_families

from ice_mcp import Orchestrator, Registry, Settings
from ice_mcp.errors import NodeFailure
from ice_mcp.llm import LLMConfig, LLMService
from ice_mcp.observability.metrics import ADHOC, DIRECT_TOOL, PrometheusMetrics
from ice_mcp.server.web.app import create_http_app
from ice_mcp.store.events import Event

PROMTOOL = ROOT / ".tools" / "promtool" / "usr" / "bin" / "promtool"
TOKEN = "metrics-test-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
Series = dict[tuple[str, tuple[tuple[str, str], ...]], float]

GREET = {"name": "greet", "inputs": {"type": "object", "properties": {"who": {"type": "string"}}},
         "nodes": [{"id": "hi", "type": "tool", "tool_name": "render_template",
                    "tool_args": {"template": "hello {{ inputs.who }}"}},
                   {"id": "out", "type": "tool", "tool_name": "echo", "tool_args": {"value": "{{ hi.text }}"}}]}
BROKEN = {"name": "broken", "nodes": [{"id": "ok", "type": "tool", "tool_name": "echo", "tool_args": {"value": 1}},
                                      {"id": "explode", "type": "tool", "tool_name": "boom", "dependencies": ["ok"]}]}
HELLO = {"name": "hello", "nodes": [{"id": "ask", "type": "llm", "model": "gpt-4o-mini", "prompt": "say hello"}]}
SCRATCH = {"name": "scratch_4711", "nodes": [{"id": "x", "type": "tool", "tool_name": "echo", "tool_args": {"value": 2}}]}


# -- helpers ----------------------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def promtool() -> Path:
    """Debian's promtool, unpacked by scripts/setup_promtool.sh (idempotent)."""
    if not PROMTOOL.is_file():
        subprocess.run(["bash", str(ROOT / "scripts" / "setup_promtool.sh")], check=False, capture_output=True)
    if not PROMTOOL.is_file():
        if os.environ.get("CI"):
            pytest.fail("promtool is not installed: run scripts/setup_promtool.sh")
        pytest.skip("promtool is not installed: run scripts/setup_promtool.sh")
    return PROMTOOL


def check_metrics(promtool: Path, text: str) -> None:
    """`promtool check metrics` reads the exposition on stdin; silent and 0 when it finds no problem."""
    checked = subprocess.run([str(promtool), "check", "metrics"], input=text.encode(), capture_output=True, timeout=60)
    assert (checked.returncode, checked.stdout + checked.stderr) == (0, b""), checked


def parse(text: str) -> Series:
    """Every sample as {(name, sorted labels): value}, read with prometheus_client's own parser."""
    return {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(text) for sample in family.samples}


def value(series: Series, name: str, **labels: str) -> float:
    return series.get((name, tuple(sorted(labels.items()))), 0.0)


def labelled(series: Series, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    """The samples of one name, by their labels."""
    return {labels: number for (sample, labels), number in series.items() if sample == name}


def scraped(orc: Orchestrator) -> Series:
    return parse(orc.prometheus.exposition(None)[0].decode())


def echo(value: Any = None) -> dict[str, Any]:
    """Return the value given."""
    return {"value": value}


# -- in one process: what counts, and what does not count again ----------------------------------------------------


async def test_a_retry_counts_only_the_nodes_it_runs_again(orc: Orchestrator, registry: Registry) -> None:
    failing = {"c"}

    def step(label: str) -> dict[str, Any]:
        """One step; fails while its label is in `failing`."""
        if label in failing:
            raise NodeFailure(f"{label} is broken", code="broken", retryable=False)
        return {"label": label}

    registry.add_tool(step)
    orc.register_blueprint({"name": "abc", "nodes": [
        {"id": name, "type": "tool", "tool_name": "step", "tool_args": {"label": name},
         **({"dependencies": [before]} if before else {})} for name, before in (("a", None), ("b", "a"), ("c", "b"))]})
    failed = await orc.run("abc")
    failing.clear()
    retried = await (await orc.retry(failed.run_id)).wait()
    assert (failed.status, retried.status) == ("failed", "succeeded")
    series = scraped(orc)
    assert labelled(series, "ice_runs_started_total") == {(("trigger", "call"), ("workflow", "abc")): 2}
    assert labelled(series, "ice_runs_finished_total") == {(("status", "failed"), ("workflow", "abc")): 1,
                                                           (("status", "succeeded"), ("workflow", "abc")): 1}
    # a, b and c's failure, then only c again: the retry's reused a and b did not run
    assert value(series, "ice_node_executions_total", type="tool", status="succeeded") == 3
    assert value(series, "ice_node_executions_total", type="tool", status="failed") == 1
    assert value(series, "ice_node_duration_seconds_count", type="tool") == 4
    assert value(series, "ice_run_duration_seconds_count", workflow="abc") == 2
    assert value(series, "ice_runs_active") == 0


async def test_a_run_resumed_by_another_server_is_counted_once(settings: Settings, registry: Registry) -> None:
    gate = asyncio.Event()

    async def wait() -> dict[str, Any]:
        """Waits for the test's gate."""
        await gate.wait()
        return {"waited": True}

    registry.add_tool(echo)
    registry.add_tool(wait)
    first = Orchestrator(registry=registry, settings=settings)
    first.register_blueprint({"name": "gated", "nodes": [
        {"id": "a", "type": "tool", "tool_name": "echo", "tool_args": {"value": 1}},
        {"id": "w", "type": "tool", "tool_name": "wait", "dependencies": ["a"]}]})
    handle = await first.start("gated", idempotency_key="k1")
    while getattr(handle.record.nodes.get("w"), "status", None) != "running":
        await asyncio.sleep(0.01)
    await first.aclose(suspend=True)  # a server stopping: the run stays `running` for the next one
    second = Orchestrator(registry=registry, settings=settings)
    try:
        gate.set()
        resumed = await (await second.start("gated", idempotency_key="k1")).wait()
        assert (resumed.run_id, resumed.status) == (handle.run_id, "succeeded")
        before, after = scraped(first), scraped(second)
    finally:
        await second.aclose()
    # The first started it and ran `a`; its suspension ends nothing. The second ran `w` and ended it.
    assert labelled(before, "ice_runs_started_total") == {(("trigger", "call"), ("workflow", "gated")): 1}
    assert labelled(before, "ice_runs_finished_total") == {}
    assert value(before, "ice_node_executions_total", type="tool", status="succeeded") == 1
    assert labelled(after, "ice_runs_started_total") == {}
    assert labelled(after, "ice_runs_finished_total") == {(("status", "succeeded"), ("workflow", "gated")): 1}
    assert value(after, "ice_node_executions_total", type="tool", status="succeeded") == 1
    assert value(before, "ice_runs_active") == value(after, "ice_runs_active") == 0


async def test_a_journal_written_twice_by_a_worker_counts_once(orc: Orchestrator, registry: Registry) -> None:
    """A Temporal worker counts what each journal batch it writes says; a batch written again (a local activity
    retried after it wrote) has the same numbers and counts once. Real runs' journals, fed as a worker would."""
    registry.add_tool(echo)

    def boom() -> dict[str, Any]:
        """Always fails."""
        raise NodeFailure("boom", code="boom", retryable=False)

    registry.add_tool(boom)
    for blueprint in (GREET, BROKEN):
        orc.register_blueprint(blueprint)
    records = [await orc.run("greet", {"who": "ann"}), await orc.run("greet", {"who": "bo"}), await orc.run("broken")]
    assert [r.status for r in records] == ["succeeded", "succeeded", "failed"]
    assert orc.store is not None and orc.store.flush()  # as a worker reads the store: after the server wrote it
    worker = PrometheusMetrics(orc.registry, orc.services)
    for record in records:
        events = [Event.from_dict(e) for e in orc.run_events(record.run_id)]
        middle = len(events) // 2
        worker.journaled(record.run_id, events[:middle], orc.store.get)
        worker.journaled(record.run_id, events[:middle], orc.store.get)
        worker.journaled(record.run_id, events[middle - 1:], orc.store.get)
        worker.journaled(record.run_id, events[middle:], orc.store.get)  # the run's end, written again
    live, written = scraped(orc), parse(worker.exposition(None)[0].decode())
    for name in ("ice_runs_started_total", "ice_runs_finished_total", "ice_node_executions_total",
                 "ice_run_duration_seconds_count", "ice_node_duration_seconds_count", "ice_runs_active"):
        assert labelled(written, name) == labelled(live, name), name
    assert value(written, "ice_node_executions_total", type="tool", status="succeeded") == 5


async def test_labels_stay_bounded(orc: Orchestrator, registry: Registry) -> None:
    registry.add_tool(echo)
    orc.register_blueprint({**SCRATCH, "name": "kept"})
    await orc.run("kept")
    for number in range(3):  # ad-hoc blueprints: their names are the caller's
        await orc.run({**SCRATCH, "name": f"scratch_{number}"})
    await (await orc.start_tool("echo", {"value": 3})).wait()
    await orc.run("kept", trigger={"kind": "surprise"})
    slot = datetime.fromtimestamp(datetime.now(UTC).timestamp() - 2, UTC).isoformat().replace("+00:00", "Z")
    await orc.run("kept", trigger={"kind": "schedule", "schedule_id": "s1", "slot": slot})
    await orc.run("kept", trigger={"kind": "schedule", "schedule_id": "s1", "slot": slot, "manual": True})
    text = orc.prometheus.exposition(None)[0].decode()
    series = parse(text)
    assert labelled(series, "ice_runs_started_total") == {
        (("trigger", "call"), ("workflow", "kept")): 1, (("trigger", "call"), ("workflow", ADHOC)): 3,
        (("trigger", "call"), ("workflow", DIRECT_TOOL)): 1, (("trigger", "other"), ("workflow", "kept")): 1,
        (("trigger", "schedule"), ("workflow", "kept")): 2}
    # The lag of the slot's run: at least the 2 s it was due before it started; a manual trigger has none.
    assert value(series, "ice_schedule_lag_seconds_count", workflow="kept") == 1
    assert value(series, "ice_schedule_lag_seconds_sum", workflow="kept") >= 2.0
    assert "_created" not in text and "run_id" not in text


def test_a_process_that_never_scrapes_never_imports_prometheus_client(tmp_path: Path) -> None:
    code = """
import asyncio, sys
from ice_mcp import Orchestrator, Registry, Settings
async def main():
    orc = Orchestrator(registry=Registry(), settings=Settings(persist_runs=False, workspace=sys.argv[1]))
    record = await orc.run({"name": "t", "nodes": [{"id": "r", "type": "tool", "tool_name": "render_template",
                                                    "tool_args": {"template": "x"}}]})
    before = "prometheus_client" in sys.modules
    text = orc.prometheus.exposition(None)[0].decode()
    print(record.status, before, "prometheus_client" in sys.modules, "ice_runs_finished_total{" in text)
    await orc.aclose()
asyncio.run(main())
"""
    answer = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=60,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert answer.stdout.split() == ["succeeded", "False", "True", "True"], answer.stderr


async def test_model_tokens_and_cost_equal_the_runs_records(tmp_path: Path, aimock: Any) -> None:
    registry = Registry()

    def lookup_price(sku: str) -> dict[str, Any]:
        """Price of a product by SKU."""
        return {"sku": sku, "price": 9.5}

    def double(x: int) -> int:
        """Twice x."""
        return 2 * x

    registry.add_tool(lookup_price)
    registry.add_tool(double)
    orc = Orchestrator(registry=registry, settings=Settings(data_dir=tmp_path / "data", workspace=tmp_path),
                       llm=LLMService(LLMConfig.load(env=aimock.env())))
    try:
        orc.register_blueprint({"name": "double_it", "inputs": {"type": "object", "properties": {"x": {"type": "integer"}}},
                                "outputs": {"result": "{{ d.result }}"},
                                "nodes": [{"id": "d", "type": "tool", "tool_name": "double",
                                           "tool_args": {"x": "{{ inputs.x }}"}}]})
        registry.add_agent("pricer", {"model": "gpt-4o-mini", "system": "You price things.",
                                      "tools": ["lookup_price"], "workflows": ["double_it"]})
        orc.register_blueprint(HELLO)
        records = [await orc.run("hello"), await orc.run(
            {"name": "priced", "nodes": [{"id": "helper", "type": "agent", "agent": "pricer", "input": "price report"}]})]
        assert [r.status for r in records] == ["succeeded", "succeeded"], [r.error for r in records]
        series = scraped(orc)
    finally:
        await orc.aclose()
    model = {"provider": "openai", "model": "gpt-4o-mini"}
    assert value(series, "ice_llm_tokens_total", **model, direction="input") == sum(
        r.usage.input_tokens for r in records) == 10 + 200 + 300 + 400
    assert value(series, "ice_llm_tokens_total", **model, direction="output") == sum(
        r.usage.output_tokens for r in records) == 3 + 20 + 20 + 30
    assert value(series, "ice_llm_cost_usd_total", **model) == pytest.approx(sum(r.cost_usd for r in records))
    assert sum(r.cost_usd for r in records) > 0
    assert value(series, "ice_node_executions_total", type="agent", status="succeeded") == 1
    assert value(series, "ice_node_executions_total", type="llm", status="succeeded") == 1


# -- real servers ----------------------------------------------------------------------------------------------------


def rpc(url: str, method: str, **params: Any) -> Any:
    reply = httpx2.post(f"{url}/rpc", json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params},
                        headers=AUTH, timeout=60).json()
    assert "error" not in reply, f"{method}: {reply['error']}"
    return reply["result"]


def metrics(url: str, **headers: str) -> httpx2.Response:
    return httpx2.get(f"{url}/metrics", headers={**AUTH, **headers}, timeout=30)


@pytest.fixture
def two_servers(tmp_path: Path, aimock: Any) -> Iterator[tuple[ServerProcess, ServerProcess]]:
    """Two `serve --http` on one data folder, each its own workspace, ICE_MCP_TOKEN required."""
    folder = tmp_path / "blueprints"
    folder.mkdir()
    for blueprint in (GREET, BROKEN, HELLO, GATE):
        (folder / f"{blueprint['name']}.json").write_text(json.dumps(blueprint))
    servers = []
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        servers.append(ServerProcess(tmp_path / name, "--data-dir", str(tmp_path / "data"), "--blueprints", str(folder),
                                     "--tools", "mcp_fixture_tools", env={**aimock.env(), "ICE_MCP_TOKEN": TOKEN}))
    try:
        with ThreadPoolExecutor(2) as pool:  # both start at once: half the wait
            list(pool.map(ServerProcess.start, servers))
        yield servers[0], servers[1]
    finally:
        for server in servers:
            server.stop()


async def test_metrics_count_each_run_once_across_two_servers(two_servers: tuple[ServerProcess, ServerProcess],
                                                             promtool: Path) -> None:
    a, b = two_servers
    for who in ("ann", "bo", "cy"):
        assert rpc(a.url, "workflow.run", name="greet", inputs={"who": who}, wait_seconds=30)["status"] == "succeeded"
    for _ in range(2):
        assert rpc(a.url, "workflow.run", name="broken", wait_seconds=30)["status"] == "failed"
    hello = rpc(a.url, "workflow.run", name="hello", wait_seconds=30)
    assert hello["status"] == "succeeded", hello
    async with http_client(a.url, token=TOKEN) as client:
        adhoc = structured(await client.call_tool("blueprint_run", {"blueprint": SCRATCH, "wait_seconds": 30}))
    assert adhoc["status"] == "succeeded", adhoc
    hook = rpc(a.url, "webhook.create", workflow="greet", auth="bearer")
    delivered = httpx2.post(f"{hook['url']}?wait=20", json={"who": "hook"},
                            headers={"Authorization": f"Bearer {hook['secret']}"}, timeout=60)
    refused = httpx2.post(hook["url"], json={}, headers={"Authorization": "Bearer wrong"}, timeout=60)
    assert (delivered.status_code, refused.status_code) == (200, 401), delivered.text
    # A run of A's that B follows through the journal: it waits for a person, B attaches by its key, A answers.
    waiting = rpc(a.url, "workflow.run", name="gate", inputs={"customer": "acme"}, idempotency_key="g1",
                  wait_seconds=0)
    while waiting["status"] != "input_required":
        waiting = rpc(a.url, "run.status", run_id=waiting["run_id"])
    followed = rpc(b.url, "workflow.run", name="gate", inputs={"customer": "acme"}, idempotency_key="g1",
                   wait_seconds=0)
    assert followed["run_id"] == waiting["run_id"]
    rpc(a.url, "run.respond", run_id=waiting["run_id"], node="ok", answer={"approved": True})
    assert rpc(b.url, "run.result", run_id=waiting["run_id"], wait_seconds=30)["status"] == "succeeded"
    assert rpc(b.url, "workflow.run", name="greet", inputs={"who": "dee"}, wait_seconds=30)["status"] == "succeeded"

    answers = {server: metrics(server.url) for server in (a, b)}
    assert [answer.status_code for answer in answers.values()] == [200, 200]
    assert answers[a].headers["content-type"].startswith("text/plain; version=0.0.4")
    for answer in answers.values():
        check_metrics(promtool, answer.text)
    here, there = parse(answers[a].text), parse(answers[b].text)
    assert labelled(here, "ice_runs_started_total") == {
        (("trigger", "call"), ("workflow", "greet")): 3, (("trigger", "webhook"), ("workflow", "greet")): 1,
        (("trigger", "call"), ("workflow", "broken")): 2, (("trigger", "call"), ("workflow", "hello")): 1,
        (("trigger", "call"), ("workflow", ADHOC)): 1, (("trigger", "call"), ("workflow", "gate")): 1}
    assert labelled(here, "ice_runs_finished_total") == {
        (("status", "succeeded"), ("workflow", "greet")): 4, (("status", "failed"), ("workflow", "broken")): 2,
        (("status", "succeeded"), ("workflow", "hello")): 1, (("status", "succeeded"), ("workflow", ADHOC)): 1,
        (("status", "succeeded"), ("workflow", "gate")): 1}
    # B counts its own run only: not the gate run it followed to its end.
    assert labelled(there, "ice_runs_started_total") == {(("trigger", "call"), ("workflow", "greet")): 1}
    assert labelled(there, "ice_runs_finished_total") == {(("status", "succeeded"), ("workflow", "greet")): 1}
    # Every run in the shared store, counted by exactly one of the two servers.
    kept = rpc(a.url, "run.list", limit=100)["runs"]
    assert len(kept) == 10 == sum(labelled(here, "ice_runs_started_total").values()) + sum(
        labelled(there, "ice_runs_started_total").values())
    # Nodes: greet 2 x 4, broken's ok x 2, scratch 1, gate's ship 1 (tools); explode x 2 failed; ask; ok (human).
    assert value(here, "ice_node_executions_total", type="tool", status="succeeded") == 12
    assert value(here, "ice_node_executions_total", type="tool", status="failed") == 2
    assert value(here, "ice_node_executions_total", type="llm", status="succeeded") == 1
    assert value(here, "ice_node_executions_total", type="human", status="succeeded") == 1
    assert value(there, "ice_node_executions_total", type="tool", status="succeeded") == 2
    assert labelled(there, "ice_node_executions_total").keys() == {(("status", "failed"), ("type", "tool")),
                                                                   (("status", "succeeded"), ("type", "tool"))}
    tokens = {"provider": "openai", "model": "gpt-4o-mini"}
    assert (value(here, "ice_llm_tokens_total", **tokens, direction="input"),
            value(here, "ice_llm_tokens_total", **tokens, direction="output")) == (10, 3)
    assert value(here, "ice_llm_cost_usd_total", **tokens) == pytest.approx(hello["cost_usd"])
    assert labelled(here, "ice_hook_deliveries_total") == {(("code", "200"),): 1, (("code", "401"),): 1}
    assert value(here, "ice_runs_active") == value(there, "ice_runs_active") == 0

    # The same guards as /mcp: the token, then the Host and Origin allow-list.
    assert httpx2.get(f"{a.url}/metrics", timeout=30).status_code == 401
    assert httpx2.get(f"{a.url}/metrics", headers={"Authorization": "Bearer nope"}, timeout=30).status_code == 401
    assert metrics(a.url, Host="evil.example:80").status_code == 421
    assert metrics(a.url, Origin="http://evil.example").status_code == 403
    openmetrics = metrics(a.url, Accept="application/openmetrics-text; version=1.0.0")
    assert openmetrics.headers["content-type"].startswith("application/openmetrics-text")
    assert openmetrics.text.endswith("# EOF\n") and "_created" not in openmetrics.text


async def test_without_a_token_the_host_check_still_holds(tmp_path: Path) -> None:
    orc = make_orchestrator(tmp_path)
    try:
        async with http_server(orc, make_options()) as url, httpx2.AsyncClient(timeout=30) as http:
            assert (await http.get(f"{url}/metrics")).status_code == 200
            assert (await http.get(f"{url}/metrics", headers={"Host": "evil.example"})).status_code == 421
            assert (await http.get(f"{url}/metrics", headers={"Origin": "https://evil.example"})).status_code == 403
    finally:
        await orc.aclose()


async def test_with_oauth_metrics_need_a_token_with_the_admin_scope(tmp_path: Path) -> None:
    """Every user's runs are in /metrics: an ice:read or ice:run token is not enough, an admin's is."""
    sys.path.append(str(ROOT / "tests" / "auth"))  # its helpers import by bare name, as its conftest arranges
    from authserver import AuthServer, serve_app

    from ice_mcp.server.auth.resource_server import OAuthConfig

    orc = Orchestrator(registry=Registry(), settings=Settings(data_dir=tmp_path / "data", workspace=tmp_path))

    def app(base: str) -> Any:
        options = make_options()
        options.oauth = OAuthConfig(resource=f"{base}/mcp", issuer=auth.issuer)
        auth.resource = f"{base}/mcp"
        return create_http_app(orc, options, port=int(base.rsplit(":", 1)[1]))

    try:
        async with AuthServer() as auth, serve_app(app, lifespan="on") as base, httpx2.AsyncClient(timeout=30) as http:
            missing = await http.get(f"{base}/metrics")
            reader = await http.get(f"{base}/metrics", headers={
                "Authorization": f"Bearer {auth.token(scopes=('ice:read', 'ice:run'))}"})
            admin = await http.get(f"{base}/metrics", headers={
                "Authorization": f"Bearer {auth.token(scopes=('ice:read', 'ice:run', 'ice:admin'))}"})
    finally:
        await orc.aclose()
    assert missing.status_code == 401 and missing.headers["www-authenticate"].startswith("Bearer ")
    assert reader.status_code == 403 and 'scope="ice:admin' in reader.headers["www-authenticate"]
    assert admin.status_code == 200 and "ice_runs_started_total" in admin.text
