"""The run view as an MCP App (extension `io.modelcontextprotocol/ui`): its `ui://` resource and the tools that show it.

The resource is one static HTML document, the same for every run and caller (hosts may prefetch and cache it):
the /ui graph code and styles inlined at build time, nothing loaded from anywhere. The tool result tells it which
run to draw; it follows the run with `run_status` through the host (see run_changes.py).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import mcp_types as types
from mcp.server.apps import APP_MIME_TYPE, EXTENSION_ID
from mcp.server.extension import Extension

from ice_mcp.operations.builtins import BUILTINS
from ice_mcp.server.protocol.catalogue import META_KEY

RUN_VIEW_URI = "ui://ice/run-view"
# The /ui page's own files: the App is built from them, so both draw runs with the same code.
STATIC = Path(__file__).resolve().parents[1] / "web" / "ui" / "static"
TEMPLATE = "app-view.html"
UI_META: dict[str, Any] = {"prefersBorder": True}  # no csp: the document needs no origin but the host's
# The tools whose result names a run to draw, by the id the catalogue keeps in `_meta` (kinds by prefix).
SHOWN_KINDS = ("workflow:", "agent:")
SHOWN_BUILTINS = frozenset(name for tool in BUILTINS if tool.shows_run
                           for name in (tool.name, tool.alias) if name)
_INLINE = re.compile(r'<(style|script)([^>]*) data-inline="([^"]+)"></\1>')
_MODULE_IMPORT = re.compile(r"^import .* from '\./[a-z-]+\.js';\n", re.MULTILINE)


class RunViewApp(Extension):
    """Advertises MCP Apps support (the view's MIME type) in the server's capabilities."""

    identifier = EXTENSION_ID

    def settings(self) -> dict[str, Any]:
        return {"mimeTypes": [APP_MIME_TYPE]}


def _inlined(match: re.Match[str]) -> str:
    tag, attributes, names = match.groups()
    texts = [(STATIC / name).read_text(encoding="utf-8") for name in names.split()]
    # The modules become one inline module: the imports between them are what concatenation replaces.
    text = "\n".join(_MODULE_IMPORT.sub("", text) if tag == "script" else text for text in texts)
    if f"</{tag}" in text.lower():
        raise ValueError(f"{names} would close its inline <{tag}> early")
    return f"<{tag}{attributes}>\n{text}</{tag}>"


def inlined_html(template: str) -> str:
    """A static/ template with every `data-inline` style and script filled from static/ (the editor's App too)."""
    return _INLINE.sub(_inlined, (STATIC / template).read_text(encoding="utf-8"))


@functools.cache
def run_view_html() -> str:
    """The App's document: the template with every `data-inline` style and script filled from static/."""
    return inlined_html(TEMPLATE)


def run_view_resource() -> types.Resource:
    """The view as `resources/list` shows it."""
    return types.Resource(name="run_view", title="Run view", uri=RUN_VIEW_URI, mime_type=APP_MIME_TYPE,
                          description="A live view of a run (MCP Apps): its graph with node states, node details, "
                                      "answering a waiting human node, cancelling.",
                          _meta={"ui": UI_META})


def read_run_view() -> types.ReadResourceResult:
    return types.ReadResourceResult(contents=[types.TextResourceContents(
        uri=RUN_VIEW_URI, mime_type=APP_MIME_TYPE, text=run_view_html(), _meta={"ui": UI_META})])


def shows_run_view(tool: types.Tool) -> bool:
    """Whether a call of `tool` answers with a run the view can follow (a workflow, agent or network run)."""
    ident = str((tool.meta or {}).get(META_KEY, ""))
    return ident.startswith(SHOWN_KINDS) or ident in SHOWN_BUILTINS


def with_run_view(tools: Iterable[types.Tool]) -> list[types.Tool]:
    """`tools` with the view declared on those that show it, under both keys hosts read (the flat one is older);
    clients without Apps ignore `_meta`, so one listing serves every client."""
    meta = {"ui": {"resourceUri": RUN_VIEW_URI}, "ui/resourceUri": RUN_VIEW_URI}
    return [tool.model_copy(update={"meta": {**(tool.meta or {}), **meta}}) if shows_run_view(tool) else tool
            for tool in tools]
