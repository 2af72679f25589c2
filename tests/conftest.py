"""Shared, generic fixtures. Nothing here is autouse and nothing touches global state."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from ice_mcp import Orchestrator, Registry, Settings


@pytest.fixture
def registry() -> Registry:
    """A fresh registry per test (never DEFAULT_REGISTRY), so test tools do not leak."""
    return Registry()


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    """Settings confined to the test's temporary folder."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    return Settings(data_dir=tmp_path / "data", workspace=workspace)


@pytest.fixture
async def orc(registry: Registry, settings: Settings) -> AsyncIterator[Orchestrator]:
    """An orchestrator on the fresh registry and temporary settings; closed after the test."""
    orchestrator = Orchestrator(registry=registry, settings=settings)
    yield orchestrator
    await orchestrator.aclose()
