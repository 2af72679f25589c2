"""MCP resources: blueprint templates, docs, registered workflows, their diagrams, run records, schedules, the run view."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import mcp_types as types
from mcp import MCPError

from ice_mcp.errors import IceError
from ice_mcp.operations.blueprint_tools import EDITOR_URI
from ice_mcp.operations.diagram import mermaid
from ice_mcp.operations.documents import blueprint_files, blueprint_json, doc_files, first_line
from ice_mcp.orchestrator import Orchestrator
from ice_mcp.principals import isolated
from ice_mcp.server.options import ServerOptions
from ice_mcp.server.protocol.app_view import RUN_VIEW_URI, read_run_view, run_view_resource
from ice_mcp.server.protocol.editor_app import editor_resource, read_editor
from ice_mcp.server.protocol.envelope import to_json

RESOURCE_NOT_FOUND = -32002


def resource(name: str, uri: str, mime_type: str, *, title: str | None = None,
             description: str | None = None) -> types.Resource:
    """A resource to list: its name, URI and MIME type, with a title or a description for people."""
    return types.Resource(name=name, title=title, uri=uri, mime_type=mime_type, description=description)


def resource_templates(*rows: tuple[str, str, str, str]) -> tuple[types.ResourceTemplate, ...]:
    """Resource templates, from rows of (name, URI template, MIME type, description)."""
    return tuple(types.ResourceTemplate(name=name, uri_template=uri_template, mime_type=mime_type,
                                        description=description)
                 for name, uri_template, mime_type, description in rows)


def not_found(uri: str) -> MCPError:
    """The MCP error for a URI that names no resource."""
    return MCPError(RESOURCE_NOT_FOUND, f"Resource not found: {uri}", data={"uri": uri})


TEMPLATES = resource_templates(
    ("blueprint_template", "ice://blueprints/{name}", "application/json",
     "A blueprint template to start from (JSON)."),
    ("doc", "ice://docs/{name}", "text/markdown", "Documentation (Markdown)."),
    ("workflow", "ice://workflows/{name}", "application/json", "A registered workflow's blueprint (JSON)."),
    ("workflow_diagram", "ice://workflows/{name}/diagram", "text/vnd.mermaid",
     "A registered workflow as a Mermaid flowchart."),
    ("run", "ice://runs/{run_id}", "application/json", "A run record: status, outputs, every node's state."),
    ("schedule", "ice://schedules/{id}", "application/json",
     "A schedule: spec, policy, state, next fires, recent firings and counts."),
)

_URI = re.compile(r"^ice://(blueprints|docs|workflows|runs|schedules)/([^/]+)(/diagram)?$")
SCHEDULES_URI = "ice://schedules"
RUN_URI = "ice://runs/"  # a run record: ice://runs/{run_id}


def visible_uri(get_run: Callable[[str], Any], uri: str) -> bool:
    """Whether the acting principal may hear of `uri`: anything but another principal's run (OAuth)."""
    return not uri.startswith(RUN_URI) or isolated() is None or get_run(uri.removeprefix(RUN_URI)) is not None


class Resources:
    def __init__(self, orc: Orchestrator, options: ServerOptions) -> None:
        self._orc = orc
        self._options = options

    def listing(self) -> list[types.Resource]:
        out = [resource(f"doc_{name}", f"ice://docs/{name}", "text/markdown", title=first_line(path))
               for name, path in doc_files(self._options.docs_dir).items()]
        templates = blueprint_files(self._options.blueprints_dir)
        for name, entry in sorted(self._orc.registry.workflows.items()):
            if entry.version is not None and name not in templates:  # registered at run time, kept
                out.append(resource(f"blueprint_{name}", f"ice://blueprints/{name}", "application/json",
                                    title=f"Registered blueprint: {name} (version {entry.version})"))
        out.extend(resource(f"blueprint_{name}", f"ice://blueprints/{name}", "application/json",
                            title=f"Blueprint template: {name}") for name in templates)
        for name in sorted(self._orc.registry.workflows):
            bp = self._orc.registry.workflows[name].blueprint
            out.append(resource(f"workflow_{name}", f"ice://workflows/{name}", "application/json",
                                title=f"Workflow {name}", description=bp.description))
            out.append(resource(f"workflow_{name}_diagram", f"ice://workflows/{name}/diagram", "text/vnd.mermaid",
                                title=f"Workflow {name} (diagram)"))
        if self._orc.store is not None:
            out.append(resource("schedules", SCHEDULES_URI, "application/json", title="Schedules",
                                description="Every schedule with its next fires, and when a server last fired them."))
        out.append(run_view_resource())
        out.append(editor_resource())
        return out

    def read(self, uri: str) -> types.ReadResourceResult:
        if uri == RUN_VIEW_URI:
            return read_run_view()
        if uri == EDITOR_URI:
            return read_editor()
        match = _URI.match(uri)
        if uri == SCHEDULES_URI and self._orc.store is not None:
            text, mime = to_json(self._orc.schedules.list()), "application/json"
        elif match is None:
            raise not_found(uri)
        else:
            kind, name, diagram = match.groups()
            text, mime = self._content(kind, name, bool(diagram), uri)
        return types.ReadResourceResult(
            contents=[types.TextResourceContents(uri=uri, mime_type=mime, text=text)]
        )

    def _content(self, kind: str, name: str, diagram: bool, uri: str) -> tuple[str, str]:
        missing = not_found(uri)
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
        if kind == "schedules" and not diagram and self._orc.store is not None:
            try:
                return to_json(self._orc.schedules.get(name)), "application/json"
            except IceError:
                raise missing from None
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
        elif uri_template.startswith("ice://schedules/") and self._orc.store is not None:
            candidates = [schedule.id for schedule in self._orc.store.schedules()]
        return [c for c in candidates if c.startswith(prefix)]


def run_ids(orc: Orchestrator, limit: int = 100) -> list[str]:
    return [run.run_id for run in orc.list_runs(limit=limit)]
