"""The server's public extension point: MCP tools, resources and prompts a module adds beside the catalogue.

The catalogue serves what the orchestrator's registry holds (workflows, tools, agents, each answered by a
run). Some things are better answered by a handler of their own, in MCP terms: a tool whose result is MCP
content blocks or an `InputRequiredResult`, a fixed resource, a prompt. A module adds them to a
`ServerAdditions` in its `extend(orc, additions)` function (`ice-mcp serve --extend MODULE`), and may ask
that some registry entries be advertised under their bare names. The conformance suite's fixtures are one
such module (`ice_mcp_dev.conformance`).
"""

from __future__ import annotations

import importlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeAlias

from ice_mcp.errors import IceError

if TYPE_CHECKING:  # the SDK loads with `serve`, not with every command that reads server options
    import mcp_types as types
    from mcp.server.context import ServerRequestContext

    Ctx: TypeAlias = ServerRequestContext[Any, Any]
    ToolHandler: TypeAlias = Callable[
        [Ctx, types.CallToolRequestParams], Awaitable[types.CallToolResult | types.InputRequiredResult]]
    Reader: TypeAlias = Callable[[str], types.ReadResourceResult]
    PromptGetter: TypeAlias = Callable[[types.GetPromptRequestParams], types.GetPromptResult | types.InputRequiredResult]


@dataclass(frozen=True, slots=True)
class NativeTool:
    """A tool answered by its handler (its arguments are checked against `tool.input_schema` first)."""

    tool: types.Tool
    handler: ToolHandler


@dataclass(frozen=True, slots=True)
class NativeTemplate:
    """A resource template: `matches(uri)` says which URIs `read` answers."""

    template: types.ResourceTemplate
    matches: Callable[[str], bool]
    read: Reader


@dataclass(frozen=True, slots=True)
class NativePrompt:
    prompt: types.Prompt
    get: PromptGetter


@dataclass(slots=True)
class ServerAdditions:
    """What extension modules add to a server; `build_server` serves it beside the catalogue."""

    tools: dict[str, NativeTool] = field(default_factory=dict)
    resources: dict[str, tuple[types.Resource, Reader]] = field(default_factory=dict)
    templates: list[NativeTemplate] = field(default_factory=list)
    prompts: dict[str, NativePrompt] = field(default_factory=dict)
    # Registry names (workflows, tools, agents) advertised as they are, without the `workflow_` prefix.
    bare_names: set[str] = field(default_factory=set)
    # Told "tools" or "prompts" when those change after the server started (it tells its clients).
    listeners: list[Callable[[str], None]] = field(default_factory=list)

    def _changed(self, kind: str) -> None:
        for listener in list(self.listeners):
            listener(kind)

    def _remove(self, table: dict[str, Any], name: str, kind: str) -> bool:
        """Drop `name` from `table` (the tools or the prompts); listeners hear of it when it was there."""
        removed = table.pop(name, None) is not None
        if removed:
            self._changed(kind)
        return removed

    def add_tool(self, tool: types.Tool, handler: ToolHandler) -> None:
        self.tools[tool.name] = NativeTool(tool, handler)
        self._changed("tools")

    def remove_tool(self, name: str) -> bool:
        return self._remove(self.tools, name, "tools")

    def add_resource(self, resource: types.Resource, read: Reader) -> None:
        self.resources[str(resource.uri)] = (resource, read)

    def add_template(self, template: types.ResourceTemplate, matches: Callable[[str], bool], read: Reader) -> None:
        self.templates.append(NativeTemplate(template, matches, read))

    def add_prompt(self, prompt: types.Prompt, get: PromptGetter) -> None:
        self.prompts[prompt.name] = NativePrompt(prompt, get)
        self._changed("prompts")

    def remove_prompt(self, name: str) -> bool:
        return self._remove(self.prompts, name, "prompts")

    def advertise_bare(self, *names: str) -> None:
        self.bare_names.update(names)

    def read(self, uri: str) -> types.ReadResourceResult | None:
        """The added resource or template that answers `uri`, read; None when none does."""
        if (found := self.resources.get(uri)) is not None:
            return found[1](uri)
        for template in self.templates:
            if template.matches(uri):
                return template.read(uri)
        return None


def load_extension(module_name: str, orc: Any, additions: ServerAdditions) -> None:
    """Import `module_name` and call its `extend(orc, additions)`; raises IceError(extension_error)."""
    try:
        module = importlib.import_module(module_name)
        extend = module.extend
    except (ImportError, AttributeError) as exc:
        raise IceError(f"cannot load the server extension {module_name!r}: {type(exc).__name__}: {exc}",
                       code="extension_error") from exc
    extend(orc, additions)
