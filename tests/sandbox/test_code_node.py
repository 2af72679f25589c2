"""The `code` node end to end: a blueprint run by the engine, its snippet run in the sandbox."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from ice_mcp import Orchestrator, Registry, Settings
from ice_mcp.sandbox import Sandbox

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def orchestrator(sandbox_cache: None, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Orchestrator]:
    data = tmp_path_factory.mktemp("code-node")
    settings = Settings(data_dir=Path(data), persist_runs=False, extra={"sandbox": {"workers": 1, "max_timeout_seconds": 2}})
    orch = Orchestrator(registry=Registry(), settings=settings, builtin_tools=False)
    try:
        yield orch
    finally:
        await orch.aclose()


def blueprint(code: str, inputs: dict[str, Any], **node: Any) -> dict[str, Any]:
    return {
        "name": "code_test",
        "inputs": {"type": "object", "properties": {"xs": {"type": "array"}}},
        "nodes": [{"id": "calc", "type": "code", "code": code, "inputs": inputs, **node}],
    }


async def test_code_node_returns_result_and_stdout(orchestrator: Orchestrator) -> None:
    bp = blueprint("print('n =', len(inputs['xs']))\nreturn sum(inputs['xs'])", {"xs": "{{ inputs.xs }}"})
    record = await orchestrator.run(bp, {"xs": [1, 2, 3.5]})
    assert record.status == "succeeded", record.error
    assert record.nodes["calc"].output == {"result": 6.5, "stdout": "n = 3\n"}


async def test_code_node_failure_is_structured(orchestrator: Orchestrator) -> None:
    bp = blueprint("x = inputs['xs']\nreturn x[10]", {"xs": "{{ inputs.xs }}"}, retries=2)
    record = await orchestrator.run(bp, {"xs": [1]})
    assert record.status == "failed"
    node = record.nodes["calc"]
    assert node.error is not None
    assert node.error["code"] == "guest_exception"
    assert node.error["details"] == {"type": "IndexError", "message": "list index out of range", "line": 2}
    assert node.attempts == 1  # a sandbox failure is not retried


async def test_code_node_limits_apply(orchestrator: Orchestrator) -> None:
    bp = blueprint("while True:\n    pass", {}, limits={"timeout_seconds": 0.5})
    record = await orchestrator.run(bp, {})
    assert record.nodes["calc"].error is not None
    assert record.nodes["calc"].error["code"] == "timeout"
    assert record.nodes["calc"].error["details"] == {"limit_seconds": 0.5}


async def test_one_sandbox_per_server(orchestrator: Orchestrator) -> None:
    box = orchestrator.services.sandbox
    assert isinstance(box, Sandbox)
    assert box.config.workers == 1 and box.config.max_timeout_seconds == 2
