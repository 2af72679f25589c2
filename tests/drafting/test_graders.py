"""The graders on hand-written blueprints for shipped cases (no model): each runs offline on its case's fixture
(pinned HTTP answers, an outbox, human answers, workspace files) and passes its checks; a wrong one fails them."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from ice_mcp import Orchestrator, Settings
from ice_mcp.drafting.cases import load_cases
from ice_mcp.drafting.grading import Effects, check, pinned_registry, run_graded, write_files

REFS = {
"retry_flaky_report": """
name: r
outputs: {rows: "{{ get.json.rows }}"}
nodes:
  - {id: get, type: tool, tool_name: http_request, tool_args: {url: "https://api.example.com/report"}, retries: 4, backoff_seconds: 0.01}
""",
"retry_rate_limited_post": """
name: r
outputs: {status: "{{ post.status }}"}
nodes:
  - {id: post, type: tool, tool_name: http_request, tool_args: {url: "https://hooks.example.com/notify", method: POST, json_body: {event: deploy}}, retries: 3, backoff_seconds: 0.01}
""",
"approve_rejected_sends_nothing": """
name: r
nodes:
  - {id: ok, type: human, approval: "Send?"}
  - {id: mail, type: tool, tool_name: email_send, dependencies: [ok], tool_args: {to: [board@example.com], subject: Q3 numbers, text: "Revenue: 1.2M"}}
""",
"weekly_overdue_reminders": """
name: r
outputs: {sent: "{{ each.count }}"}
nodes:
  - {id: read, type: tool, tool_name: csv_reader, tool_args: {path: invoices.csv}}
  - id: each
    type: loop
    items: "{{ read.rows | selectattr('status', 'equalto', 'overdue') | list }}"
    item_var: row
    body:
      - {id: m, type: tool, tool_name: email_send, tool_args: {to: ["{{ row.email }}"], subject: Payment reminder, text: "Invoice {{ row.invoice }} is overdue"}}
""",
"temperature_alert": """
name: r
outputs: {hot: "{{ hot.result }}"}
nodes:
  - {id: read, type: tool, tool_name: csv_reader, tool_args: {path: temps.csv}}
  - {id: hot, type: code, inputs: {rows: "{{ read.rows }}"}, code: "return [r['city'] for r in inputs['rows'] if float(r['temp_c']) > 30]"}
  - {id: any, type: condition, expression: "hot.result | length > 0", true_path: [mail]}
  - {id: mail, type: tool, tool_name: email_send, tool_args: {to: [alerts@example.com], subject: Heat alert, text: "Hot: {{ hot.result | join(', ') }}"}}
""",
"json_names_sorted": """
name: r
outputs: {names: "{{ pick.result }}"}
nodes:
  - {id: read, type: tool, tool_name: file_read, tool_args: {path: people.json}}
  - {id: pick, type: code, inputs: {text: "{{ read.text }}"}, code: "import json\\nreturn sorted(p['name'] for p in json.loads(inputs['text']) if p['age'] >= 30)"}
""",
"fanout_cheapest": """
name: r
outputs: {cheapest: "{{ best.result.shop }}", price: "{{ best.result.price }}"}
nodes:
  - id: ask
    type: loop
    items: "{{ [1, 2, 3] }}"
    concurrency: 3
    body:
      - {id: g, type: tool, tool_name: http_request, tool_args: {url: "https://shop{{ item }}.example.com/price/A-7"}}
    output: "{{ g.json }}"
  - {id: best, type: code, inputs: {offers: "{{ ask.results }}"}, code: "return min(inputs['offers'], key=lambda o: o['price'])"}
""",
"merge_notes": """
name: r
outputs: {text: "{{ a.text ~ b.text }}"}
nodes:
  - {id: a, type: tool, tool_name: file_read, tool_args: {path: notes/a.txt}}
  - {id: b, type: tool, tool_name: file_read, tool_args: {path: notes/b.txt}}
  - {id: w, type: tool, tool_name: file_write, tool_args: {path: merged.txt, text: "{{ a.text ~ b.text }}"}}
""",
}


async def _grade(case_id: str, text: str, tmp_path: Path) -> tuple[str, list[str], Effects]:
    case = next(c for c in load_cases(only=[case_id]))
    workspace = tmp_path / case_id
    write_files(case, workspace)
    effects = Effects()
    orc = Orchestrator(registry=pinned_registry(case, effects),
                       settings=Settings(workspace=workspace, data_dir=tmp_path / "data", persist_runs=False))
    try:
        blueprint = yaml.safe_load(text)
        assert orc.validate(blueprint).ok
        record = await run_graded(orc, blueprint, case, effects)
        return record.status, check(record, effects, case.checks, workspace), effects
    finally:
        await orc.aclose()


@pytest.mark.parametrize("case_id", sorted(REFS))
async def test_a_right_blueprint_passes(case_id: str, tmp_path: Path) -> None:
    status, failures, _ = await _grade(case_id, REFS[case_id], tmp_path)
    assert failures == [], (status, failures)


async def test_the_pinned_tools_record_what_a_run_did(tmp_path: Path) -> None:
    _, _, effects = await _grade("weekly_overdue_reminders", REFS["weekly_overdue_reminders"], tmp_path)
    assert sorted(m["to"][0] for m in effects.emails) == ["bob@example.com", "eve@example.com"]
    _, _, flaky = await _grade("retry_flaky_report", REFS["retry_flaky_report"], tmp_path)
    assert flaky.http_calls == ["GET https://api.example.com/report"] * 3  # two 503s, then the answer


async def test_wrong_blueprints_fail_their_checks(tmp_path: Path) -> None:
    no_retries = REFS["retry_flaky_report"].replace("retries: 4", "retries: 0")
    status, failures, _ = await _grade("retry_flaky_report", no_retries, tmp_path)
    assert status == "failed" and failures[0].startswith("status failed (want succeeded)")
    no_gate = REFS["approve_rejected_sends_nothing"].replace("dependencies: [ok], ", "")
    no_gate = no_gate.replace("  - {id: ok, type: human, approval: \"Send?\"}\n", "")
    _, failures, _ = await _grade("approve_rejected_sends_nothing", no_gate, tmp_path)
    assert failures == ["1 emails sent, at most 0 wanted", "0 human question(s) asked, at least 1 wanted"]
    hot_wrong = REFS["temperature_alert"].replace("> 30", "> 32")
    _, failures, _ = await _grade("temperature_alert", hot_wrong, tmp_path)
    assert failures == ["output 'hot' is ['Rome'], want ['Lyon', 'Rome']"]
