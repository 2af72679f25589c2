"""Where the bundled blueprint templates, docs and prompts are: package data, unless ICE_MCP_*_DIR say otherwise."""

from __future__ import annotations

import os
from importlib.resources import files
from pathlib import Path
from typing import Literal

BundledKind = Literal["blueprints", "docs", "prompts"]

# Each kind's folder under ice_mcp/_data (symlinks to the root folders in a checkout, copies in a wheel)
# and the environment variable that replaces it.
_FOLDERS: dict[BundledKind, tuple[str, str]] = {
    "blueprints": ("blueprints", "ICE_MCP_BLUEPRINTS_DIR"),
    "docs": ("resources", "ICE_MCP_DOCS_DIR"),
    "prompts": ("prompts", "ICE_MCP_PROMPTS_DIR"),
}


def bundled_dir(kind: BundledKind) -> Path:
    """The folder of one kind of bundled file (it may be missing when the package was installed without data)."""
    folder, variable = _FOLDERS[kind]
    override = os.environ.get(variable)
    if override:
        return Path(override).expanduser().resolve()
    # An installed package is a plain folder (never a zip), so its Traversable is a real path.
    return Path(str(files("ice_mcp") / "_data" / folder)).resolve()
