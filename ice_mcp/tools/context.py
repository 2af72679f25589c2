"""The services of the run a tool is called from (set by the tool executor for its task)."""

from __future__ import annotations

from contextvars import ContextVar

from ice_mcp.services import Services, Settings

CURRENT_SERVICES: ContextVar[Services | None] = ContextVar("ice_mcp_services", default=None)


def current_settings() -> Settings:
    """Settings of the calling run, or from the environment when a tool is called directly."""
    services = CURRENT_SERVICES.get()
    return services.settings if services is not None else Settings.from_env()
