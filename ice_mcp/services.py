"""What executors and validation checks receive from their orchestrator: the registry, the settings,
and the subsystems (LLM, sandboxes, memory), each created on first use and closed with the orchestrator."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from ice_mcp.llm.service import LLMService
from ice_mcp.memory.store import MemoryStore, open_memory
from ice_mcp.settings import Settings

if TYPE_CHECKING:
    from ice_mcp.sandbox import Sandbox
    from ice_mcp.sandbox.expressions import ExpressionSandbox
    from ice_mcp.tools.registry import Registry
    from ice_mcp.tools.upstream import Upstreams

T = TypeVar("T")


@dataclass(slots=True)
class Services:
    """One orchestrator's registry, settings and subsystems. Tests may set `llm` (or any subsystem) directly."""

    registry: Registry
    settings: Settings
    _llm: LLMService | None = None
    _sandbox: Sandbox | None = None
    _expression_sandbox: ExpressionSandbox | None = None
    _memory: dict[str, MemoryStore] = field(default_factory=dict)
    upstream: Upstreams | None = None  # other MCP servers' tools (`--mcp-config`): their connections
    _lock: threading.Lock = field(default_factory=threading.Lock)  # checks run in threads too

    def _once(self, attribute: str, create: Callable[[], T]) -> T:
        value = getattr(self, attribute)
        if value is None:
            with self._lock:
                value = getattr(self, attribute)
                if value is None:
                    value = create()
                    setattr(self, attribute, value)
        return value

    @property
    def llm(self) -> LLMService:
        """Model resolution, providers, prices and budgets (config from ICE_MCP_LLM_CONFIG or `extra["llm_config"]`)."""
        return self._once("_llm", lambda: LLMService.from_settings(self.settings))

    @llm.setter
    def llm(self, service: LLMService) -> None:
        self._llm = service

    @property
    def sandbox(self) -> Sandbox:
        """The WebAssembly sandbox of `code` nodes: one per orchestrator, limits from ICE_MCP_SANDBOX_* and
        `extra["sandbox"]`."""
        return self._once("_sandbox", self._new_sandbox)

    def _new_sandbox(self) -> Sandbox:
        from ice_mcp.sandbox import (  # wasmtime loads only when a code node runs
            Sandbox,
            SandboxConfig,
        )

        overrides = self.settings.extra.get("sandbox")
        return Sandbox(SandboxConfig.from_env(overrides if isinstance(overrides, dict) else None))

    @property
    def expression_sandbox(self) -> ExpressionSandbox:
        """Evaluates conditions and convergence in the sandbox (`sandbox_expressions`)."""
        return self._once("_expression_sandbox", self._new_expression_sandbox)

    @staticmethod
    def _new_expression_sandbox() -> ExpressionSandbox:
        from ice_mcp.sandbox.expressions import ExpressionSandbox  # wasmtime only when asked for

        return ExpressionSandbox()

    def memory(self, backend: str | None = None) -> MemoryStore:
        """The memory store on `backend` (default: the `memory_backend` setting), one per URL."""
        url = backend or self.settings.memory_backend or "memory"
        store = self._memory.get(url)
        if store is None:
            with self._lock:
                store = self._memory.setdefault(url, open_memory(url))
        return store

    async def aclose(self) -> None:
        """Close every subsystem that was created."""
        subsystems: list[Any] = [self._llm, self._sandbox, self._expression_sandbox, *self._memory.values(),
                                 self.upstream]
        self._llm = self._sandbox = self._expression_sandbox = self.upstream = None
        self._memory.clear()
        for subsystem in subsystems:
            if subsystem is not None:
                await subsystem.aclose()
