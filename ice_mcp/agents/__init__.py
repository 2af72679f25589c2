"""Agents: definitions and registration, the tool-calling loop, and their memory."""

from ice_mcp.agents.definition import (
    AgentDefinition,
    MemoryTiers,
    agent,
    load_agents,
    register_agent,
    resolve_agent,
)
from ice_mcp.agents.loop import AgentResult, run_agent
from ice_mcp.agents.tools import AgentTool, ToolOutcome, registry_tool, workflow_tool

__all__ = [
    "AgentDefinition",
    "AgentResult",
    "AgentTool",
    "MemoryTiers",
    "ToolOutcome",
    "agent",
    "load_agents",
    "register_agent",
    "registry_tool",
    "resolve_agent",
    "run_agent",
    "workflow_tool",
]
