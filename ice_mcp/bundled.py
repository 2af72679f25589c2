"""Where the bundled blueprint templates, docs, prompts and sample files are (package data, unless ICE_MCP_*_DIR
say otherwise), and the copy of the samples a new workspace gets."""

from __future__ import annotations

import os
import shutil
from importlib.resources import files
from pathlib import Path
from typing import Literal

BundledKind = Literal["blueprints", "docs", "prompts", "samples"]
# Where the samples land in a workspace: the same relative paths as in a checkout (examples/sales.csv).
SAMPLES_FOLDER = "examples"

# Each kind's folder under ice_mcp/_data (symlinks to the root folders in a checkout, copies in a wheel)
# and the environment variable that replaces it.
_FOLDERS: dict[BundledKind, tuple[str, str]] = {
    "blueprints": ("blueprints", "ICE_MCP_BLUEPRINTS_DIR"),
    "docs": ("resources", "ICE_MCP_DOCS_DIR"),
    "prompts": ("prompts", "ICE_MCP_PROMPTS_DIR"),
    "samples": ("examples", "ICE_MCP_SAMPLES_DIR"),
}


def bundled_dir(kind: BundledKind) -> Path:
    """The folder of one kind of bundled file (it may be missing when the package was installed without data)."""
    folder, variable = _FOLDERS[kind]
    override = os.environ.get(variable)
    if override:
        return Path(override).expanduser().resolve()
    # An installed package is a plain folder (never a zip), so its Traversable is a real path.
    return Path(str(files("ice_mcp") / "_data" / folder)).resolve()


def seed_workspace(workspace: Path) -> list[str]:
    """Create `workspace` if missing and, when it holds nothing (hidden files aside), copy the bundled samples into
    its `examples/`, so the bundled workflows run on a first call. A folder with anything in it is left alone.
    Returns the workspace-relative paths copied."""
    workspace.mkdir(parents=True, exist_ok=True)
    if any(not entry.name.startswith(".") for entry in workspace.iterdir()):
        return []
    source = bundled_dir("samples")
    if not source.is_dir():
        return []
    copied: list[str] = []
    for path in sorted(source.rglob("*")):
        if not path.is_file():
            continue
        relative = Path(SAMPLES_FOLDER) / path.relative_to(source)
        target = workspace / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            with path.open("rb") as src, target.open("xb") as dst:  # "x": a file that appeared meanwhile is kept
                shutil.copyfileobj(src, dst)
        except FileExistsError:
            continue
        copied.append(relative.as_posix())
    return copied


def samples_in(workspace: Path) -> list[str]:
    """The bundled samples present in `workspace` (workspace-relative paths), for telling a client what is there."""
    source = bundled_dir("samples")
    if not source.is_dir():
        return []
    found = (Path(SAMPLES_FOLDER) / p.relative_to(source) for p in sorted(source.rglob("*")) if p.is_file())
    return [relative.as_posix() for relative in found if (workspace / relative).is_file()]


def workspace_note(workspace: Path, *, named: bool = True) -> str:
    """What an MCP client is told about the workspace (appended to the server's instructions): where file paths
    point (its absolute path only when `named`: a remote caller has no business with the server's folders), how
    to list its files or choose another folder, and the samples it holds."""
    root = workspace.resolve()
    where = f"the workspace {root}" if named else "the server's workspace"
    note = (f" File paths (csv_reader, file_read, file_write, the workflows' `path` inputs) are relative to "
            f"{where}, the only folder they reach; tool_file_list lists its files; the server's --workspace DIR "
            "or ICE_MCP_WORKSPACE sets another.")
    samples = samples_in(root)
    if samples:
        note += f" It holds sample files to try the workflows on: {', '.join(samples)}."
    return note
