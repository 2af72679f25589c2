"""LLM services pointed at aimock (the session fixture `aimock` in tests/conftest.py), so the official SDKs
run their real code paths offline."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from ice_mcp import Orchestrator, Registry, Settings
from ice_mcp.llm import LLMConfig, LLMService


class Sleeps(list[float]):
    """Records the waits a retry asked for, and waits not at all."""

    async def __call__(self, seconds: float) -> None:
        self.append(seconds)


@pytest.fixture
def sleeps() -> Sleeps:
    return Sleeps()


@pytest.fixture
async def llm(aimock: Any, sleeps: Sleeps) -> AsyncIterator[LLMService]:
    service = LLMService(LLMConfig.load(env=aimock.env()), sleep=sleeps, base_delay=0.001)
    yield service
    await service.aclose()


@pytest.fixture
def make_orchestrator() -> Callable[[Path, LLMService], Orchestrator]:
    """An orchestrator with its own registry whose runs reach `service` for their LLM calls."""
    made: list[Orchestrator] = []

    def make(tmp_path: Path, service: LLMService) -> Orchestrator:
        orchestrator = Orchestrator(registry=Registry(), settings=Settings(data_dir=tmp_path, persist_runs=False),
                                    builtin_tools=False, llm=service)
        made.append(orchestrator)
        return orchestrator

    return make


@pytest.fixture
async def orch(tmp_path: Path, llm: LLMService, make_orchestrator) -> AsyncIterator[Orchestrator]:
    orchestrator = make_orchestrator(tmp_path, llm)
    yield orchestrator
    await orchestrator.aclose()
