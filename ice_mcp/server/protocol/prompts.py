"""Prompts from `prompts/`: one Markdown file each, arguments declared in its front matter."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mcp_types as types
import yaml
from jinja2.sandbox import SandboxedEnvironment
from mcp import MCPError

from ice_mcp.drafting.instructions import tool_line
from ice_mcp.operations.documents import blueprint_files, doc_files
from ice_mcp.server.options import ServerOptions
from ice_mcp.server.protocol.resources import run_ids

INVALID_PARAMS = -32602


@dataclass(frozen=True, slots=True)
class PromptFile:
    prompt: types.Prompt
    body: str


def load_prompt(path: Path) -> PromptFile:
    text = path.read_text(encoding="utf-8")
    meta: dict[str, Any] = {}
    body = text
    if text.startswith("---"):
        _, front, body = text.split("---", 2)
        meta = yaml.safe_load(front) or {}
    arguments = [
        types.PromptArgument(
            name=str(arg["name"]),
            description=arg.get("description"),
            required=bool(arg.get("required", False)),
        )
        for arg in meta.get("arguments") or []
    ]
    prompt = types.Prompt(
        name=str(meta.get("name") or path.stem),
        title=meta.get("title"),
        description=meta.get("description"),
        arguments=arguments,
    )
    return PromptFile(prompt, body.lstrip("\n"))


class Prompts:
    def __init__(self, orc: Any, options: ServerOptions) -> None:
        self._orc = orc
        self._options = options
        self._env = SandboxedEnvironment(autoescape=False, keep_trailing_newline=True)

    def _files(self) -> dict[str, PromptFile]:
        folder = self._options.prompts_dir
        if not folder.is_dir():
            return {}
        files = [load_prompt(p) for p in sorted(folder.glob("*.md"))]
        return {f.prompt.name: f for f in files}

    def listing(self) -> list[types.Prompt]:
        return [f.prompt for f in self._files().values()]

    def _context(self, arguments: dict[str, str]) -> dict[str, Any]:
        registry = self._orc.registry
        tools = [
            {
                "name": name,
                "description": entry.description,
                "input_schema": json.dumps(entry.input_schema),
                "line": tool_line(name, entry.description, entry.input_schema),  # compact: draft_workflow
            }
            for name, entry in sorted(registry.tools.items())
        ]
        workflows = [
            {"name": name, "description": entry.blueprint.description or ""}
            for name, entry in sorted(registry.workflows.items())
        ]
        agents = [
            {"name": name, "description": entry.description}
            for name, entry in sorted(registry.agents.items())
        ]
        context: dict[str, Any] = {
            **arguments,
            "tools": tools,
            "workflows": workflows,
            "agents": agents,
            "templates": sorted(blueprint_files(self._options.blueprints_dir)),
            "docs": sorted(doc_files(self._options.docs_dir)),
        }
        if "run_id" in arguments:
            record = self._orc.get_run(arguments["run_id"])
            if record is None:
                raise MCPError(INVALID_PARAMS, f"unknown run {arguments['run_id']!r}")
            context["run"] = record.to_dict()
            context["run_json"] = json.dumps(context["run"], indent=2, default=str)
            workflow = registry.workflows.get(context["run"].get("workflow"))
            context["blueprint_json"] = (
                json.dumps(workflow.blueprint.to_dict(), indent=2) if workflow is not None else None
            )
        if "workflow" in arguments:
            entry = registry.workflows.get(arguments["workflow"])
            if entry is None:
                raise MCPError(INVALID_PARAMS, f"unknown workflow {arguments['workflow']!r}")
            context["blueprint_json"] = json.dumps(entry.blueprint.to_dict(), indent=2)
        return context

    def get(self, name: str, arguments: dict[str, str] | None) -> types.GetPromptResult:
        files = self._files()
        found = files.get(name)
        if found is None:
            raise MCPError(
                INVALID_PARAMS, f"unknown prompt {name!r}; prompts: {', '.join(sorted(files))}"
            )
        args = {k: str(v) for k, v in (arguments or {}).items()}
        missing = [
            a.name for a in found.prompt.arguments or [] if a.required and not args.get(a.name)
        ]
        if missing:
            raise MCPError(
                INVALID_PARAMS, f"prompt {name!r} needs the argument(s): {', '.join(missing)}"
            )
        text = self._env.from_string(found.body).render(self._context(args))
        return types.GetPromptResult(
            description=found.prompt.description,
            messages=[
                types.PromptMessage(role="user", content=types.TextContent(type="text", text=text))
            ],
        )

    def complete(self, name: str, argument: str, prefix: str) -> list[str]:
        if argument == "workflow":
            candidates = sorted(self._orc.registry.workflows)
        elif argument == "run_id":
            candidates = run_ids(self._orc)
        elif argument == "template":
            candidates = sorted(blueprint_files(self._options.blueprints_dir))
        else:
            candidates = []
        return [c for c in candidates if c.startswith(prefix)]
