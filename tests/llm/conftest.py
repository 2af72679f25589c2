"""aimock (@copilotkit/aimock) on a free loopback port for the whole session, and LLM services
pointed at it, so the official SDKs run their real code paths offline."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import threading
import urllib.request
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ice_mcp import Orchestrator, Registry, Settings
from ice_mcp.llm import LLMConfig, LLMService

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).parent / "fixtures" / "aimock.json"
AIMOCK_CLI = ROOT / ".tools" / "node_modules" / "@copilotkit" / "aimock" / "dist" / "cli.js"


class Aimock:
    def __init__(self, url: str) -> None:
        self.url = url

    def journal(self) -> list[dict[str, Any]]:
        """Every request aimock received, oldest first."""
        with urllib.request.urlopen(f"{self.url}/__aimock/journal", timeout=5) as answer:
            return list(json.loads(answer.read()))

    def env(self) -> dict[str, str]:
        return {
            "OPENAI_API_KEY": "test-openai",
            "OPENAI_BASE_URL": f"{self.url}/v1",
            "ANTHROPIC_API_KEY": "test-anthropic",
            "ANTHROPIC_BASE_URL": self.url,
            "GEMINI_API_KEY": "test-gemini",
            "GEMINI_BASE_URL": f"{self.url}/v1beta/openai/",
            "DEEPSEEK_API_KEY": "test-deepseek",
            "DEEPSEEK_BASE_URL": self.url,
        }


@pytest.fixture(scope="session")
def aimock() -> Iterator[Aimock]:
    node = shutil.which("node")
    cli = Path(os.environ.get("AIMOCK_CLI", AIMOCK_CLI))
    if node is None or not cli.is_file():
        missing = "aimock is not installed: run scripts/setup_llm.sh"
        if os.environ.get("CI"):
            pytest.fail(missing)  # in CI a missing install step must not pass as skipped tests
        pytest.skip(missing)
    process = subprocess.Popen(
        [node, str(cli), "--port", "0", "--host", "127.0.0.1", "--fixtures", str(FIXTURES), "--log-level", "info"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "AIMOCK_STRICT_TURN_INDEX": "1"},
    )
    assert process.stdout is not None
    url: str | None = None
    for line in process.stdout:
        found = re.search(r"listening on (http://127\.0\.0\.1:\d+)", line)
        if found:
            url = found.group(1)
            break
    if url is None:
        process.kill()
        raise RuntimeError("aimock did not start")
    # Keep draining its output so it never blocks on a full pipe.
    threading.Thread(target=lambda: [None for _ in process.stdout], daemon=True).start()  # type: ignore[union-attr]
    yield Aimock(url)
    process.terminate()
    try:
        process.wait(timeout=5)
    except subprocess.TimeoutExpired:
        process.kill()


class Sleeps(list[float]):
    """Records the waits a retry asked for, and waits not at all."""

    async def __call__(self, seconds: float) -> None:
        self.append(seconds)


@pytest.fixture
def sleeps() -> Sleeps:
    return Sleeps()


@pytest.fixture
async def llm(aimock: Aimock, sleeps: Sleeps) -> AsyncIterator[LLMService]:
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
