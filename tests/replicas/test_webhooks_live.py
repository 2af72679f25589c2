"""Webhooks across real processes: three `ice-mcp serve --http` on one Redis get the same signed delivery ten
times at once (and again later): one run, one run id in every answer; refusals from a real server."""

from __future__ import annotations

import itertools
import json
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

import httpx2
import pytest
from live import ServerProcess, folder_servers
from standardwebhooks import Webhook


@pytest.fixture(params=["sqlite", "postgresql"])
def folder_state(request: pytest.FixtureRequest) -> str | None:
    """Where the servers of a SIGKILL scenario keep their state: one data folder (SQLite), or one PostgreSQL."""
    return None if request.param == "sqlite" else str(request.getfixturevalue("postgres_url"))


def test_one_delivery_sent_ten_times_at_once_to_three_servers_starts_one_run(tmp_path: Path, shared_url: str) -> None:
    marks = tmp_path / "marks.txt"
    marks.touch()
    folder = tmp_path / "blueprints"
    folder.mkdir()
    (folder / "tick.json").write_text(json.dumps({
        "name": "tick", "inputs": {"type": "object", "properties": {"n": {"type": "integer"}}},
        "nodes": [{"id": "mark", "type": "tool", "tool_name": "mark",
                   "tool_args": {"label": "{{ trigger.delivery_id }}"}}]}))
    servers = []
    for number in range(3):
        workspace = tmp_path / f"server{number}"
        workspace.mkdir()
        servers.append(ServerProcess(workspace, "--state", shared_url, "--tools", "durable_tools",
                                     "--blueprints", str(folder), env={"ICE_TEST_MARKS": str(marks)}))
    try:
        for server in servers:
            server.start()
        hook = servers[0].rpc("webhook.create", workflow="tick", id="live")
        assert hook["url"] == f"{servers[0].url}/hooks/live"
        body = json.dumps({"n": 1}).encode()
        delivery = f"msg_{uuid.uuid4().hex}"
        moment = datetime.now(UTC)
        headers = {"webhook-id": delivery, "webhook-timestamp": str(int(moment.timestamp())),
                   "webhook-signature": Webhook(hook["secret"]).sign(delivery, moment, body.decode()),
                   "content-type": "application/json"}

        def send(number: int) -> httpx2.Response:
            return httpx2.post(f"{servers[number % 3].url}/hooks/live", content=body, headers=headers, timeout=30)

        with ThreadPoolExecutor(10) as pool:
            answers = list(pool.map(send, range(10)))
        assert [a.status_code for a in answers] == [202] * 10, [a.text for a in answers]
        run_ids = {a.json()["run_id"] for a in answers}
        assert len(run_ids) == 1
        (run_id,) = run_ids
        deadline = time.monotonic() + 20
        while servers[1].rpc("run.status", run_id=run_id)["status"] != "succeeded":
            assert time.monotonic() < deadline
            time.sleep(0.1)
        later = httpx2.post(f"{servers[2].url}/hooks/live?wait=5", content=body, headers=headers, timeout=30)
        assert later.status_code == 200 and later.json()["run_id"] == run_id  # later, elsewhere: the same run
        assert [line.split()[0] for line in marks.read_text().splitlines()] == [delivery]  # its node ran once

        flipped = bytes([body[0] ^ 1]) + body[1:]
        assert httpx2.post(f"{servers[1].url}/hooks/live", content=flipped, headers=headers).status_code == 401
        big = b'{"n": "' + b"x" * (2 * 1024 * 1024) + b'"}'
        too_big = httpx2.post(f"{servers[1].url}/hooks/live", content=big, headers=headers, timeout=30)
        assert too_big.status_code == 413
        assert len(servers[0].rpc("run.list", workflow="tick")["runs"]) == 1
    finally:
        for server in servers:
            server.stop()


def test_a_notification_is_delivered_though_its_server_is_sigkilled_between_attempts(tmp_path: Path,
                                                                                     folder_state: str | None) -> None:
    """Attempt 1 (a 500) from server A, SIGKILLed right after; server B on the same data folder sends attempt 2."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    from threading import Thread

    received: list[tuple[str, int]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("content-length", 0)))
            status = 500 if not received else 200
            received.append((self.headers["webhook-id"], status))
            self.send_response(status)
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    sink = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    Thread(target=sink.serve_forever, daemon=True).start()
    tick = {"name": "tick", "nodes": [
        {"id": "t", "type": "tool", "tool_name": "render_template", "tool_args": {"template": "tick"}}]}
    servers = folder_servers(tmp_path, [tick], env={"ICE_MCP_ALLOW_NET": "127.0.0.1",
                                                    "ICE_MCP_NOTIFY_BACKOFF": "3,3,3"}, state=folder_state)
    first, second = servers
    try:
        first.start()
        target = first.rpc("notify.set", workflow="tick", url=f"http://127.0.0.1:{sink.server_address[1]}/in",
                           on=["succeeded"])
        hook = first.rpc("webhook.create", workflow="tick", auth="bearer")
        started = httpx2.post(hook["url"] + "?wait=10", json={}, headers={"authorization": f"Bearer {hook['secret']}"})
        assert started.status_code == 200
        deadline = time.monotonic() + 20
        while not first.rpc("notify.history", id=target["id"])["deliveries"][0]["attempts"]:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        first.kill()  # SIGKILL, between attempt 1 and its retry 3 s later
        second.start()
        while len(received) < 2:
            assert time.monotonic() < deadline + 20
            time.sleep(0.1)
        [delivery] = second.rpc("notify.history", id=target["id"])["deliveries"]
    finally:
        for server in servers:
            server.stop()
        sink.shutdown()
    run_id = started.json()["run_id"]
    assert received == [(f"evt_{run_id}_succeeded", 500), (f"evt_{run_id}_succeeded", 200)]
    assert delivery["state"] == "delivered" and [a["status"] for a in delivery["attempts"]] == [500, 200]
    assert len({a["replica"] for a in delivery["attempts"]}) == 2  # one attempt from each server


def test_runs_per_minute_holds_over_three_servers_and_three_entry_points(tmp_path: Path, shared_url: str) -> None:
    """runs_per_minute 2; ten starts in about a second: MCP tools/call, a webhook and a schedule trigger, spread
    over three servers on one Redis: exactly two runs start, eight are turned away as rate_limited."""
    from ice_mcp_dev.cluster import stateless_tool_call

    folder = tmp_path / "blueprints"
    folder.mkdir()
    (folder / "capped.json").write_text(json.dumps({
        "name": "capped", "limits": {"runs_per_minute": 2},
        "nodes": [{"id": "t", "type": "tool", "tool_name": "render_template", "tool_args": {"template": "x"}}]}))
    servers = []
    for number in range(3):
        workspace = tmp_path / f"server{number}"
        workspace.mkdir()
        servers.append(ServerProcess(workspace, "--state", shared_url, "--blueprints", str(folder)))
    try:
        for server in servers:
            server.start()
        hook = servers[0].rpc("webhook.create", workflow="capped", auth="bearer")
        servers[0].rpc("schedule.create", workflow="capped", id="yearly", spec={"cron": "0 0 1 1 *"})

        def start(number: int) -> str:
            server = servers[number % 3]
            way = number % 3
            if way == 0:  # an MCP client
                body, headers = stateless_tool_call("workflow_capped", {})
                answer = httpx2.post(f"{server.url}/mcp", json=body, headers=headers, timeout=30)
                text = answer.text
                return "started" if '"run_id"' in text and "rate_limited" not in text else (
                    "rate_limited" if "rate_limited" in text else text)
            if way == 1:  # a webhook
                answer = httpx2.post(f"{server.url}/hooks/{hook['id']}", json={}, timeout=30,
                                     headers={"authorization": f"Bearer {hook['secret']}"})
                return {202: "started", 429: "rate_limited"}.get(answer.status_code, answer.text)
            reply = httpx2.post(f"{server.url}/rpc", timeout=30, json={  # a schedule's trigger, over /rpc
                "jsonrpc": "2.0", "id": 1, "method": "schedule.trigger", "params": {"id": "yearly"}}).json()
            if "result" in reply:
                return "started"
            return "rate_limited" if reply["error"].get("data", {}).get("code") == "rate_limited" else str(reply)

        with ThreadPoolExecutor(10) as pool:
            outcomes = list(pool.map(start, range(10)))
        assert sorted(outcomes) == ["rate_limited"] * 8 + ["started"] * 2, outcomes
        runs = servers[1].rpc("run.list", workflow="capped")["runs"]
        assert len(runs) == 2
    finally:
        for server in servers:
            server.stop()


def test_max_concurrent_runs_holds_while_its_holder_is_sigkilled(tmp_path: Path,
                                                                 folder_state: str | None) -> None:
    """max_concurrent_runs 1: the one run's server is SIGKILLed; the other server turns new runs away while
    the run is orphaned, then while it resumes there, and admits one only once the run has ended."""
    single = {"name": "single", "limits": {"max_concurrent_runs": 1},
              "nodes": [{"id": "s", "type": "tool", "tool_name": "sleep", "tool_args": {"seconds": 4}}]}
    servers = folder_servers(tmp_path, [single], env={"ICE_MCP_LEASE_SECONDS": "2"}, state=folder_state)
    holder, other = servers
    try:
        for server in servers:
            server.start()
        hook = holder.rpc("webhook.create", workflow="single", auth="bearer")
        auth = {"authorization": f"Bearer {hook['secret']}"}

        def start(server: ServerProcess) -> httpx2.Response:
            return httpx2.post(f"{server.url}/hooks/{hook['id']}", json={}, headers=auth, timeout=30)

        first = start(holder)
        assert first.status_code == 202
        run_id = first.json()["run_id"]
        assert start(other).status_code == 429
        holder.kill()  # SIGKILL: its run is orphaned, then taken over by the other server
        tries: list[tuple[int, str]] = []
        deadline = time.monotonic() + 40
        while True:
            status = other.rpc("run.status", run_id=run_id)["status"]
            answer = start(other)
            tries.append((answer.status_code, status))
            if answer.status_code == 202:
                break
            assert answer.status_code == 429 and time.monotonic() < deadline, tries
            time.sleep(0.3)
        final = other.rpc("run.status", run_id=run_id)
    finally:
        for server in servers:
            server.stop()
    assert final["status"] == "succeeded"  # resumed on the other server and finished there
    assert len(tries) > 3 and all(code == 429 for code, _ in tries[:-1])
    assert all(status == "running" for _, status in tries[:-1])  # turned away exactly while the run ran


def test_queued_runs_start_in_order_one_at_a_time_though_a_server_holding_some_is_sigkilled(tmp_path: Path,
                                                                                            folder_state: str | None) -> None:
    """max_concurrent_runs 1 with on_limit queue: six deliveries over three servers on one data folder are
    all accepted (`queued` after the first); the server holding two of the queued runs is SIGKILLed; every run
    still runs, one at a time, in the order the deliveries came."""
    lined = {"name": "lined", "limits": {"max_concurrent_runs": 1, "on_limit": "queue"},
             "nodes": [{"id": "s", "type": "tool", "tool_name": "sleep", "tool_args": {"seconds": 1}}]}
    servers = folder_servers(tmp_path, [lined], names=("a", "b", "c"), env={"ICE_MCP_LEASE_SECONDS": "2"},
                             state=folder_state)
    try:
        for server in servers:
            server.start()
        hook = servers[0].rpc("webhook.create", workflow="lined", auth="bearer")
        answers = [httpx2.post(f"{servers[n % 3].url}/hooks/{hook['id']}", json={}, timeout=30,
                               headers={"authorization": f"Bearer {hook['secret']}"}) for n in range(6)]
        assert [a.status_code for a in answers] == [202] * 6
        assert [a.json()["status"] for a in answers[1:]] == ["queued"] * 5
        run_ids = [a.json()["run_id"] for a in answers]
        servers[1].kill()  # SIGKILL: it holds runs 1 and 4, queued; a live server takes them over
        survivor = servers[0]
        deadline = time.monotonic() + 60
        while True:
            records = [survivor.rpc("run.status", run_id=run_id) for run_id in run_ids]
            if all(r["status"] == "succeeded" for r in records):
                break
            assert time.monotonic() < deadline and not any(r["status"] == "failed" for r in records), records
            time.sleep(0.5)
    finally:
        for server in servers:
            server.stop()
    spans = [(datetime.fromisoformat(r["started_at"]), datetime.fromisoformat(r["finished_at"])) for r in records]
    assert spans == sorted(spans), spans  # started in the order the deliveries came
    assert all(ended <= begun for (_, ended), (begun, _) in itertools.pairwise(spans)), spans  # one at a time
