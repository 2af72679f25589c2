"""MCP resources: blueprint templates, docs, registered workflows, their diagrams, run records."""

from __future__ import annotations

import json
import re

import mcp_types as types
from mcp import MCPError

from ice_mcp.orchestrator import Orchestrator
from ice_mcp.server.options import ServerOptions
from ice_mcp.server.protocol.diagram import mermaid
from ice_mcp.server.protocol.documents import blueprint_files, blueprint_json, doc_files, first_line
from ice_mcp.server.protocol.envelope import to_json

RESOURCE_NOT_FOUND = -32002

TEMPLATES: tuple[types.ResourceTemplate, ...] = (
    types.ResourceTemplate(
        name="blueprint_template",
        uri_template="ice://blueprints/{name}",
        description="A blueprint template to start from (JSON).",
        mime_type="application/json",
    ),
    types.ResourceTemplate(
        name="doc",
        uri_template="ice://docs/{name}",
        description="Documentation (Markdown).",
        mime_type="text/markdown",
    ),
    types.ResourceTemplate(
        name="workflow",
        uri_template="ice://workflows/{name}",
        description="A registered workflow's blueprint (JSON).",
        mime_type="application/json",
    ),
    types.ResourceTemplate(
        name="workflow_diagram",
        uri_template="ice://workflows/{name}/diagram",
        description="A registered workflow as a Mermaid flowchart.",
        mime_type="text/vnd.mermaid",
    ),
    types.ResourceTemplate(
        name="run",
        uri_template="ice://runs/{run_id}",
        description="A run record: status, outputs, every node's state.",
        mime_type="application/json",
    ),
)

_URI = re.compile(r"^ice://(blueprints|docs|workflows|runs)/([^/]+)(/diagram)?$")


class Resources:
    def __init__(self, orc: Orchestrator, options: ServerOptions) -> None:
        self._orc = orc
        self._options = options

    def listing(self) -> list[types.Resource]:
        out: list[types.Resource] = []
        for name, path in doc_files(self._options.docs_dir).items():
            out.append(
                types.Resource(
                    name=f"doc_{name}",
                    title=first_line(path),
                    uri=f"ice://docs/{name}",
                    mime_type="text/markdown",
                )
            )
        templates = blueprint_files(self._options.blueprints_dir)
        for name, entry in sorted(self._orc.registry.workflows.items()):
            if entry.version is not None and name not in templates:  # registered at run time, kept
                out.append(
                    types.Resource(
                        name=f"blueprint_{name}",
                        title=f"Registered blueprint: {name} (version {entry.version})",
                        uri=f"ice://blueprints/{name}",
                        mime_type="application/json",
                    )
                )
        for name in templates:
            out.append(
                types.Resource(
                    name=f"blueprint_{name}",
                    title=f"Blueprint template: {name}",
                    uri=f"ice://blueprints/{name}",
                    mime_type="application/json",
                )
            )
        for name in sorted(self._orc.registry.workflows):
            bp = self._orc.registry.workflows[name].blueprint
            out.append(
                types.Resource(
                    name=f"workflow_{name}",
                    title=f"Workflow {name}",
                    description=bp.description,
                    uri=f"ice://workflows/{name}",
                    mime_type="application/json",
                )
            )
            out.append(
                types.Resource(
                    name=f"workflow_{name}_diagram",
                    title=f"Workflow {name} (diagram)",
                    uri=f"ice://workflows/{name}/diagram",
                    mime_type="text/vnd.mermaid",
                )
            )
        return out

    def read(self, uri: str) -> types.ReadResourceResult:
        match = _URI.match(uri)
        if match is None:
            raise MCPError(RESOURCE_NOT_FOUND, f"Resource not found: {uri}", data={"uri": uri})
        kind, name, diagram = match.groups()
        text, mime = self._content(kind, name, bool(diagram), uri)
        return types.ReadResourceResult(
            contents=[types.TextResourceContents(uri=uri, mime_type=mime, text=text)]
        )

    def _content(self, kind: str, name: str, diagram: bool, uri: str) -> tuple[str, str]:
        missing = MCPError(RESOURCE_NOT_FOUND, f"Resource not found: {uri}", data={"uri": uri})
        if kind == "docs" and not diagram:
            path = doc_files(self._options.docs_dir).get(name)
            if path is None:
                raise missing
            return path.read_text(encoding="utf-8"), "text/markdown"
        if kind == "blueprints" and not diagram:
            path = blueprint_files(self._options.blueprints_dir).get(name)
            if path is not None:
                return blueprint_json(path), "application/json"
            kept = self._orc.registry.workflows.get(name)
            if kept is None or kept.version is None:
                raise missing
            # The current version of a blueprint registered at run time, ready to register again.
            return json.dumps(kept.blueprint.to_dict(), indent=2, ensure_ascii=False), "application/json"
        if kind == "workflows":
            entry = self._orc.registry.workflows.get(name)
            if entry is None:
                raise missing
            if diagram:
                return mermaid(self._orc.workflow_plan(name)), "text/vnd.mermaid"
            return json.dumps(
                entry.blueprint.to_dict(), indent=2, ensure_ascii=False
            ), "application/json"
        if kind == "runs" and not diagram:
            record = self._orc.get_run(name)
            if record is None:
                raise missing
            return to_json(record.to_dict()), "application/json"
        raise missing

    def complete(self, uri_template: str, argument: str, prefix: str) -> list[str]:
        """Existing names for a template's argument, those starting with `prefix` first."""
        candidates: list[str] = []
        if uri_template.startswith("ice://blueprints/"):
            candidates = list(blueprint_files(self._options.blueprints_dir))
        elif uri_template.startswith("ice://docs/"):
            candidates = list(doc_files(self._options.docs_dir))
        elif uri_template.startswith("ice://workflows/"):
            candidates = sorted(self._orc.registry.workflows)
        elif uri_template.startswith("ice://runs/"):
            candidates = run_ids(self._orc)
        return [c for c in candidates if c.startswith(prefix)]


def run_ids(orc: Orchestrator, limit: int = 100) -> list[str]:
    return [run.run_id for run in orc.list_runs(limit=limit)]
