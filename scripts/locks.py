"""The locked environments: `make lock` writes requirements/*.txt from pyproject.toml with uv, `make test` checks them.

Each lock is `uv pip compile` output (exact versions, hashes, one universal resolution for Python >= 3.11) plus a
line `# inputs-sha256: …` over the pyproject.toml entries it was made from, so a changed range is noticed before
anything is installed. pyproject.toml keeps ranges for library users; only `make run`, `make test` and `make bench`
install from the locks. Standard library only: `check` runs before the virtual environment exists.

    python3 scripts/locks.py check
    python3 scripts/locks.py compile --uv .venv/bin/uv [--upgrade]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tempfile
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = ROOT / "pyproject.toml"
STAMP_PREFIX = "# inputs-sha256: "


@dataclass(frozen=True)
class Lock:
    """One locked environment: the extras it installs, and the lock whose versions it must share (if any)."""

    path: str
    extras: tuple[str, ...]
    constrained_by: str | None = None


# test first: the run and bench environments take its versions, so what is tested is what runs.
LOCKS = (
    Lock("requirements/test.txt", ("test", "otel")),
    Lock("requirements/run.txt", (), constrained_by="requirements/test.txt"),
    Lock("requirements/bench.txt", ("test", "otel", "bench"), constrained_by="requirements/test.txt"),
)


def _inputs(pyproject: dict[str, Any], lock: Lock) -> dict[str, Any]:
    """What a lock is made from: the ranges it must honour, and nothing else of pyproject.toml."""
    project = pyproject["project"]
    optional = project.get("optional-dependencies", {})
    return {
        "requires-python": project.get("requires-python"),
        "dependencies": project.get("dependencies", []),
        "extras": {extra: optional.get(extra, []) for extra in lock.extras},
        "build-system": pyproject.get("build-system", {}).get("requires", []),
    }


def digest(pyproject: dict[str, Any], lock: Lock) -> str:
    return hashlib.sha256(json.dumps(_inputs(pyproject, lock), sort_keys=True).encode()).hexdigest()


def recorded_digest(path: Path) -> str | None:
    if not path.is_file():
        return None
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith(STAMP_PREFIX):
            return line[len(STAMP_PREFIX):].strip()
    return None


def stale_locks(root: Path = ROOT) -> list[str]:
    """The locks that pyproject.toml's ranges no longer match (or that are missing)."""
    pyproject = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    return [lock.path for lock in LOCKS
            if recorded_digest(root / lock.path) != digest(pyproject, lock)]


def check(root: Path = ROOT) -> int:
    stale = stale_locks(root)
    if not stale:
        return 0
    print(f"error: pyproject.toml and the lock files disagree ({', '.join(stale)} made from other ranges, "
          "or missing).\n"
          "  `make lock` locks the changed ranges and keeps every other version as it is;\n"
          "  `make upgrade` moves every lock to the newest versions pyproject.toml allows.\n"
          "  Then run `make test` and commit requirements/ with pyproject.toml.", file=sys.stderr)
    return 1


def compile_locks(uv: str, upgrade: bool, root: Path = ROOT) -> None:
    pyproject = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    build_requires = pyproject.get("build-system", {}).get("requires", [])
    with tempfile.TemporaryDirectory() as folder:
        build_in = Path(folder) / "build-system.in"  # the build backend, so `pip install -e .` needs no index
        build_in.write_text("\n".join(build_requires) + "\n", encoding="utf-8")
        for lock in LOCKS:
            command = [uv, "pip", "compile", "--quiet", "--universal", "--generate-hashes",
                       "--custom-compile-command", "make lock", "pyproject.toml", str(build_in),
                       "--output-file", lock.path]
            command += [f"--extra={extra}" for extra in lock.extras]
            if lock.constrained_by:
                command += ["--constraint", lock.constrained_by]
            if upgrade:
                command.append("--upgrade")
            subprocess.run(command, cwd=root, check=True)
            _stamp(root / lock.path, digest(pyproject, lock))


def _stamp(path: Path, value: str) -> None:
    lines = [line for line in path.read_text(encoding="utf-8").splitlines() if not line.startswith(STAMP_PREFIX)]
    lines.insert(0, STAMP_PREFIX + value)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("check", help="exit 1, saying what to do, when pyproject.toml and the locks disagree")
    compile_parser = commands.add_parser("compile", help="write the locks with uv")
    compile_parser.add_argument("--uv", required=True, help="the uv executable")
    compile_parser.add_argument("--upgrade", action="store_true", help="newest allowed versions, not the locked ones")
    args = parser.parse_args(argv)
    if args.command == "check":
        return check()
    compile_locks(args.uv, args.upgrade)
    return 0


if __name__ == "__main__":
    sys.exit(main())
