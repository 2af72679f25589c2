"""Code nodes inside real workflows, and expressions evaluated in the sandbox (the operator option)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from ice_mcp import Orchestrator, Registry, Settings

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def orchestrator(sandbox_cache: None, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Orchestrator]:
    settings = Settings(data_dir=Path(tmp_path_factory.mktemp("wf")), persist_runs=False,
                        extra={"sandbox": {"workers": 2, "max_timeout_seconds": 5}})
    orch = Orchestrator(registry=Registry(), settings=settings)
    yield orch
    await orch.aclose()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def sandboxed(sandbox_cache: None, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Orchestrator]:
    settings = Settings(data_dir=Path(tmp_path_factory.mktemp("expr")), persist_runs=False, sandbox_expressions=True,
                        extra={"sandbox": {"workers": 1}})
    orch = Orchestrator(registry=Registry(), settings=settings)
    yield orch
    await orch.aclose()


async def test_loop_of_code_nodes_with_concurrency_keeps_order(orchestrator: Orchestrator) -> None:
    # Early items sleep longest, so they finish last; results must still follow the items.
    blueprint = {
        "name": "squares",
        "inputs": {"type": "object", "properties": {"xs": {"type": "array", "items": {"type": "integer"}}}},
        "outputs": {"squares": "{{ each.results }}"},
        "nodes": [{
            "id": "each", "type": "loop", "items": "{{ inputs.xs }}", "concurrency": 4,
            "body": [{"id": "sq", "type": "code", "inputs": {"x": "{{ item }}", "n": "{{ inputs.xs | length }}"},
                      "code": "import time\ntime.sleep(0.02 * (inputs['n'] - inputs['x']))\n"
                              "print('x', inputs['x'])\nreturn inputs['x'] ** 2"}],
            "output": "{{ sq.result }}",
        }],
    }
    xs = list(range(8))
    record = await orchestrator.run(blueprint, {"xs": xs})
    assert record.status == "succeeded", record.error
    assert record.outputs == {"squares": [x * x for x in xs]}
    assert record.nodes["each"].output["count"] == 8


async def test_code_node_failure_in_a_workflow_names_the_guest_error(orchestrator: Orchestrator) -> None:
    blueprint = {"name": "boom", "nodes": [
        {"id": "ok", "type": "code", "code": "return 1"},
        {"id": "bad", "type": "code", "dependencies": ["ok"], "code": "x = 1\nraise ValueError('no good')"},
    ]}
    record = await orchestrator.run(blueprint)
    assert record.status == "failed"
    assert record.error is not None and record.error["details"]["node_id"] == "bad"
    error = record.nodes["bad"].error
    assert error is not None and error["code"] == "guest_exception"
    assert error["details"]["type"] == "ValueError" and error["details"]["line"] == 2
    assert record.nodes["ok"].output == {"result": 1, "stdout": ""}


async def test_conditions_and_convergence_evaluate_in_the_sandbox(sandboxed: Orchestrator) -> None:
    blueprint = {
        "name": "gated",
        "inputs": {"type": "object", "properties": {"n": {"type": "integer"}}},
        "outputs": {"big": "{{ big_path.text }}", "small": "{{ small_path.text }}", "grown": "{{ grow.output }}"},
        "nodes": [
            {"id": "check", "type": "condition", "expression": "inputs.n > 10 and not inputs.get('dry')",
             "true_path": ["big_path"], "false_path": ["small_path"]},
            {"id": "big_path", "type": "tool", "tool_name": "render_template", "tool_args": {"template": "big"}},
            {"id": "small_path", "type": "tool", "tool_name": "render_template", "tool_args": {"template": "small"}},
            {"id": "grow", "type": "recursive", "max_iterations": 5, "convergence_condition": "previous.text | length >= 3",
             "body": [{"id": "step", "type": "tool", "tool_name": "render_template",
                       "tool_args": {"template": "{{ (previous.text if previous else '') ~ 'x' }}"}}]},
        ],
    }
    record = await sandboxed.run(blueprint, {"n": 42})
    assert record.status == "succeeded", record.error
    assert record.nodes["big_path"].status == "succeeded" and record.nodes["small_path"].status == "skipped"
    assert record.nodes["grow"].output["iterations"] == 3
    assert record.outputs == {"big": "big", "small": None, "grown": {"text": "xxx"}}


async def test_abusive_expression_in_the_sandbox_fails_cleanly(sandboxed: Orchestrator) -> None:
    blueprint = {"name": "abuse", "nodes": [{"id": "c", "type": "condition", "expression": "'a' * 10 ** 10 == 'b'"}]}
    record = await sandboxed.run(blueprint)
    assert record.status == "failed"
    error = record.nodes["c"].error
    assert error is not None and error["code"] in ("guest_exception", "memory_limit")
    after = await sandboxed.run({"name": "fine", "nodes": [{"id": "c", "type": "condition", "expression": "1 < 2"}]})
    assert after.status == "succeeded" and after.nodes["c"].output == {"result": True}
