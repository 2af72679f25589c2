"""The official MCP conformance suite's fixtures, as an extension module (`serve --conformance-fixtures`,
the same as `serve --extend ice_mcp_dev.conformance`).

The suite calls fixed names (`test_simple_text`, `test://static-text`, `test_simple_prompt`, `slow_compute`,
...). The content fixtures are native tools (`tools`), resources and prompts (`content`) added through the
server's public extension point; the task fixtures (`tasks`) are ordinary blueprints (with `human` nodes
where the suite asks for input), so the suite drives the same runs, tasks and questions every user gets.
Never enabled by default.
"""

from __future__ import annotations

from typing import Any

import mcp_types as types

from ice_mcp.server.extensions import ServerAdditions
from ice_mcp_dev.conformance import content
from ice_mcp_dev.conformance.blocks import Ctx, Handler
from ice_mcp_dev.conformance.tasks import (
    GREET,
    TASK_WORKFLOWS,
    conformance_crash,
    conformance_fail,
    greet,
)
from ice_mcp_dev.conformance.tools import ARGUMENTS, NO_ARGUMENTS, ToolFixtures


def extend(orc: Any, additions: ServerAdditions) -> None:
    """Add every fixture to a server (the extension point's entry)."""
    orc.registry.add_tool(conformance_fail)
    orc.registry.add_tool(conformance_crash)
    for blueprint in TASK_WORKFLOWS:
        orc.register_blueprint(blueprint, origin="conformance")
        additions.advertise_bare(blueprint["name"])
    additions.add_tool(GREET, greet)
    for name, handler in sorted(ToolFixtures(orc, additions).handlers().items()):
        tool = types.Tool(name=name, description=f"Conformance fixture {name}",
                          input_schema=ARGUMENTS.get(name, NO_ARGUMENTS))
        additions.add_tool(tool, _native(handler))
    for resource in content.resources():
        additions.add_resource(resource, content.read_known)
    for template in content.TEMPLATES:
        additions.add_template(template, content.is_template_uri, content.read_known)
    for prompt in content.prompts():
        additions.add_prompt(prompt, content.get_known_prompt)


def _native(handler: Handler) -> Any:
    async def call(ctx: Ctx, params: types.CallToolRequestParams) -> Any:
        return await handler(ctx, dict(params.arguments or {}), params)

    return call
