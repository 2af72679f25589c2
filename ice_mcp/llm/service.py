"""The LLM subsystem executors reach as `services.llm`: model resolution, providers, resilience,
budgets and cost, behind three calls (`complete`, `stream`, `tool_turn`)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from ice_mcp.llm.config import LLMConfig, Resolution
from ice_mcp.llm.errors import BudgetExceeded, LLMError
from ice_mcp.llm.pricing import Price, call_cost_range, estimate_tokens
from ice_mcp.llm.providers import Provider, make_provider
from ice_mcp.llm.resilience import ConcurrencyLimits, OnRetry, RetryPolicy, Sleep
from ice_mcp.llm.types import ChatRequest, Completion, StreamDelta
from ice_mcp.observability import tracing

if TYPE_CHECKING:
    from ice_mcp.settings import Settings

DEFAULT_MAX_TOKENS = 1024


class LLMService:
    def __init__(self, config: LLMConfig, *, sleep: Sleep = asyncio.sleep, base_delay: float = 0.5) -> None:
        self.config = config
        self._sleep = sleep
        self._base_delay = base_delay
        self._providers: dict[str, Provider] = {}
        self._limits = ConcurrencyLimits()

    @classmethod
    def from_settings(cls, settings: Settings) -> LLMService:
        """From the environment (ICE_MCP_LLM_CONFIG, provider keys), or the config file `extra["llm_config"]`."""
        return cls(LLMConfig.load(path=settings.extra.get("llm_config")))

    # -- resolution and prices ---------------------------------------------------------------

    def resolve(self, model: str, provider: str | None = None) -> Resolution:
        return self.config.resolve(model, provider)

    def price(self, model: str, provider: str) -> Price:
        return self.config.prices.price(model, provider)

    def estimate(self, model: str, provider: str | None, input_text: str, max_tokens: int) -> tuple[float, float]:
        """USD range of one call with `input_text` in and at most `max_tokens` out."""
        resolution = self.resolve(model, provider)
        price = self.price(resolution.model, resolution.provider or "unknown")
        return call_cost_range(price, estimate_tokens(input_text), max_tokens)

    def request_upper_bound(self, provider: str, request: ChatRequest) -> float:
        text = (request.system or "") + "".join(m.content + json.dumps([c.arguments for c in m.tool_calls])
                                                for m in request.messages)
        text += "".join(t.name + t.description + json.dumps(t.input_schema) for t in request.tools)
        if request.json_schema is not None:
            text += json.dumps(request.json_schema)
        return call_cost_range(self.price(request.model, provider), estimate_tokens(text), request.max_tokens)[1]

    # -- calls -----------------------------------------------------------------------------

    def provider(self, name: str) -> Provider:
        provider = self._providers.get(name)
        if provider is None:
            provider = self._providers[name] = make_provider(self.config.provider(name))
        return provider

    def _policy(self, provider: str) -> RetryPolicy:
        settings = self.config.provider(provider)
        return RetryPolicy(
            max_retries=settings.max_retries,
            base_delay=self._base_delay,
            timeout_seconds=settings.timeout_seconds,
            sleep=self._sleep,
        )

    def _target(self, request: ChatRequest, provider: str | None) -> tuple[str, ChatRequest]:
        resolution = self.resolve(request.model, provider)
        if not resolution.ok:
            raise LLMError(resolution.problem or "unknown model", code="unknown_model")
        assert resolution.provider is not None
        request.model = resolution.model
        return resolution.provider, request

    def _check_budgets(self, provider: str, request: ChatRequest, left: float | None) -> None:
        """Refuse a call whose upper-bound cost does not fit `left`, what the run, its network and its
        caller have left (the engine charges actual spend from what nodes report)."""
        if left is None:
            return
        upper = self.request_upper_bound(provider, request)
        if upper > left:
            raise BudgetExceeded(
                f"a model call that may cost ${upper:.6f} does not fit the ${max(left, 0.0):.6f} left in the budget",
                upper_usd=upper, remaining_usd=left,
            )

    def _account(self, provider: str, completion: Completion) -> Completion:
        completion.cost_usd = self.price(completion.model, provider).cost(completion.usage)
        return completion

    async def complete(
        self, request: ChatRequest, *, provider: str | None = None, on_retry: OnRetry | None = None,
        budget_left: float | None = None,
    ) -> Completion:
        """One answer (text, or tool calls when `request.tools` is set), with usage and cost;
        refused before it is made when its upper-bound cost exceeds `budget_left` (None: no budget)."""
        name, request = self._target(request, provider)
        self._check_budgets(name, request, budget_left)
        backend = self.provider(name)
        semaphore = self._limits.get(name, self.config.provider(name).max_concurrency)

        async def attempt() -> Completion:
            async with semaphore:
                return await backend.complete(request)

        if not tracing.ENABLED:
            return self._priced(name, request, await self._policy(name).run(attempt, on_retry=on_retry))
        with tracing.chat_span(name, request.model) as span:
            completion = self._priced(name, request, await self._policy(name).run(attempt, on_retry=on_retry))
            tracing.record_completion(span, completion.model, completion.usage.input_tokens,
                                      completion.usage.output_tokens, completion.cost_usd, completion.text)
            return completion

    def _priced(self, name: str, request: ChatRequest, completion: Completion) -> Completion:
        # Price by the name asked for: a server may answer with a dated version or a file path.
        completion.model = request.model if name == "local" else completion.model
        return self._account(name, completion)

    async def tool_turn(
        self, request: ChatRequest, *, provider: str | None = None, on_retry: OnRetry | None = None,
        budget_left: float | None = None,
    ) -> Completion:
        """One turn of a tool-calling conversation: the model answers or asks for tools."""
        if not request.tools:
            raise LLMError("a tool turn needs at least one tool", code="invalid_request")
        return await self.complete(request, provider=provider, on_retry=on_retry, budget_left=budget_left)

    async def stream(
        self, request: ChatRequest, *, provider: str | None = None, on_retry: OnRetry | None = None,
        budget_left: float | None = None,
    ) -> AsyncIterator[StreamDelta]:
        """Text pieces as they come, then one delta with the whole priced `Completion`.

        Opening the stream is retried like a call; a failure after text has arrived is not.
        """
        name, request = self._target(request, provider)
        self._check_budgets(name, request, budget_left)
        backend = self.provider(name)
        semaphore = self._limits.get(name, self.config.provider(name).max_concurrency)
        policy = self._policy(name)
        span_scope = tracing.chat_span(name, request.model) if tracing.ENABLED else contextlib.nullcontext()
        with span_scope as span:
            async for delta in self._deltas(name, request, backend, semaphore, policy, on_retry):
                if span is not None and delta.completion is not None:
                    completion = delta.completion
                    tracing.record_completion(span, completion.model, completion.usage.input_tokens,
                                              completion.usage.output_tokens, completion.cost_usd, completion.text)
                yield delta

    async def _deltas(self, name: str, request: ChatRequest, backend: Provider, semaphore: asyncio.Semaphore,
                      policy: RetryPolicy, on_retry: OnRetry | None) -> AsyncIterator[StreamDelta]:
        async with semaphore:

            async def open_stream() -> tuple[AsyncIterator[StreamDelta], StreamDelta]:
                iterator = backend.stream(request).__aiter__()
                return iterator, await anext(iterator)

            iterator, first = await policy.run(open_stream, on_retry=on_retry)
            pending: StreamDelta | None = first
            while pending is not None:
                if pending.completion is not None:
                    yield StreamDelta(text=pending.text, completion=self._priced(name, request, pending.completion))
                    return
                yield pending
                pending = await anext(iterator, None)

    async def aclose(self) -> None:
        for provider in list(self._providers.values()):
            await provider.aclose()
        self._providers.clear()

