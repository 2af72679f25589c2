"""The blueprint editor as an MCP App (`ui://ice/blueprint-editor`): its resource, and `blueprint_edit` pointing at it.

One static HTML document, the same for every draft and caller (hosts may prefetch and cache it), built from
static/editor-app.html with every script and style inlined. blueprint_edit's result gives it the draft; it calls
blueprint_validate and blueprint_save through the host, so a sign-in that may not save is told so by the server.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable

import mcp_types as types
from mcp.server.apps import APP_MIME_TYPE

from ice_mcp.operations.blueprint_tools import EDITOR_URI
from ice_mcp.server.protocol.app_view import UI_META, inlined_html
from ice_mcp.server.protocol.catalogue import META_KEY

TEMPLATE = "editor-app.html"
EDITOR_TOOLS = frozenset({"blueprint_edit"})  # the catalogue's ids (`_meta`) of the tools whose result it shows


@functools.cache
def editor_html() -> str:
    """The App's document: editor-app.html with its styles and scripts inlined from static/."""
    return inlined_html(TEMPLATE)


def editor_resource() -> types.Resource:
    """The editor as `resources/list` shows it."""
    return types.Resource(name="blueprint_editor", title="Blueprint editor", uri=EDITOR_URI, mime_type=APP_MIME_TYPE,
                          description="Edit a blueprint's text inside the chat (MCP Apps): its problems pinned to "
                                      "lines, validate, save as a new version.",
                          _meta={"ui": UI_META})


def read_editor() -> types.ReadResourceResult:
    return types.ReadResourceResult(contents=[types.TextResourceContents(
        uri=EDITOR_URI, mime_type=APP_MIME_TYPE, text=editor_html(), _meta={"ui": UI_META})])


def with_editor(tools: Iterable[types.Tool]) -> list[types.Tool]:
    """`tools` with the editor declared on blueprint_edit, under both keys hosts read (as the run view is)."""
    meta = {"ui": {"resourceUri": EDITOR_URI}, "ui/resourceUri": EDITOR_URI}
    return [tool.model_copy(update={"meta": {**(tool.meta or {}), **meta}})
            if str((tool.meta or {}).get(META_KEY, "")) in EDITOR_TOOLS else tool for tool in tools]
