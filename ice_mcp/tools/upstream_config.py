"""The MCP servers whose tools ice_mcp uses, read from Claude Desktop-format config files (`--mcp-config`)."""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ice_mcp.errors import IceError

logger = logging.getLogger(__name__)

CONFIG_ENV = "ICE_MCP_MCP_CONFIG"  # comma-separated config files, after the --mcp-config ones
SERVER_NAME = re.compile(r"^[A-Za-z0-9_-]{1,48}$")  # no dot: tools are named SERVER.TOOL
SELF_NAME = "ice-mcp"


class UpstreamConfig(BaseModel):
    """One entry of `mcpServers`: a command to start (stdio) or a URL (Streamable HTTP).

    The Claude Desktop keys (`command`, `args`, `env`) and the common HTTP keys (`type`, `url`,
    `headers`) are read as they are; the rest are ice_mcp's own and optional.
    """

    model_config = ConfigDict(extra="ignore", frozen=True, populate_by_name=True)

    name: str
    type: Literal["stdio", "http", "streamable-http", "streamableHttp"] | None = None
    command: str | None = None
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict, repr=False)  # may hold tokens: never shown
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = Field(default_factory=dict, repr=False)
    # The name of an environment variable holding a bearer token (read when connecting, never stored).
    bearer_token_env: str | None = Field(default=None, alias="bearerTokenEnv")
    timeout_seconds: float = Field(default=300.0, gt=0, alias="timeoutSeconds")  # one tool call
    connect_timeout_seconds: float = Field(default=60.0, gt=0, alias="connectTimeoutSeconds")
    max_concurrency: int = Field(default=8, ge=1, le=1024, alias="maxConcurrency")  # calls in flight
    disabled: bool = False
    source: str = ""  # the file it came from

    @model_validator(mode="after")
    def _one_transport(self) -> UpstreamConfig:
        if self.type in ("http", "streamable-http", "streamableHttp") and not self.url:
            raise ValueError("an http server needs a `url`")
        if bool(self.command) == bool(self.url):
            raise ValueError("give either `command` (stdio) or `url` (Streamable HTTP)")
        if self.url and not self.url.startswith(("http://", "https://")):
            raise ValueError("`url` must be http:// or https:// (the SSE transport is not supported)")
        return self

    @property
    def is_http(self) -> bool:
        return self.url is not None

    def launches_ice_mcp(self) -> bool:
        """True for the entry that starts ice_mcp itself (as `ice-mcp claude-config` writes it)."""
        if self.command is None:
            return False
        program = Path(self.command).name
        return program == SELF_NAME or any(a in ("ice_mcp", "ice_mcp.server", "ice_mcp.cli") for a in self.args)


def config_files(given: Iterable[str | Path] = (), environ: Mapping[str, str] | None = None) -> list[Path]:
    """The config files named on the command line, then those in ICE_MCP_MCP_CONFIG."""
    environ = os.environ if environ is None else environ
    paths = [Path(p) for p in given if str(p)]
    paths += [Path(p.strip()) for p in environ.get(CONFIG_ENV, "").split(",") if p.strip()]
    return [p.expanduser() for p in paths]


def read_config_file(path: Path) -> tuple[list[UpstreamConfig], list[str]]:
    """The servers of one file, and a warning for each entry left out. Raises IceError(invalid_mcp_config)
    when the file cannot be read or is not a `{"mcpServers": {...}}` object."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise IceError(f"cannot read MCP config {str(path)!r}: {exc.strerror or exc}", code="invalid_mcp_config",
                       details={"path": str(path)}) from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise IceError(f"MCP config {str(path)!r} is not valid JSON: {exc}", code="invalid_mcp_config",
                       details={"path": str(path)}) from None
    servers = document.get("mcpServers") if isinstance(document, dict) else None
    if not isinstance(servers, dict):
        raise IceError(f'MCP config {str(path)!r} has no "mcpServers" object (the Claude Desktop format: '
                       '{"mcpServers": {"name": {"command": ..., "args": [...]}}})', code="invalid_mcp_config",
                       details={"path": str(path)})
    configs: list[UpstreamConfig] = []
    warnings: list[str] = []
    for name, entry in servers.items():
        where = f"{path.name}: server {name!r}"
        if not SERVER_NAME.match(name):
            warnings.append(f"{where} left out: a server name is 1-48 letters, digits, '_' or '-' "
                            "(its tools are named SERVER.TOOL)")
            continue
        if not isinstance(entry, dict):
            warnings.append(f"{where} left out: its entry is not an object")
            continue
        try:
            config = UpstreamConfig.model_validate({**entry, "name": name, "source": str(path)})
        except ValidationError as exc:
            first = exc.errors(include_url=False)[0]
            field = ".".join(str(p) for p in first["loc"])
            warnings.append(f"{where} left out: {field + ': ' if field else ''}{first['msg']}")
            continue
        if config.disabled:
            continue
        if name == SELF_NAME or config.launches_ice_mcp():
            logger.info("%s is ice_mcp itself: skipped", where)
            continue
        configs.append(config)
    return configs, warnings


def load_configs(given: Iterable[str | Path] = (), environ: Mapping[str, str] | None = None
                 ) -> tuple[list[UpstreamConfig], list[str]]:
    """Every configured server (a later file's entry replaces an earlier one of the same name), and the
    warnings about entries left out."""
    by_name: dict[str, UpstreamConfig] = {}
    warnings: list[str] = []
    for path in config_files(given, environ):
        configs, file_warnings = read_config_file(path)
        warnings += file_warnings
        for config in configs:
            by_name[config.name] = config
    return list(by_name.values()), warnings
