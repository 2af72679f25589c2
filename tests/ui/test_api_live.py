"""The run view's API against real server processes: clear errors for bad requests, read-only servers,
and a viewer (`ice-mcp ui`) following, live, a run that another server process is running."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import httpx2
from conftest import server_env, ui_viewer
from live import healthz_watch, live_server
from mcp_helpers import ADMIN

ADMIN_HEADERS = {"Authorization": f"Bearer {ADMIN}"}


def rpc(url: str, method: str, **params: Any) -> Any:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    return httpx2.post(f"{url}/rpc", json=body, timeout=30).json()["result"]


def test_bad_requests_get_clear_structured_errors(server: str) -> None:
    run_id = rpc(server, "workflow.run", name="progress", wait_seconds=0)["run_id"]
    with healthz_watch(server) as watch, httpx2.Client(timeout=10, headers=ADMIN_HEADERS) as http:
        cases = [
            ("GET", "/ui/api/runs?limit=lots", None, 400, "invalid_limit"),
            ("GET", "/ui/api/runs/no-such-run", None, 404, "unknown_run"),
            ("GET", "/ui/api/runs/no-such-run/events", None, 404, "unknown_run"),
            ("GET", f"/ui/api/runs/{run_id}/events?after=x", None, 400, "invalid_after"),
            ("GET", f"/ui/api/runs/{run_id}/node", None, 400, "invalid_node"),
            ("GET", f"/ui/api/runs/{run_id}/node?id={'x' * 3000}", None, 400, "invalid_node"),
            ("GET", "/ui/api/workflows/nope", None, 404, "unknown_workflow"),
            ("POST", "/ui/api/workflows/greeting/start", b"{not json", 400, "invalid_json"),
            ("POST", "/ui/api/workflows/greeting/start", b"[1, 2]", 400, "invalid_json"),
            ("POST", "/ui/api/workflows/greeting/start", b'{"inputs": {"times": 2}}', 400, "invalid_inputs"),
            ("POST", "/ui/api/workflows/greeting/start", b'{"inputs": "Ada"}', 400, "invalid_inputs"),
            ("POST", f"/ui/api/runs/{run_id}/retry", b"{}", 400, "run_not_finished"),
            ("POST", f"/ui/api/runs/{run_id}/retry", b'{"from_node": 7}', 400, "invalid_node"),
        ]
        for method, path, body, status, code in cases:
            answer = http.request(method, f"{server}{path}", content=body,
                                  headers={"Content-Type": "application/json"} if body is not None else {})
            assert answer.status_code == status, (path, answer.status_code, answer.text)
            error = answer.json()["error"]
            assert error["code"] == code and error["message"], (path, error)
            assert "Traceback" not in answer.text
        answer = http.get(f"{server}/ui/static/../../web.py")
        assert answer.status_code == 404
    watch.assert_responsive()
    done = httpx2.post(f"{server}/ui/api/runs/{run_id}/cancel", headers=ADMIN_HEADERS, json={}, timeout=10)
    assert done.status_code in (200, 409)  # cancelled, or already finished (its three steps take 2.4 s)


def test_a_read_only_server_refuses_every_change_even_with_the_admin_token(tmp_path: Path) -> None:
    from blueprints import write_blueprints

    folder = write_blueprints(tmp_path / "ui_blueprints")
    with live_server(tmp_path, "--read-only", "--blueprints", str(folder), "--tools", "ui_tools",
                     env=server_env()) as url, httpx2.Client(timeout=10, headers=ADMIN_HEADERS) as http:
        session = http.get(f"{url}/ui/api/session").json()
        assert session["read_only"] and not session["admin"]
        workflows = {w["name"]: w for w in http.get(f"{url}/ui/api/workflows").json()["workflows"]}
        assert not workflows["progress"]["can_start"]  # its tool is not annotated read-only
        refused = http.post(f"{url}/ui/api/workflows/progress/start", json={"inputs": {}})
        assert refused.status_code == 403 and refused.json()["error"]["code"] == "forbidden"
        refused = http.post(f"{url}/ui/api/runs/whatever/cancel", json={})
        assert refused.status_code == 403 and "read-only" in refused.json()["error"]["message"]


def test_the_viewer_follows_a_run_another_process_runs(server: str, workspace: Path) -> None:
    with ui_viewer(workspace) as viewer:
        run_id = rpc(server, "workflow.run", name="progress", wait_seconds=0)["run_id"]
        deadline = time.monotonic() + 5
        while httpx2.get(f"{viewer}/ui/api/runs/{run_id}").status_code == 404:  # the store has it within ms
            assert time.monotonic() < deadline
            time.sleep(0.05)
        arrivals: list[tuple[str, str, float, float]] = []
        with healthz_watch(viewer) as watch, httpx2.stream(
                "GET", f"{viewer}/ui/api/runs/{run_id}/events", timeout=30) as stream:
            for line in stream.iter_lines():
                if line.startswith("event: end"):
                    break
                if line.startswith("data: "):
                    now = time.time()
                    arrivals += [(e["type"], e.get("node_id", ""), e["ts"], now) for e in json.loads(line[6:])["events"]]
        watch.assert_responsive()
        kinds = [(kind, node) for kind, node, _, _ in arrivals]
        assert kinds[0] == ("run_started", "") and kinds[-1] == ("run_finished", "")
        assert [node for kind, node in kinds if kind == "node_succeeded"] == ["a", "b", "c"]
        live = [got - ts for kind, node, ts, got in arrivals if node == "c"]
        assert max(live) < 1.0, f"events of the last node reached the viewer {max(live):.2f} s late"
        # The viewer cancels another process's run through the store: the server running it stops it.
        other = rpc(server, "workflow.run", name="long", wait_seconds=0)["run_id"]
        deadline = time.monotonic() + 5
        while (answer := httpx2.post(f"{viewer}/ui/api/runs/{other}/cancel", headers=ADMIN_HEADERS,
                                     json={})).status_code == 404:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert answer.status_code == 200 and answer.json() == {"run_id": other, "status": "cancelled"}
        assert rpc(server, "run.status", run_id=other)["status"] == "cancelled"
