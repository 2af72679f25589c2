"""Evaluations end to end on a real blueprint (condition and tool nodes): over MCP (the official client, in
memory), /rpc and the command line; two versions compared; bad datasets and scorers as tool errors."""

from __future__ import annotations

import copy
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp import Client
from mcp_helpers import ROOT, make_options, structured

from ice_mcp.cli import main
from ice_mcp.orchestrator import Orchestrator
from ice_mcp.server import build_server
from ice_mcp.server.web.rpc import handle_rpc, rpc_methods
from ice_mcp.settings import Settings
from ice_mcp.tools.registry import Registry

CLASSIFY: dict[str, Any] = {
    "name": "classify", "description": "Says whether n is big (over 10) or small.",
    "inputs": {"type": "object", "properties": {"n": {"type": "number"}}, "required": ["n"]},
    "outputs": {"label": "{{ big.text if big else small.text }}", "n": "{{ inputs.n }}"},
    "nodes": [
        {"id": "check", "type": "condition", "expression": "inputs.n > 10", "true_path": ["big"],
         "false_path": ["small"]},
        {"id": "big", "type": "tool", "tool_name": "render_template", "tool_args": {"template": "big"}},
        {"id": "small", "type": "tool", "tool_name": "render_template", "tool_args": {"template": "small"}},
    ]}
# Case "ten" expects the wrong label (10 is not over 10) and "word" is not a number: two failing cases.
DATASET = "\n".join(json.dumps(case) for case in [
    {"id": "one", "inputs": {"n": 1}, "expected": {"label": "small"}},
    {"id": "twenty", "inputs": {"n": 20}, "expected": {"label": "big"}},
    {"id": "seven", "inputs": {"n": 7}, "expected": {"label": "small"}},
    {"id": "ten", "inputs": {"n": 10}, "expected": {"label": "big"}},
    {"id": "word", "inputs": {"n": "many"}, "expected": {"label": "big"}},
])
SCORERS = [{"kind": "exact", "field": "label"}, {"kind": "regex", "field": "label", "pattern": "^(big|small)$"}]


def version_2() -> dict[str, Any]:
    """classify with the line at 5: `seven` now says big (pass→fail), `ten` too (fail→pass)."""
    changed = copy.deepcopy(CLASSIFY)
    changed["nodes"][0]["expression"] = "inputs.n > 5"
    return changed


@pytest.fixture
async def orc(tmp_path: Path) -> AsyncIterator[Orchestrator]:
    orchestrator = Orchestrator(registry=Registry(), settings=Settings(data_dir=tmp_path / "data", workspace=tmp_path))
    orchestrator.register_blueprint(CLASSIFY)  # version 1 in the run store
    yield orchestrator
    await orchestrator.aclose()


def check_report(report: dict[str, Any], repetitions: int) -> None:
    summary = report["summary"]
    assert report["status"] == "failed" and report["repetitions"] == repetitions
    assert [row["id"] for row in report["cases"]] == ["ten", "word", "one", "twenty", "seven"]  # failing first
    assert [row["verdict"] for row in report["cases"]] == ["failed", "failed", "passed", "passed", "passed"]
    assert summary["cases"] == 5 and summary["attempts"] == 5 * repetitions
    assert summary["passed_attempts"] == 3 * repetitions and summary["pass_rate"] == 0.6
    assert summary["pass_at_k"] == {str(k): 0.6 for k in range(1, repetitions + 1)}  # each case all or nothing
    assert summary["pass_hat_k"] == summary["pass_at_k"] and summary["runs_not_succeeded"] == repetitions
    assert summary["latency_ms"]["p50"] > 0 and summary["latency_ms"]["p95"] >= summary["latency_ms"]["p50"]
    assert summary["cost_usd"]["total"] == 0.0
    ten, word = report["cases"][0], report["cases"][1]
    assert ten["reason"] == "exact:label: label: small is not big" and ten["passes"] == 0
    assert [s["passed"] for s in ten["runs"][0]["scores"]] == [False, True]
    assert word["runs"][0]["status"] == "not_started" and word["runs"][0]["run_id"] is None
    assert word["reason"].startswith("run not_started: n:")


async def test_eval_run_over_mcp_runs_each_case_as_a_run_and_keeps_the_evaluation(orc: Orchestrator) -> None:
    async with Client(build_server(orc, make_options(wait_seconds=60))) as client:
        listed = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert {"eval_run", "eval_compare", "eval_show", "eval_list"} <= set(listed)
        assert listed["eval_show"].annotations.read_only_hint is True  # type: ignore[union-attr]
        result = await client.call_tool("eval_run", {"workflow": "classify", "dataset": DATASET,
                                                     "scorers": SCORERS, "repetitions": 2})
        assert result.is_error is not True
        report = structured(result)
        check_report(report, 2)
        assert report["target"] == {"workflow": "classify", "version": 1, "label": "classify@v1"}
        run_id = report["cases"][0]["runs"][1]["run_id"]
        case_run = structured(await client.call_tool("run_status", {"run_id": run_id}))
        assert case_run["workflow"] == "classify" and case_run["outputs"] == {"label": "small", "n": 10}
        assert case_run["trigger"] == {"kind": "eval_case", "eval_id": report["eval_id"], "case": "ten",
                                       "repetition": 2}
        shown = structured(await client.call_tool("eval_show", {"eval_id": report["eval_id"][:8]}))
        assert {k: v for k, v in shown.items() if k != "duration_ms"} == {
            k: v for k, v in report.items() if k != "duration_ms"}
        kept = structured(await client.call_tool("run_list", {"trigger": "eval"}))["runs"]
        assert [(r["run_id"], r["workflow"], r["status"]) for r in kept] == [
            (report["eval_id"], "eval:classify@v1", "failed")]
        assert kept[0]["error"]["code"] == "cases_failed"
        evals = structured(await client.call_tool("eval_list", {}))["evals"]
        assert [(e["eval_id"], e["pass_rate"], e["cases_failed"]) for e in evals] == [(report["eval_id"], 0.6, 2)]


@pytest.mark.parametrize(("arguments", "code", "words"), [
    ({"dataset": '{"inputs": {"n": 1}}\n{"inputs": 2}'}, "invalid_dataset", "line 2: `inputs` must be a JSON object"),
    ({"dataset": [{"inputs": {}}], "scorers": [{"kind": "number", "tolerance": "x"}]}, "invalid_arguments",
     "tolerance"),  # the input schema says number
    ({"dataset": [{"inputs": {}}], "scorers": [{"kind": "json_schema"}]}, "invalid_scorer", "schema: Field required"),
    ({"dataset": [{"inputs": {}}], "scorers": [{"kind": "regex", "pattern": "(?=x)"}]}, "invalid_scorer", "RE2"),
    ({"workflow": "clasify", "dataset": [{"inputs": {}}]}, "unknown_workflow", "classify"),
    ({"workflow": "classify", "version": 9, "dataset": [{"inputs": {}}]}, "unknown_version", "kept: v1"),
])
async def test_bad_evaluations_are_tool_errors_and_nothing_runs(orc: Orchestrator, arguments: dict[str, Any],
                                                                code: str, words: str) -> None:
    arguments = {"workflow": "classify", **arguments}
    async with Client(build_server(orc, make_options())) as client:
        result = await client.call_tool("eval_run", arguments)
        assert result.is_error is True
        assert structured(result)["error"]["code"] == code
        text = " ".join(c.text for c in result.content if isinstance(c, types.TextContent))
        assert words in text and "Traceback" not in text
    assert orc.list_runs() == []


async def test_eval_compare_of_two_versions_names_the_case_that_changed(orc: Orchestrator) -> None:
    orc.register_blueprint(version_2())  # version 2; the store keeps both
    methods = rpc_methods(orc, build_server(orc, make_options()).ice_calls)

    async def call(method: str, **params: Any) -> Any:
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).encode()
        answer = await handle_rpc(body, methods)
        assert answer is not None and "error" not in answer, answer
        return answer["result"]

    compared = await call("eval.compare", baseline={"workflow": "classify", "version": 1},
                          candidate={"workflow": "classify", "version": 2}, dataset=DATASET, scorers=SCORERS)
    assert compared["pass_to_fail"] == ["seven"] and compared["fail_to_pass"] == ["ten"]
    assert compared["verdict"] == "mixed" and compared["pass_rate_delta"] == 0.0 and compared["same_dataset"]
    assert compared["baseline"]["target"] == "classify@v1" and compared["candidate"]["target"] == "classify@v2"
    assert compared["unchanged"] == 3
    seven, ten = compared["changed"]  # regressions first
    assert ten["id"] == "ten" and ten["change"] == "fail_to_pass" and ten["candidate"]["reason"] is None
    assert seven["baseline"]["verdict"] == "passed" and seven["candidate"]["verdict"] == "failed"
    assert seven["candidate"]["reason"] == "exact:label: label: big is not small"
    assert orc.get_run(seven["candidate"]["run_id"]).workflow_version == 2  # the run ran version 2
    # The same two evaluations, kept: compared again by id, nothing runs.
    evals = (await call("eval.list"))["evals"]
    assert [e["target"] for e in evals] == ["classify@v2", "classify@v1"]
    runs_before = len(orc.list_runs(limit=1000))
    again = await call("eval.compare", baseline={"eval_id": evals[1]["eval_id"]},
                       candidate={"eval_id": evals[0]["eval_id"]})
    assert again["pass_to_fail"] == ["seven"] and len(orc.list_runs(limit=1000)) == runs_before
    assert (await call("eval.show", eval_id=evals[0]["eval_id"]))["target"]["label"] == "classify@v2"


def test_the_command_line_prints_failing_cases_first_and_exits_1(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    folder, dataset = tmp_path / "bp", tmp_path / "cases.jsonl"
    folder.mkdir()
    (folder / "classify.json").write_text(json.dumps(CLASSIFY))
    dataset.write_text(DATASET)
    common = ["--data-dir", str(tmp_path / "data"), "--workspace", str(tmp_path / "ws"), "--blueprints", str(folder)]
    assert main(["eval", "classify", "--dataset", str(dataset), "--scorer", "exact:label", *common]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("eval ") and out[0].endswith("classify on cases.jsonl (5 cases x 1)  FAILED")
    assert out[1] == "  pass rate 60% (3/5 runs); cases passed 3, failed 2, flaky 0"
    assert out[2] == "  pass@1 60%  pass^1 60%"
    rows = [line.split()[:3] for line in out[5:]]
    assert rows == [["FAIL", "ten", "0/1"], ["FAIL", "word", "0/1"], ["PASS", "one", "1/1"],
                    ["PASS", "twenty", "1/1"], ["PASS", "seven", "1/1"]]
    assert out[5].endswith("exact:label: label: small is not big")
    assert main(["evals", "list", *common]) == 0
    (kept,) = json.loads(capsys.readouterr().out)["evals"]
    assert kept["target"] == "classify" and kept["pass_rate"] == 0.6
    assert main(["evals", "show", kept["eval_id"], *common]) == 0
    assert json.loads(capsys.readouterr().out)["cases"][0]["id"] == "ten"
    (tmp_path / "bad.csv").write_text("inputs.n,expect.label\n1,small\n")
    assert main(["eval", "classify", "--dataset", str(tmp_path / "bad.csv"), *common]) == 1
    assert "error [invalid_dataset]: dataset bad.csv: line 1: column 'expect.label'" in capsys.readouterr().err


@pytest.mark.slow  # eight runs of a code node in the WebAssembly sandbox
def test_the_readme_example_passes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    common = ["--data-dir", str(tmp_path / "data"), "--workspace", str(tmp_path / "ws")]
    assert main(["eval", "csv_report", "--dataset", str(ROOT / "evals" / "examples" / "csv_report.jsonl"),
                 "--scorer", "number:total:0.01", "--scorer", "number:rows", "--scorer", "contains:verdict",
                 "--repetitions", "2", *common]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].endswith("csv_report on csv_report.jsonl (4 cases x 2)  SUCCEEDED")
    assert out[2] == "  pass@1 100%  pass@2 100%  pass^1 100%  pass^2 100%"
    assert [line.split()[:3] for line in out[5:]] == [
        ["PASS", "default-threshold", "2/2"], ["PASS", "high-threshold", "2/2"], ["PASS", "just-below", "2/2"],
        ["PASS", "exactly-at", "2/2"]]
