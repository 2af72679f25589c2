"""The drafting benchmark's runner and graders against the LLM mock: scripted drafts for three shipped cases (one
right, one right after a repair, one that runs but computes the wrong thing), run offline on their fixtures."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from drafts import usage
from llm_mock import Aimock, serve_aimock

from ice_mcp.cli import main
from ice_mcp.drafting.benchmark import run_drafting_benchmark
from ice_mcp.drafting.cases import load_cases

CASES = ["csv_total", "api_two_pages", "approve_then_email"]

CSV_TOTAL = '''```yaml
name: sales_total
inputs:
  type: object
  properties:
    path: {type: string, default: sales.csv}
outputs:
  total: "{{ sum.result }}"
nodes:
  - id: read
    type: tool
    tool_name: csv_reader
    tool_args: {path: "{{ inputs.path }}"}
  - id: sum
    type: code
    inputs: {rows: "{{ read.rows }}"}
    code: return round(sum(float(r['amount']) for r in inputs['rows']), 2)
```'''

# First a draft that reads an undeclared node, then the repair: a loop over the pages.
PAGES_BROKEN = '''```yaml
name: item_names
outputs:
  names: "{{ pages.results | sum(start=[]) }}"
nodes:
  - id: pages
    type: loop
    items: "{{ [1, 2] }}"
    item_var: page
    body:
      - id: get
        type: tool
        tool_name: http_request
        tool_args: {url: "https://api.example.com/items?page={{ page }}"}
    output: "{{ got.json['items'] | map(attribute='name') | list }}"
```'''
PAGES = PAGES_BROKEN.replace("{{ got.json", "{{ get.json")

# Runs, asks for approval and emails, but totals only the paid invoices: the grader must fail it.
APPROVE_WRONG = '''```yaml
name: invoice_total
outputs:
  total: "{{ total.result }}"
nodes:
  - id: read
    type: tool
    tool_name: csv_reader
    tool_args: {path: invoices.csv}
  - id: total
    type: code
    inputs: {rows: "{{ read.rows }}"}
    code: return sum(float(r['amount']) for r in inputs['rows'] if r['status'] == 'paid')
  - id: ok
    type: human
    approval: "Send the invoice total {{ total.result }} to finance?"
  - id: mail
    type: tool
    tool_name: email_send
    dependencies: [ok]
    tool_args: {to: [finance@example.com], subject: Invoice total, text: "Total: {{ total.result }}"}
```'''


@pytest.fixture(scope="module")
def bench_mock(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Aimock]:
    goals = {case.id: case.goal for case in load_cases(only=CASES)}
    fixtures = [
        {"match": {"userMessage": goals["csv_total"], "turnIndex": 0},
         "response": {"content": CSV_TOTAL, "usage": usage(2000, 150)}},
        {"match": {"userMessage": goals["api_two_pages"], "turnIndex": 0},
         "response": {"content": PAGES_BROKEN, "usage": usage(2100, 160)}},
        {"match": {"userMessage": "output reads 'got'", "turnIndex": 1},
         "response": {"content": PAGES, "usage": usage(2400, 160)}},
        {"match": {"userMessage": goals["approve_then_email"], "turnIndex": 0},
         "response": {"content": APPROVE_WRONG, "usage": usage(2200, 170)}},
    ]
    path = tmp_path_factory.mktemp("bench") / "aimock.json"
    path.write_text(json.dumps({"fixtures": fixtures}), encoding="utf-8")
    with serve_aimock(path) as mock:
        yield mock


async def test_the_runner_drafts_runs_and_grades_each_case(bench_mock: Aimock, tmp_path: Path) -> None:
    report = await run_drafting_benchmark(f"{bench_mock.url}/v1", "bench-model", cases=load_cases(only=CASES),
                                          workdir=tmp_path)
    by_id = {r.id: r for r in report.results}
    assert [r.id for r in report.results] == CASES

    assert by_id["csv_total"].passed and by_id["csv_total"].attempts == 1, by_id["csv_total"].failures
    assert by_id["csv_total"].prompt_tokens == 2000

    pages = by_id["api_two_pages"]
    assert pages.valid and pages.attempts == 2 and pages.prompt_tokens == 4500
    assert pages.passed, pages.failures

    wrong = by_id["approve_then_email"]
    assert wrong.valid and not wrong.passed
    assert wrong.failures == ["output 'total' is 420.0, want 555.75"]  # it asked, and it emailed finance
    assert (tmp_path / "approve_then_email" / "invoices.csv").is_file()

    summary = report.summary
    assert (summary["cases"], summary["valid"], summary["passed"]) == (3, 3, 2)
    assert summary["validity_rate"] == 1.0 and summary["pass_rate"] == 0.6667
    assert summary["attempts_per_valid_draft"] == 1.33
    assert summary["prompt_tokens_per_success"] == (2000 + 4500 + 2200) / 2  # every case's prompt over the passes


def test_eval_drafting_at_the_command_line(bench_mock: Aimock, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["eval", "drafting", "--base-url", f"{bench_mock.url}/v1", "--model", "bench-model",
                 "--only", "csv_total", "--only", "approve_then_email"]) == 0
    out = capsys.readouterr().out
    assert "csv_total" in out and "PASS" in out and "output 'total' is 420.0" in out
    assert "validity 2/2 (100%), pass 1/2 (50%), attempts per valid draft 1.0" in out
