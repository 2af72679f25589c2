"""A non-editable install works: the wheel, installed outside the checkout, serves the bundled templates, docs
and prompts over MCP with no ICE_MCP_*_DIR variable set."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tomllib
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

ROOT = Path(__file__).resolve().parents[1]
# What a build reads besides the sources, and what is never part of one.
SKIP = shutil.ignore_patterns(".git", ".venv", ".tools", ".data", ".cache", "build", "dist", "*.egg-info",
                              "__pycache__", ".*_cache", "node_modules", "tests", "bench")
OVERRIDES = ("ICE_MCP_BLUEPRINTS_DIR", "ICE_MCP_DOCS_DIR", "ICE_MCP_PROMPTS_DIR", "ICE_MCP_SAMPLES_DIR", "ICE_MCP_TOOLS")


def run(*command: str | Path, cwd: Path, env: dict[str, str] | None = None) -> str:
    done = subprocess.run([str(c) for c in command], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{command}: {done.stderr[-2000:]}"
    return done.stdout


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A fresh virtual environment outside the checkout with the wheel installed; yields its folder."""
    work = tmp_path_factory.mktemp("wheel")
    # Build from a copy, so the checkout gets no build/ or egg-info and no stale file reaches the wheel.
    source = work / "source"
    shutil.copytree(ROOT, source, symlinks=True, ignore=SKIP)
    run(sys.executable, "-m", "pip", "wheel", source, "--no-deps", "--no-build-isolation", "--no-index",
        "-w", work / "dist", "-q", cwd=work)
    [wheel] = (work / "dist").glob("ice_mcp-*.whl")
    venv = work / "venv"
    run(sys.executable, "-m", "venv", "--without-pip", venv, cwd=work)
    python = venv / "bin" / "python"
    run(sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "--no-index", "-q", wheel, cwd=work)
    # The dependencies come from this test's environment (offline): its site-packages as a plain path entry,
    # after the venv's own, whose .pth files (this checkout's editable install among them) are not run.
    site = Path(run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])", cwd=work).strip())
    (site / "test_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    yield venv


def clean_env(workspace: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in OVERRIDES and k != "PYTHONPATH"}
    return {**env, "ICE_MCP_DATA_DIR": str(workspace / "data"), "ICE_MCP_WORKSPACE": str(workspace)}


def test_the_wheel_carries_the_bundled_files(installed: Path, tmp_path: Path) -> None:
    code = ("import json, ice_mcp; from ice_mcp.bundled import bundled_dir; print(json.dumps({'package': "
            "ice_mcp.__file__, **{k: sorted(p.name for p in bundled_dir(k).iterdir()) "
            "for k in ('blueprints', 'docs', 'prompts', 'samples')}}))")
    found = json.loads(run(installed / "bin" / "python", "-c", code, cwd=tmp_path, env=clean_env(tmp_path)))
    # Imported from the venv, not the checkout; the data folders are copies, not links back to it.
    assert Path(found["package"]).is_relative_to(installed)
    data = Path(found["package"]).parent / "_data"
    assert not any(p.is_symlink() for p in data.rglob("*"))
    assert found["blueprints"] == sorted(p.name for p in (ROOT / "blueprints").iterdir())
    assert found["docs"] == sorted(p.name for p in (ROOT / "resources").iterdir())
    assert found["prompts"] == sorted(p.name for p in (ROOT / "prompts").iterdir())
    assert found["samples"] == sorted(p.name for p in (ROOT / "examples").iterdir())  # what a new workspace gets


def test_the_checkouts_own_tools_stay_out_of_the_wheel(installed: Path, tmp_path: Path) -> None:
    """The conformance fixtures and the dev cluster live in ice_mcp_dev/, in a checkout only: the wheel has neither,
    and their commands say where they come from instead of failing with a traceback."""
    site = Path(run(installed / "bin" / "python", "-c", "import ice_mcp; print(ice_mcp.__file__)", cwd=tmp_path,
                    env=clean_env(tmp_path)).strip()).parents[1]
    assert not (site / "ice_mcp_dev").exists() and not (site / "ice_mcp" / "conformance").exists()
    assert not (site / "ice_mcp" / "server" / "cluster.py").exists()
    for command in (["dev-cluster", "--port", "0"], ["serve", "--http", "--port", "0", "--conformance-fixtures"]):
        done = subprocess.run([installed / "bin" / "ice-mcp", *command], cwd=tmp_path, env=clean_env(tmp_path),
                              capture_output=True, text=True, timeout=60)
        assert done.returncode != 0 and "needs_checkout" in done.stderr and "source checkout" in done.stderr, done
        assert "Traceback" not in done.stderr


async def test_installed_server_lists_templates_docs_and_prompts(installed: Path, tmp_path: Path) -> None:
    templates = sorted(p.stem for p in (ROOT / "blueprints").glob("*.json"))
    docs = sorted(p.stem for p in (ROOT / "resources").glob("*.md"))
    prompts = sorted(p.stem for p in (ROOT / "prompts").glob("*.md"))
    assert templates and docs and prompts
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert run(installed / "bin" / "ice-mcp", "--version", cwd=tmp_path) == f"ice-mcp {version}\n"

    proc = subprocess.Popen([installed / "bin" / "ice-mcp", "serve", "--http", "--port", "0", "--templates"],
                            cwd=tmp_path, env=clean_env(tmp_path), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        banner = proc.stderr.readline()  # printed once the server listens
        assert banner.startswith("ice_mcp: MCP over Streamable HTTP at http://127.0.0.1:"), banner
        url = banner.split(" at ", 1)[1].split()[0]
        assert httpx2.get(url.replace("/mcp", "/healthz"), timeout=5).json()["workflows"] == len(templates)
        async with Client(streamable_http_client(url)) as client:  # type: ignore[arg-type]
            tools = {t.name for t in (await client.list_tools()).tools}
            resources = {r.uri for r in (await client.list_resources()).resources}
            listed_prompts = {p.name for p in (await client.list_prompts()).prompts}
            doc = await client.read_resource(f"ice://docs/{docs[0]}")
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    assert {f"workflow_{name}" for name in templates} <= tools
    assert {f"ice://blueprints/{name}" for name in templates} <= {str(u) for u in resources}
    assert {f"ice://docs/{name}" for name in docs} <= {str(u) for u in resources}
    assert listed_prompts == set(prompts)
    assert doc.contents[0].text == (ROOT / "resources" / f"{docs[0]}.md").read_text()  # type: ignore[union-attr]
