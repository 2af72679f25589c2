"""The browser run view served at `/ui`: runs, one run's live graph, node details, the workflow catalogue."""

from __future__ import annotations

from ice_mcp.server.web.ui.routes import UiConfig, ui_routes

__all__ = ["UiConfig", "ui_routes"]
