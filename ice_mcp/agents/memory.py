"""An agent's memory: what it reads before its first turn, the `remember` and `recall` tools,
and the episode (and strategy outcome) it writes after."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ice_mcp.agents.definition import MemoryTiers
from ice_mcp.agents.loop import AgentResult
from ice_mcp.agents.tools import AgentTool, ToolOutcome
from ice_mcp.memory.store import MemoryStore

MAX_ENTITIES_SCANNED = 500
RECENT_EPISODES = 3
CLIP = 500


def _clip(value: Any, limit: int = CLIP) -> str:
    text = value if isinstance(value, str) else str(value)
    return text if len(text) <= limit else text[:limit] + "..."


@dataclass(slots=True)
class AgentMemoryBridge:
    store: MemoryStore
    agent: str
    session: str
    tiers: MemoryTiers

    async def context(self, task: str) -> str | None:
        """Relevant memory as text for the system prompt, or None when there is none."""
        parts: list[str] = []
        if self.tiers.working:
            scratch = await self.store.working.all(self.session)
            if scratch:
                parts.append("Working notes: " + "; ".join(f"{k} = {_clip(v, 200)}" for k, v in scratch.items()))
        if self.tiers.semantic:
            lowered = task.lower()
            entities = (await self.store.semantic.entities(self.agent))[:MAX_ENTITIES_SCANNED]
            for entity in entities:
                if entity.lower() in lowered:
                    facts = await self.store.semantic.get(self.agent, entity)
                    parts.append(f"Known about {entity}: " + "; ".join(_clip(f, 200) for f in facts))
        if self.tiers.episodic:
            for episode in await self.store.episodic.search(key=self.agent, limit=RECENT_EPISODES):
                content = episode.content if isinstance(episode.content, dict) else {"output": episode.content}
                parts.append(
                    f"Earlier run ({episode.outcome or 'unknown'}): asked {_clip(content.get('input', ''), 200)!r}, "
                    f"answered {_clip(content.get('output', ''), 300)!r}"
                )
        if self.tiers.procedural:
            best = await self.store.procedural.best(self.agent)
            if best is not None:
                parts.append(
                    f"Approach that worked best so far: {best.strategy} "
                    f"({best.successes} of {best.attempts} runs succeeded)"
                )
        return "\n".join(f"- {p}" for p in parts) if parts else None

    def tools(self) -> list[AgentTool]:
        return [
            AgentTool(
                "remember",
                "Store a note under a key for later in this task"
                + (" and in long-term memory about that key" if self.tiers.semantic else "")
                + ".",
                {
                    "type": "object",
                    "properties": {"key": {"type": "string"}, "value": {"type": "string"}},
                    "required": ["key", "value"],
                },
                self._remember,
                kind="memory",
            ),
            AgentTool(
                "recall",
                "Read what is remembered under a key (notes, known facts, earlier runs).",
                {"type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]},
                self._recall,
                kind="memory",
            ),
        ]

    async def _remember(self, arguments: dict[str, Any]) -> ToolOutcome:
        key, value = str(arguments.get("key", "")), arguments.get("value")
        if not key:
            raise ValueError("`key` is required")
        stored = ["working"]
        await self.store.working.set(self.session, key, value)
        if self.tiers.semantic:
            await self.store.semantic.add(self.agent, key, value)
            stored.append("semantic")
        return ToolOutcome({"stored": stored, "key": key})

    async def _recall(self, arguments: dict[str, Any]) -> ToolOutcome:
        key = str(arguments.get("key", ""))
        found: dict[str, Any] = {"key": key, "note": await self.store.working.get(self.session, key)}
        if self.tiers.semantic:
            found["facts"] = await self.store.semantic.get(self.agent, key)
        if self.tiers.episodic:
            episodes = await self.store.episodic.search(key=self.agent, tag=key, limit=5)
            found["episodes"] = [e.as_dict() for e in episodes]
        return ToolOutcome(found)

    async def record(self, task: str, result: AgentResult | None, error: str | None = None) -> None:
        """Write the run as an episode, and its approach's outcome as a strategy attempt."""
        used = sorted({c["name"] for c in (result.tool_calls if result else [])})
        outcome = "failed" if result is None else result.stopped
        if self.tiers.episodic:
            await self.store.episodic.record(
                self.agent,
                {"input": _clip(task, 2000), "output": _clip(result.text if result else error or "", 2000),
                 "tools": used, "iterations": result.iterations if result else 0},
                outcome=outcome,
                tags=[self.agent, *used],
            )
        if self.tiers.procedural:
            strategy = "+".join(used) if used else "direct"
            await self.store.procedural.record(self.agent, strategy, outcome == "answered")
