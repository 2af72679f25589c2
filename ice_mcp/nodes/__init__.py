"""Node types the engine can run, by name. Each module holds one executor."""

from __future__ import annotations

import importlib
import logging
from collections.abc import Mapping

from ice_mcp.nodes.base import NodeType

_NODE_TYPES: dict[str, NodeType] = {}
_UNAVAILABLE: dict[str, str] = {}
_loaded = False
logger = logging.getLogger(__name__)

# Node types whose runtimes (LLM SDKs, wasmtime) may be missing: (type, module, attribute).
_OPTIONAL = (("llm", "ice_mcp.nodes.llm", "LLM_NODE"), ("agent", "ice_mcp.nodes.agent", "AGENT_NODE"),
             ("code", "ice_mcp.nodes.code", "CODE_NODE"))


def register_node_type(node_type: NodeType) -> None:
    """Make a node type runnable (and so valid in blueprints)."""
    _NODE_TYPES[node_type.name] = node_type


def node_types() -> Mapping[str, NodeType]:
    global _loaded
    if not _loaded:
        _loaded = True
        _load_builtin()
    return _NODE_TYPES


def _load_builtin() -> None:
    # Imported here, not at module import, so executors may import the engine freely.
    from ice_mcp.nodes.condition import CONDITION_NODE
    from ice_mcp.nodes.loop import LOOP_NODE
    from ice_mcp.nodes.parallel import PARALLEL_NODE
    from ice_mcp.nodes.recursive import RECURSIVE_NODE
    from ice_mcp.nodes.tool import TOOL_NODE
    from ice_mcp.nodes.workflow import WORKFLOW_NODE

    for node_type in (TOOL_NODE, CONDITION_NODE, LOOP_NODE, PARALLEL_NODE, RECURSIVE_NODE, WORKFLOW_NODE):
        _NODE_TYPES.setdefault(node_type.name, node_type)
    for name, module, attribute in _OPTIONAL:
        try:
            _NODE_TYPES.setdefault(name, getattr(importlib.import_module(module), attribute))
        except ImportError as exc:
            _UNAVAILABLE[name] = f"{type(exc).__name__}: {exc}"
            logger.warning("node type %r unavailable: %s", name, exc)


def unavailable_reason(name: str) -> str | None:
    """Why a known node type cannot run here (its runtime failed to import), if it can't."""
    node_types()
    return _UNAVAILABLE.get(name)
