"""The llm_judge scorer against the LLM mock (aimock): the official OpenAI SDK asks for a score with the rubric,
each verdict is a run of its own (priced, with its trigger), and the threshold decides the case."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from llm_mock import Aimock, serve_aimock

from ice_mcp import Orchestrator, Registry, Settings
from ice_mcp.evals import Evals, load_dataset, make_scorers
from ice_mcp.llm import LLMConfig, LLMService

FIXTURES = Path(__file__).parent / "fixtures" / "judge.json"
ANSWER = {"name": "best_week", "inputs": {"type": "object", "properties": {"week": {"type": "string"}}},
          "outputs": {"answer": "{{ say.text }}"},
          "nodes": [{"id": "say", "type": "tool", "tool_name": "render_template",
                     "tool_args": {"template": "The best week was {{ inputs.week }}."}}]}
RUBRIC = "The answer names the week with the highest total sales in the shop's data (2026-W46)."


@pytest.fixture(scope="module")
def judge_mock() -> Iterator[Aimock]:
    with serve_aimock(FIXTURES) as mock:
        yield mock


@pytest.fixture
async def orc(tmp_path: Path, judge_mock: Aimock) -> AsyncIterator[Orchestrator]:
    llm = LLMService(LLMConfig.load(env=judge_mock.env()))
    orchestrator = Orchestrator(registry=Registry(), settings=Settings(data_dir=tmp_path / "data", workspace=tmp_path),
                                llm=llm)
    orchestrator.register_blueprint(ANSWER)
    yield orchestrator
    await orchestrator.aclose()
    await llm.aclose()


async def test_the_judge_scores_each_output_against_the_rubric(orc: Orchestrator, judge_mock: Aimock) -> None:
    evals = Evals(orc)
    dataset = load_dataset([{"id": "right", "inputs": {"week": "2026-W46"}},
                            {"id": "wrong", "inputs": {"week": "2026-W44"}}])
    scorers = make_scorers([{"kind": "llm_judge", "rubric": RUBRIC, "field": "answer", "threshold": 0.7,
                             "model": "gpt-4o-mini"}])
    report = await evals.run(evals.target(workflow="best_week"), dataset, scorers)
    wrong, right = report["cases"]  # failing first
    assert (wrong["id"], wrong["verdict"], right["id"], right["verdict"]) == ("wrong", "failed", "right", "passed")
    (score,) = right["runs"][0]["scores"]
    assert score["score"] == 0.9 and score["reason"] == "0.9 ≥ 0.7: It names the best week, 2026-W46."
    assert wrong["reason"] == "llm_judge:answer: 0.2 < 0.7: 2026-W44 is the weakest week, not the best."
    judge_cost = (200 * 0.15 + 20 * 0.60) / 1e6  # gpt-4o-mini's price per million tokens
    assert score["cost_usd"] == pytest.approx(judge_cost) and right["runs"][0]["cost_usd"] == pytest.approx(judge_cost)
    assert report["summary"]["cost_usd"]["total"] == pytest.approx(2 * judge_cost)
    judge_run = orc.get_run(score["run_id"])
    assert judge_run is not None and judge_run.workflow == "eval_judge" and judge_run.status == "succeeded"
    assert judge_run.trigger == {"kind": "eval_judge", "eval_id": report["eval_id"], "case": "right", "repetition": 1}
    sent = [entry["body"] for entry in judge_mock.journal() if "was 2026-W46" in str(entry.get("body"))][-1]
    assert sent["model"] == "gpt-4o-mini" and sent["response_format"]["type"] == "json_schema"
    prompt = sent["messages"][-1]["content"]
    assert prompt.startswith(f"Rubric:\n{RUBRIC}\n\nInputs:\n") and prompt.endswith("Output:\nThe best week was 2026-W46.")
    kept = orc.get_run(report["eval_id"])
    assert kept is not None and kept.cost_usd == pytest.approx(2 * judge_cost)


async def test_a_judge_that_cannot_answer_fails_the_attempt_saying_why(orc: Orchestrator) -> None:
    evals = Evals(orc)
    dataset = load_dataset([{"id": "other", "inputs": {"week": "2026-W45"}}])  # no fixture matches: an error
    scorers = make_scorers([{"kind": "llm_judge", "rubric": RUBRIC, "model": "gpt-4o-mini"}])
    report = await evals.run(evals.target(workflow="best_week"), dataset, scorers)
    (case,) = report["cases"]
    assert case["verdict"] == "failed" and case["reason"].startswith("llm_judge: judge_failed: the judge's run ")
