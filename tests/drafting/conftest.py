"""An LLM mock (aimock) answering the scripted drafts, and orchestrators whose drafting model is it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from drafts import write_fixtures
from llm_mock import Aimock, serve_aimock

from ice_mcp import Orchestrator, Registry, Settings
from ice_mcp.llm import LLMConfig, LLMService


@pytest.fixture(scope="module")
def draft_mock(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Aimock]:
    with serve_aimock(write_fixtures(tmp_path_factory.mktemp("drafts"))) as mock:
        yield mock


@pytest.fixture
async def orc(tmp_path: Path, draft_mock: Aimock) -> AsyncIterator[Orchestrator]:
    service = LLMService(LLMConfig.load(env=draft_mock.env()), base_delay=0.001)
    orchestrator = Orchestrator(registry=Registry(), llm=service,
                                settings=Settings(data_dir=tmp_path / "data", workspace=tmp_path, persist_runs=False))
    yield orchestrator
    await orchestrator.aclose()
