"""Evaluations in the run view: the JSON API on an in-process server, and the page in a real headless Chromium:
the evaluations list, one evaluation's per-case table with the failing cases first, a case linking to its run
and the run linking back."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp_helpers import http_server, make_options

from ice_mcp import Orchestrator, Registry, Settings
from ice_mcp.evals import Evals, load_dataset, make_scorers

CLASSIFY: dict[str, Any] = {
    "name": "classify", "inputs": {"type": "object", "properties": {"n": {"type": "number"}}, "required": ["n"]},
    "outputs": {"label": "{{ big.text if big else small.text }}"},
    "nodes": [
        {"id": "check", "type": "condition", "expression": "inputs.n > 10", "true_path": ["big"],
         "false_path": ["small"]},
        {"id": "big", "type": "tool", "tool_name": "render_template", "tool_args": {"template": "big"}},
        {"id": "small", "type": "tool", "tool_name": "render_template", "tool_args": {"template": "small"}}]}
CASES = [{"id": "one", "inputs": {"n": 1}, "expected": {"label": "small"}},
         {"id": "ten", "inputs": {"n": 10}, "expected": {"label": "<b>big</b>"}},  # fails; its text is not HTML
         {"id": "twenty", "inputs": {"n": 20}, "expected": {"label": "big"}},
         {"id": "nine", "inputs": {"n": 9}, "expected": {"label": "big"}}]


@pytest.fixture
async def evaluated(tmp_path: Path) -> AsyncIterator[tuple[Orchestrator, dict[str, Any]]]:
    orc = Orchestrator(registry=Registry(), settings=Settings(data_dir=tmp_path / "data", workspace=tmp_path))
    orc.register_blueprint(CLASSIFY)
    evals = Evals(orc)
    report = await evals.run(evals.target(workflow="classify"), load_dataset(CASES, name="cases.jsonl"),
                             make_scorers([{"kind": "exact", "field": "label"}]), repetitions=2)
    yield orc, report
    await orc.aclose()


async def test_the_api_lists_evaluations_and_shows_one(evaluated: tuple[Orchestrator, dict[str, Any]]) -> None:
    orc, report = evaluated
    async with http_server(orc, make_options()) as url, httpx2.AsyncClient(timeout=10) as http:
        listed = (await http.get(f"{url}/ui/api/evals")).json()["evals"]
        assert [(e["eval_id"], e["target"], e["pass_rate"], e["cases_failed"]) for e in listed] == [
            (report["eval_id"], "classify@v1", 0.5, 2)]
        shown = (await http.get(f"{url}/ui/api/evals/{report['eval_id'][:10]}")).json()
        assert [row["id"] for row in shown["cases"]] == ["ten", "nine", "one", "twenty"]
        missing = await http.get(f"{url}/ui/api/evals/ffffffffff")
        assert missing.status_code == 404 and missing.json()["error"]["code"] == "unknown_eval"
        case_run = report["cases"][0]["runs"][0]["run_id"]
        assert (await http.get(f"{url}/ui/api/evals/{case_run}")).status_code == 404  # a run, not an evaluation
        own = await http.get(f"{url}/ui/api/runs/{report['eval_id']}")  # the evaluation's record, as a run
        assert own.status_code == 200 and own.json()["run"]["workflow"] == "eval:classify@v1"


async def test_the_evaluation_page_shows_failing_cases_first_linked_to_their_runs(
        evaluated: tuple[Orchestrator, dict[str, Any]], page: Any) -> None:
    orc, report = evaluated
    async with http_server(orc, make_options()) as url:
        await page.goto(f"{url}/ui#/evals")
        row = page.locator(f'.evals-table tr[data-eval="{report["eval_id"]}"]')
        await row.wait_for()
        assert (await row.locator(".pass-rate").inner_text()) == "50%"
        await row.click()
        await page.wait_for_selector("#cases")
        assert (await page.locator("#eval-title").inner_text()) == "classify@v1 on cases.jsonl"
        assert (await page.locator("#pass-rate").inner_text()) == "50% (4/8 runs)"
        cases = page.locator("#cases tbody tr")
        assert await cases.evaluate_all("rows => rows.map(r => [r.dataset.case, r.dataset.verdict])") == [
            ["ten", "failed"], ["nine", "failed"], ["one", "passed"], ["twenty", "passed"]]
        ten = cases.first
        assert "label: small is not <b>big</b>" in await ten.inner_text()  # shown as text
        assert await ten.locator("b").count() == 0
        assert await ten.locator("a.case-run").count() == 2  # one link per repetition
        first_run = report["cases"][0]["runs"][0]["run_id"]
        await ten.locator(f'a.case-run[data-run="{first_run}"]').click()
        await page.wait_for_selector('#run-status [data-status="succeeded"]')
        back = page.locator(f'a.trigger-link[data-eval="{report["eval_id"]}"]')
        assert "case ten #1" in await back.first.inner_text()
        await back.first.click()
        await page.wait_for_selector("#cases")
