"""How the commands, the servers, the Temporal worker and the run view build their orchestrator from `Settings`:
one way for all (`Orchestrator(...)` stays the public constructor), with the `--blueprints` folders they load."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from ice_mcp.blueprint.issues import ValidationIssue
from ice_mcp.bundled import bundled_dir
from ice_mcp.nodes import builtin_node_types
from ice_mcp.orchestrator import Orchestrator
from ice_mcp.settings import Settings
from ice_mcp.tools.modules import declared_node_types, import_tool_modules
from ice_mcp.tools.registry import DEFAULT_REGISTRY


def build_orchestrator(settings: Settings, *, tools: Iterable[str] = (), store_only: bool = False) -> Orchestrator:
    """The orchestrator a command, a server, a worker or the run view runs with, built from its settings.

    `tools`: the `--tools` modules (and ICE_MCP_TOOLS), imported; the tools their `@tool` collected go into this
    orchestrator's own registry, a copy of the default one, and their `NODE_TYPES` beside the built-in node types. `store_only`: the run store read directly (`runs list`,
    `runs show`, `trace export`): no module imported, a registry of the built-in tools only."""
    if store_only:
        return Orchestrator(settings=settings)
    extra = declared_node_types(import_tool_modules(tools))
    builtins, _ = builtin_node_types()
    return Orchestrator(settings=settings, registry=DEFAULT_REGISTRY.copy(),  # the --tools modules' @tools
                        node_types=[*builtins, *extra] if extra else None)


def load_blueprint_folders(orc: Orchestrator, folders: Iterable[Path | str], *, templates: bool = False
                           ) -> list[ValidationIssue]:
    """Register the blueprints of each folder, the bundled templates' first with `templates` (`--templates`);
    returns the problems of those that failed."""
    problems: list[ValidationIssue] = []
    for folder in [*([bundled_dir("blueprints")] if templates else []), *folders]:
        problems.extend(orc.load_blueprints(Path(folder)))
    return problems

