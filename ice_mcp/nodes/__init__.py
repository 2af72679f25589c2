"""The built-in node types, one executor per module. The orchestrator registers them; the engine
never looks them up."""

from __future__ import annotations

import importlib
import logging

from ice_mcp.core.executor import NodeType
from ice_mcp.nodes.condition import CONDITION_NODE
from ice_mcp.nodes.human import HUMAN_NODE
from ice_mcp.nodes.loop import LOOP_NODE
from ice_mcp.nodes.parallel import PARALLEL_NODE
from ice_mcp.nodes.recursive import recursive_node_type
from ice_mcp.nodes.tool import TOOL_NODE
from ice_mcp.nodes.workflow import WORKFLOW_NODE

logger = logging.getLogger(__name__)

# Node types whose runtimes (LLM SDKs, wasmtime) may be missing: (type, module, attribute).
_OPTIONAL = (("llm", "ice_mcp.nodes.llm", "LLM_NODE"), ("agent", "ice_mcp.nodes.agent", "AGENT_NODE"),
             ("code", "ice_mcp.nodes.code", "CODE_NODE"))


def builtin_node_types() -> tuple[list[NodeType], dict[str, str]]:
    """The built-in node types this installation can run, and why any known type cannot run here."""
    found: dict[str, NodeType] = {}
    unavailable: dict[str, str] = {}
    for name, module, attribute in _OPTIONAL:
        try:  # imported on first use: their runtimes are heavy and optional
            found[name] = getattr(importlib.import_module(module), attribute)
        except ImportError as exc:
            unavailable[name] = f"{type(exc).__name__}: {exc}"
            logger.warning("node type %r unavailable: %s", name, exc)
    types = [TOOL_NODE, CONDITION_NODE, LOOP_NODE, PARALLEL_NODE, WORKFLOW_NODE, HUMAN_NODE, *found.values(),
             recursive_node_type(agent=found.get("agent"))]
    return types, unavailable
