"""Provider implementations and the factory that builds one from its settings.

Each provider's SDK is imported only when a provider of that kind is first made."""

from __future__ import annotations

from ice_mcp.llm.config import DEFAULT_BASE_URLS, ProviderSettings
from ice_mcp.llm.providers.base import Provider


def make_provider(settings: ProviderSettings) -> Provider:
    """The provider named by `settings.name`, built from its key, base URL and timeout."""
    if settings.name == "anthropic":
        from ice_mcp.llm.providers.anthropic import AnthropicProvider  # the anthropic SDK

        return AnthropicProvider(
            api_key=settings.api_key, base_url=settings.base_url, timeout_seconds=settings.timeout_seconds
        )
    if settings.name == "local":
        from ice_mcp.llm.providers.local import LocalProvider  # llama.cpp and the local model

        return LocalProvider(settings)
    from ice_mcp.llm.providers.openai_compat import OpenAICompatProvider  # the openai SDK

    return OpenAICompatProvider(
        settings.name,
        api_key=settings.api_key,
        base_url=settings.base_url or DEFAULT_BASE_URLS.get(settings.name),
        timeout_seconds=settings.timeout_seconds,
        # DeepSeek has JSON mode but no schema-constrained mode.
        structured="json_object" if settings.name == "deepseek" else "json_schema",
        # OpenAI's reasoning models take only `max_completion_tokens`; compatible servers know `max_tokens`.
        max_tokens_field="max_completion_tokens"
        if settings.name == "openai" and not settings.base_url
        else "max_tokens",
    )


__all__ = ["Provider", "make_provider"]
