"""Shared, generic fixtures. Nothing here is autouse and nothing touches global state but Hypothesis's profile."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck
from hypothesis import settings as hypothesis_settings

from ice_mcp import Orchestrator, Registry, Settings

# No test asserts on time, Hypothesis's own checks included: a loaded 2-core CI machine is slow, not wrong.
hypothesis_settings.register_profile("ice_mcp", deadline=None, suppress_health_check=[HealthCheck.too_slow])
hypothesis_settings.load_profile("ice_mcp")


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
