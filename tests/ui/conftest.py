"""Browser tests: a real `ice-mcp serve --http` with the UI blueprints, driven by Debian's headless Chromium."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
for folder in (ROOT, ROOT / "tests" / "server", HERE):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))

from live import live_server  # noqa: E402
from mcp_helpers import ADMIN  # noqa: E402

from blueprints import write_blueprints  # noqa: E402

CHROMIUM = Path(os.environ.get("ICE_MCP_CHROMIUM", "/usr/bin/chromium"))


def chromium() -> str:
    """Debian's chromium, installed by scripts/setup_ui.sh (run here once if it is missing)."""
    if not CHROMIUM.exists():
        subprocess.run(["bash", str(ROOT / "scripts" / "setup_ui.sh")], check=True, stdout=subprocess.DEVNULL)
    assert CHROMIUM.exists(), f"no Chromium at {CHROMIUM}: run scripts/setup_ui.sh"
    return str(CHROMIUM)


def server_env(**extra: str) -> dict[str, str]:
    """The UI tools importable, and tool calls that hand back a run id after a second."""
    path = os.pathsep.join([str(ROOT), str(ROOT / "tests" / "server"), str(HERE)])
    return {"PYTHONPATH": path, "ICE_MCP_WAIT_SECONDS": "1", **extra}


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("ui")


@pytest.fixture(scope="module")
def server(workspace: Path) -> Iterator[str]:
    folder = write_blueprints(workspace / "ui_blueprints")
    with live_server(workspace, "--blueprints", str(folder), "--tools", "ui_tools", env=server_env()) as url:
        yield url


@pytest.fixture
async def browser() -> AsyncIterator[Any]:
    from playwright.async_api import async_playwright

    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(executable_path=chromium(), args=["--no-sandbox"])
        yield launched
        await launched.close()


@pytest.fixture
async def page(browser: Any) -> AsyncIterator[Any]:
    context = await browser.new_context(viewport={"width": 1440, "height": 900})
    opened = await context.new_page()
    errors: list[str] = []
    opened.on("pageerror", lambda exc: errors.append(str(exc)))
    opened.page_errors = errors
    yield opened
    await context.close()
    assert not errors, f"errors in the page: {errors}"


async def use_token(page: Any, token: str = ADMIN) -> None:
    """Type a token into the page's token dialog, as a user does."""
    dialog = page.locator("#token-dialog")
    if not await dialog.is_visible():
        await page.click("#token-button")
    await page.fill("#token-input", token)
    await page.click("#token-save")
    await dialog.wait_for(state="hidden")


@contextlib.contextmanager
def ui_viewer(workspace: Path, *args: str) -> Iterator[str]:
    """`ice-mcp ui` as a subprocess on the workspace's data folder; yields its base URL."""
    from mcp_helpers import free_port, stop_process, subprocess_env, wait_for_healthz

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = workspace / "viewer.log"
    with open(log, "ab") as sink:
        proc = subprocess.Popen([sys.executable, "-m", "ice_mcp", "ui", "--port", str(port), *args], cwd=ROOT,
                                env={**subprocess_env(workspace), **server_env()}, stdout=subprocess.DEVNULL,
                                stderr=sink)
    try:
        wait_for_healthz(proc, url, log)
        yield url
    finally:
        stop_process(proc)
