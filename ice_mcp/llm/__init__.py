"""LLM providers, prices and budgets.

`LLMService.of(services)` is a run's entry point: `complete`, `stream` and `tool_turn` take a
`ChatRequest` and answer with a priced `Completion`.
"""

from ice_mcp.llm.config import PROVIDERS, LLMConfig, ProviderSettings, Resolution
from ice_mcp.llm.errors import BudgetExceeded, LLMError
from ice_mcp.llm.pricing import Price, PriceTable, default_prices, estimate_tokens
from ice_mcp.llm.resilience import RetryPolicy
from ice_mcp.llm.service import LLMService
from ice_mcp.llm.types import ChatRequest, Completion, Message, StreamDelta, ToolCall, ToolSpec

__all__ = [
    "PROVIDERS",
    "BudgetExceeded",
    "ChatRequest",
    "Completion",
    "LLMConfig",
    "LLMError",
    "LLMService",
    "Message",
    "Price",
    "PriceTable",
    "ProviderSettings",
    "Resolution",
    "RetryPolicy",
    "StreamDelta",
    "ToolCall",
    "ToolSpec",
    "default_prices",
    "estimate_tokens",
]
