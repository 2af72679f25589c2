"""Memory in four tiers: working (scratch), episodic (events), semantic (facts), procedural
(strategies). In-process by default; Redis with a `redis://` backend URL."""

from ice_mcp.memory.store import MemoryStore, open_memory
from ice_mcp.memory.types import (
    Episode,
    EpisodicMemory,
    MemoryUnavailable,
    ProceduralMemory,
    SemanticMemory,
    StrategyStats,
    WorkingMemory,
)

__all__ = [
    "Episode",
    "EpisodicMemory",
    "MemoryStore",
    "MemoryUnavailable",
    "ProceduralMemory",
    "SemanticMemory",
    "StrategyStats",
    "WorkingMemory",
    "open_memory",
]
