"""Short run ids, as run lists show them: a unique prefix finds the run (run_status, `ice-mcp runs show`,
`/ui/api/runs/<prefix>`); an ambiguous one is a clear error that lists the candidates."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import httpx2
import pytest
from live import live_server
from mcp_helpers import ROOT, http_client, structured, subprocess_env

from ice_mcp.errors import IceError
from ice_mcp.operations.run_ids import resolve_run_id
from ice_mcp.orchestrator import Orchestrator
from ice_mcp.settings import Settings
from ice_mcp.store.records import RunRecord

TWINS = ("feed0000aaaa1111", "feed0000bbbb2222")  # two runs whose ids start alike


def keep_twins(data_dir: Path) -> None:
    """Two finished runs in the data folder's store, with ids of our choosing."""
    orc = Orchestrator(settings=Settings(data_dir=data_dir, workspace=data_dir))
    assert orc.store is not None
    for run_id in TWINS:
        orc.store.create(RunRecord(run_id=run_id, workflow="twin", inputs={}, status="succeeded",
                                   started_at=time.time(), finished_at=time.time(), duration_ms=1.0))
    orc.store.flush()


async def test_the_resolver_takes_whole_ids_unique_prefixes_and_names_the_candidates(tmp_path: Path) -> None:
    keep_twins(tmp_path)
    orc = Orchestrator(settings=Settings(data_dir=tmp_path, workspace=tmp_path))
    try:
        assert resolve_run_id(orc, TWINS[0]) == TWINS[0]
        assert resolve_run_id(orc, "feed0000a") == TWINS[0]
        with pytest.raises(IceError) as ambiguous:
            resolve_run_id(orc, "feed0000")
        assert ambiguous.value.code == "ambiguous_run_id"
        assert all(run_id in ambiguous.value.message for run_id in TWINS)
        assert ambiguous.value.details == {"prefix": "feed0000", "candidates": list(TWINS)}
        for unknown in ("feed1", "fee"):  # no such run; too short to be a prefix
            with pytest.raises(IceError) as missing:
                resolve_run_id(orc, unknown)
            assert missing.value.code == "unknown_run"
    finally:
        await orc.aclose()


def runs_show(workspace: Path, run_id: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ice_mcp", "runs", "show", run_id], capture_output=True,
                          text=True, timeout=60, check=False, cwd=ROOT, env=subprocess_env(workspace))


def test_runs_show_takes_a_short_id(tmp_path: Path) -> None:
    keep_twins(tmp_path / ".ice")  # subprocess_env's ICE_MCP_DATA_DIR
    shown = runs_show(tmp_path, "feed0000b")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["run_id"] == TWINS[1]
    ambiguous = runs_show(tmp_path, "feed0000")
    assert ambiguous.returncode != 0
    assert all(run_id in ambiguous.stderr for run_id in TWINS), ambiguous.stderr
    assert "Traceback" not in ambiguous.stderr


async def test_short_ids_over_mcp_and_the_run_views_api(tmp_path: Path) -> None:
    keep_twins(tmp_path / ".ice")
    with live_server(tmp_path, "--tools", "mcp_fixture_tools") as base:
        async with http_client(base, mode="legacy") as client:
            run_id = structured(await client.call_tool("workflow_steps", {"word": "x"}))["run_id"]
            status = structured(await client.call_tool("run_status", {"run_id": run_id[:12]}))
            ambiguous = await client.call_tool("run_status", {"run_id": "feed0000"})
        with httpx2.Client(base_url=base, timeout=30) as http:
            found = http.get(f"/ui/api/runs/{run_id[:12]}")
            events = http.get(f"/ui/api/runs/{run_id[:12]}/events")
            twins = http.get("/ui/api/runs/feed0000")
            unknown = http.get("/ui/api/runs/0123456789ab")
    assert status["run_id"] == run_id and status["status"] == "succeeded"
    assert ambiguous.is_error and structured(ambiguous)["error"]["code"] == "ambiguous_run_id"
    assert found.status_code == 200 and found.json()["run"]["run_id"] == run_id
    assert events.status_code == 200 and "run_finished" in events.text
    assert twins.status_code == 409 and twins.json()["error"]["code"] == "ambiguous_run_id"
    assert all(twin in twins.json()["error"]["message"] for twin in TWINS)
    assert unknown.status_code == 404
