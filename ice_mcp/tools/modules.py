"""Importing the user's tool modules (`--tools`, ICE_MCP_TOOLS): their `@tool`s land in DEFAULT_REGISTRY, and a
module's `NODE_TYPES` (a sequence of `NodeType`) are node types of its own for the orchestrator built with it."""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ice_mcp.errors import IceError


def import_tool_modules(modules: Iterable[str] = ()) -> list[str]:
    """Import the user's tool modules (`--tools`, and ICE_MCP_TOOLS: comma-separated).

    A module name is looked up from the current folder too (as `python -m` does); a path
    to a `.py` file is loaded from that file. Raises IceError(code="tools_import_error").
    """
    names = [m for m in modules if m]
    names += [m.strip() for m in os.environ.get("ICE_MCP_TOOLS", "").split(",") if m.strip()]
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    for name in names:
        try:
            if name.endswith(".py"):
                path = Path(name).resolve()
                spec = importlib.util.spec_from_file_location(path.stem, path)
                if spec is None or spec.loader is None:
                    raise ImportError(f"cannot load {path}")
                module = importlib.util.module_from_spec(spec)
                sys.modules[path.stem] = module
                spec.loader.exec_module(module)
            else:
                importlib.import_module(name)
        except Exception as exc:
            raise IceError(f"cannot import tools from {name!r}: {type(exc).__name__}: {exc}",
                           code="tools_import_error") from exc
    return names


def declared_node_types(names: Iterable[str]) -> list[Any]:
    """The `NODE_TYPES` of the imported modules `names` (as `import_tool_modules` returned them), in order."""
    found: list[Any] = []
    for name in names:
        module = sys.modules.get(Path(name).stem if name.endswith(".py") else name)
        found.extend(getattr(module, "NODE_TYPES", ()))
    return found
