"""What an agent is (model, system prompt, tools, workflows, memory, iterations), and how
agents get registered: a decorator, a config block, or inline in a blueprint."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypedDict, Unpack

from pydantic import ValidationError

from ice_mcp.blueprint.models import AgentMemory, InlineAgent
from ice_mcp.tools.registry import DEFAULT_REGISTRY, Registry

DEFAULT_AGENT_MAX_TOKENS = 1024
DEFAULT_AGENT_MAX_ITERATIONS = 8


@dataclass(frozen=True, slots=True)
class MemoryTiers:
    working: bool = True
    episodic: bool = False
    semantic: bool = False
    procedural: bool = False

    @property
    def any_persistent(self) -> bool:
        return self.episodic or self.semantic or self.procedural


@dataclass(frozen=True, slots=True)
class AgentDefinition:
    name: str
    model: str
    provider: str | None = None
    system: str | None = None
    tools: tuple[str, ...] = ()
    workflows: tuple[str, ...] = ()
    memory: MemoryTiers = field(default_factory=MemoryTiers)
    max_iterations: int = DEFAULT_AGENT_MAX_ITERATIONS
    temperature: float | None = None
    max_tokens: int = DEFAULT_AGENT_MAX_TOKENS
    description: str = ""

    @classmethod
    def from_inline(cls, inline: InlineAgent, name: str, description: str = "") -> AgentDefinition:
        memory: AgentMemory = inline.memory
        return cls(
            name=name,
            model=inline.model,
            provider=inline.provider,
            system=inline.system,
            tools=tuple(inline.tools),
            workflows=tuple(inline.workflows),
            memory=MemoryTiers(memory.working, memory.episodic, memory.semantic, memory.procedural),
            max_iterations=inline.max_iterations,
            temperature=inline.temperature,
            max_tokens=inline.max_tokens or DEFAULT_AGENT_MAX_TOKENS,
            description=description,
        )

    @classmethod
    def from_config(cls, name: str, config: Mapping[str, Any]) -> AgentDefinition:
        """From a config block (InlineAgent fields, plus `description`); raises ValueError."""
        data = dict(config)
        description = str(data.pop("description", "") or "")
        try:
            inline = InlineAgent.model_validate(data)
        except ValidationError as exc:
            raise ValueError(f"agent {name!r}: {exc.errors(include_url=False)[0]['msg']}") from None
        return cls.from_inline(inline, name, description)


class AgentOptions(TypedDict, total=False):
    """The keyword arguments `register_agent` and `@agent` share besides `model`. Left out: no tools or
    workflows, working memory only, DEFAULT_AGENT_MAX_ITERATIONS, no provider, temperature or max_tokens
    of the agent's own, and DEFAULT_REGISTRY."""

    tools: list[str] | tuple[str, ...]
    workflows: list[str] | tuple[str, ...]
    memory: Mapping[str, bool] | None
    max_iterations: int
    provider: str | None
    temperature: float | None
    max_tokens: int | None
    registry: Registry | None


def _check_options(function: str, options: Mapping[str, Any]) -> None:
    """Refuse a keyword that is not in AgentOptions, as Python does for a parameter a function lacks."""
    for key in options:
        if key not in AgentOptions.__optional_keys__:
            raise TypeError(f"{function}() got an unexpected keyword argument {key!r}")


def register_agent(
    name: str, *, model: str, system: str | None = None, description: str = "", **options: Unpack[AgentOptions]
) -> AgentDefinition:
    """Register an agent by name; blueprints call it with `{"type": "agent", "agent": name}`."""
    _check_options("register_agent", options)
    config: dict[str, Any] = {
        "model": model,
        "system": system,
        "tools": list(options.get("tools", ())),
        "workflows": list(options.get("workflows", ())),
        "memory": dict(options.get("memory") or {}),
        "max_iterations": options.get("max_iterations", DEFAULT_AGENT_MAX_ITERATIONS),
        "provider": options.get("provider"),
        "temperature": options.get("temperature"),
        "max_tokens": options.get("max_tokens"),
    }
    config = {k: v for k, v in config.items() if v is not None}
    definition = AgentDefinition.from_config(name, config)  # validates
    (options.get("registry") or DEFAULT_REGISTRY).add_agent(name, config, description)
    return definition


def agent(
    name: str | None = None, *, model: str, **options: Unpack[AgentOptions]
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorate a function whose docstring is the agent's system prompt:

        @agent(model="gpt-4o-mini", tools=["web_fetch"])
        def researcher():
            \"\"\"You research a topic and answer with sources.\"\"\"
    """
    _check_options("agent", options)

    def register(function: Callable[..., Any]) -> Callable[..., Any]:
        doc = inspect.getdoc(function) or ""
        description = doc.split("\n\n")[0] if doc else ""
        register_agent(
            name or function.__name__, model=model, system=doc or None, description=description, **options
        )
        return function

    return register


def load_agents(block: Mapping[str, Mapping[str, Any]], registry: Registry | None = None) -> list[str]:
    """Register every agent of a config block `{name: {model, system, tools, ...}}`."""
    target = registry or DEFAULT_REGISTRY
    names: list[str] = []
    for name, config in block.items():
        AgentDefinition.from_config(name, config)  # validates before anything is registered
        target.add_agent(name, dict(config), str(config.get("description", "") or ""))
        names.append(name)
    return names


def resolve_agent(ref: str | InlineAgent, registry: Registry, node_id: str) -> AgentDefinition:
    """The definition a node refers to; raises UnknownName for an unregistered name."""
    if isinstance(ref, InlineAgent):
        return AgentDefinition.from_inline(ref, name=node_id)
    entry = registry.agent(ref)
    return AgentDefinition.from_config(entry.name, {**entry.config, "description": entry.description})
