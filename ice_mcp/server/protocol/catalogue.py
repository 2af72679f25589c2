"""The MCP tool catalogue, rebuilt from the orchestrator's registry whenever it changes.

Above `catalogue_max` workflows (ICE_MCP_CATALOGUE_MAX) the list stays short for clients that cap or page it:
pinned workflows only, found otherwise through workflow_search and run through workflow_start; every tool
stays callable by its own name.
"""

from __future__ import annotations

import difflib
import fnmatch
from dataclasses import dataclass
from typing import Any

import mcp_types as types

from ice_mcp.errors import IceError
from ice_mcp.operations.blueprint_tools import BLUEPRINT_TOOLS
from ice_mcp.operations.builtins import (
    ALIASES,
    BUILTINS,
    BY_NAME,
    SEARCH_LIMIT,
)
from ice_mcp.operations.draft_tools import DRAFT_TOOLS
from ice_mcp.operations.eval_tools import EVAL_TOOLS
from ice_mcp.operations.flat_schema import flatten_schema
from ice_mcp.operations.hook_tools import HOOK_TOOLS
from ice_mcp.operations.naming import advertised_name, canonical_id, parse_canonical
from ice_mcp.operations.notify_tools import NOTIFY_TOOLS
from ice_mcp.operations.result_schemas import (
    AGENT_RESULT_SCHEMA,
    tool_result_schema,
    workflow_result_schema,
)
from ice_mcp.operations.schedule_tools import SCHEDULE_TOOLS
from ice_mcp.operations.search import SearchDoc, SearchIndex
from ice_mcp.operations.tool_table import BuiltinTool, Hints
from ice_mcp.server.options import ServerOptions
from ice_mcp.server.protocol.annotations import tool_annotations, workflow_annotations
from ice_mcp.tools.registry import SchemaToolEntry

META_KEY = "io.ice_mcp/id"
# In a large catalogue the list keeps running and steering runs; the trigger families (20 tools), the
# evaluations (4), drafting and the blueprint versions and editor (5) stay callable by name but unlisted, or the
# built-ins alone would pass what clients take (Cursor sends 40 tools; the list stays within 40 KB).
UNLISTED_WHEN_LARGE = frozenset(tool.name for tool in (*SCHEDULE_TOOLS, *HOOK_TOOLS, *NOTIFY_TOOLS, *EVAL_TOOLS,
                                                       *DRAFT_TOOLS, *BLUEPRINT_TOOLS))
DESCRIPTION_CHARS = 500  # of a description in workflow_search's results
# On a read-only server workflow_start runs only workflows whose every node reads (calls.py refuses the rest).
READ_ONLY_START = Hints(read_only=True, destructive=False, idempotent=False, open_world=True)
AGENT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"input": {"type": "string", "description": "What to ask the agent."}},
    "required": ["input"],
    "additionalProperties": False,  # the agent's one-node plan declares `input` alone and refuses others
}


@dataclass(frozen=True, slots=True)
class Entry:
    """One advertised tool and what it runs."""

    name: str  # advertised
    kind: str  # workflow | tool | agent | builtin | native (added by an extension module)
    target: str  # registry name, builtin name or native tool name
    tool: types.Tool
    admin: bool = False
    scope: str = "ice:run"  # what an OAuth token needs to call it (built-ins declare theirs)
    pinned: bool = False  # a workflow listed however large the catalogue

    @property
    def schema(self) -> dict[str, Any]:
        return self.tool.input_schema

    @property
    def forwards_to_workflow(self) -> bool:
        """A built-in whose call becomes the call of the workflow it names (workflow_start)."""
        return self.kind == "builtin" and BY_NAME[self.target].forwards_to_workflow


class Catalogue:
    """Registry entries plus the built-in tools, in a deterministic order, with name lookup."""

    def __init__(self, orc: Any, options: ServerOptions) -> None:
        self._orc = orc
        self._options = options
        self._entries: list[Entry] | None = None
        self._by_name: dict[str, Entry] = {}
        self._long_names: dict[str, str] = {}  # a shortened tool's name under the 64-character limit → its name
        self._by_id: dict[tuple[str, str], Entry] = {}
        self._large = False
        self._index: SearchIndex | None = None

    def invalidate(self) -> None:
        self._entries = None
        self._index = None
        self._long_names.clear()

    # -- building -------------------------------------------------------------------------

    def _name(self, kind: str, name: str) -> str:
        if name in self._options.additions.bare_names:
            return name
        # A workflow named `search` or `start` must not take workflow_search's or workflow_start's name.
        advertised = advertised_name(kind, name, limit=self._options.max_name_length,
                                     canonical=self._options.canonical_names, reserved=BY_NAME)
        longest = advertised_name(kind, name, canonical=self._options.canonical_names, reserved=BY_NAME)
        if longest != advertised:  # the name a 64-character limit gives still reaches the tool (callers kept it)
            self._long_names[longest] = advertised
        return advertised

    def _pinned(self, name: str, blueprint: Any) -> bool:
        pins = self._options.pinned
        return bool(blueprint.pinned) or name in pins or self._name("workflow", name) in pins

    def _meta(self, kind: str, name: str) -> dict[str, Any]:
        return {META_KEY: canonical_id(kind, name)}

    def _registry_entries(self) -> list[Entry]:
        registry = self._orc.registry
        out: list[Entry] = []
        for name in sorted(registry.workflows):
            bp = registry.workflows[name].blueprint
            plan = self._plan(name)
            cid = canonical_id("workflow", name)
            tool = types.Tool(
                name=self._name("workflow", name),
                title=cid,
                description=bp.description or f"Run the workflow {name}.",
                input_schema=workflow_inputs_schema(bp, plan),
                output_schema=workflow_result_schema(bp.outputs, plan.graph.sinks if plan is not None else ()),
                annotations=workflow_annotations(self._orc.workflow_effects(name), title=cid),
                _meta=self._meta("workflow", name),
            )
            out.append(Entry(tool.name, "workflow", name, tool, pinned=self._pinned(name, bp)))
        for name in sorted(registry.tools):
            entry = registry.tools[name]
            upstream = isinstance(entry, SchemaToolEntry) and entry.server is not None
            if upstream and not self._options.expose_upstream:
                continue  # another MCP server's tool: for workflows and agents, not re-exported unless asked
            cid = canonical_id("tool", name)
            tool = types.Tool(
                name=self._name("tool", entry.model_name if upstream else name),
                title=cid,
                description=entry.description or f"Run the tool {name}.",
                input_schema=flatten_schema(entry.input_schema),
                output_schema=tool_result_schema(entry.function),
                annotations=tool_annotations(entry, title=cid),
                _meta=self._meta("tool", name),
            )
            out.append(Entry(tool.name, "tool", name, tool))
        for name in sorted(registry.agents):
            entry = registry.agents[name]
            cid = canonical_id("agent", name)
            tool = types.Tool(
                name=self._name("agent", name),
                title=cid,
                description=entry.description or f"Ask the agent {name}.",
                input_schema=AGENT_SCHEMA,
                output_schema=AGENT_RESULT_SCHEMA,
                annotations=types.ToolAnnotations(
                    title=cid,
                    read_only_hint=False,
                    destructive_hint=True,
                    idempotent_hint=False,
                    open_world_hint=True,
                ),
                _meta=self._meta("agent", name),
            )
            out.append(Entry(tool.name, "agent", name, tool))
        return out

    def _plan(self, name: str) -> Any:
        """A registered workflow's plan (compiled at registration), or None where it does not compile here."""
        try:
            return self._orc.workflow_plan(name)
        except IceError:
            return None

    def _builtin_entry(self, builtin: BuiltinTool) -> Entry:
        name = builtin.alias if (self._options.canonical_names and builtin.alias) else builtin.name
        meta, hints = {META_KEY: builtin.alias or builtin.name}, builtin.annotations
        if builtin.forwards_to_workflow and self._options.read_only:
            hints = READ_ONLY_START
        tool = types.Tool(
            name=name,
            title=builtin.alias or builtin.name,
            description=builtin.description,
            input_schema=builtin.input_schema,
            output_schema=builtin.output_schema,
            annotations=types.ToolAnnotations(
                read_only_hint=hints.read_only, destructive_hint=hints.destructive,
                idempotent_hint=hints.idempotent, open_world_hint=hints.open_world),
            _meta=meta,
        )
        return Entry(name, "builtin", builtin.name, tool, admin=builtin.admin, scope=f"ice:{builtin.scope}")

    def entries(self) -> list[Entry]:
        if self._entries is None:
            native = [Entry(name, "native", name, added.tool)
                      for name, added in sorted(self._options.additions.tools.items())]
            # An extension module's own tools first: they are what it was loaded for.
            entries = native + self._registry_entries() + [self._builtin_entry(b) for b in BUILTINS]
            by_name: dict[str, Entry] = {}
            for entry in entries:
                by_name.setdefault(entry.name, entry)
            self._entries = list(by_name.values())
            self._by_name = by_name
            self._by_id = {(e.kind, e.target): e for e in self._entries}
            self._large = len(self._searchable()) > self._options.catalogue_max
        return self._entries

    def _searchable(self) -> list[Entry]:
        """The workflows a caller may find: those the server lists (before the size cut) and would run."""
        assert self._entries is not None
        return [e for e in self._entries if e.kind == "workflow" and self._listed(e) and self.allowed(e)]

    # -- queries ---------------------------------------------------------------------------

    def _listed(self, entry: Entry) -> bool:
        ident = entry.tool.title or entry.name
        include, exclude = self._options.include, self._options.exclude
        if include and not any(
            fnmatch.fnmatchcase(n, p) for p in include for n in (entry.name, ident)
        ):
            return False
        return not any(fnmatch.fnmatchcase(n, p) for p in exclude for n in (entry.name, ident))

    def allowed(self, entry: Entry) -> bool:
        """On a read-only server only tools that declare readOnlyHint run (workflows: every node does)."""
        hints = entry.tool.annotations
        return not self._options.read_only or bool(hints is not None and hints.read_only_hint)

    def listed(self, *, admin: bool, scopes: frozenset[str] | None = None) -> list[types.Tool]:
        """What a caller may call: admin tools for an admin; with OAuth, only what its token's scopes allow;
        in a large catalogue, pinned workflows only and no trigger tools."""
        entries = self.entries()
        return [
            e.tool
            for e in entries
            if self._listed(e) and (admin or not e.admin) and self.allowed(e)
            and (scopes is None or e.scope in scopes) and (not self._large or self._kept_when_large(e))
        ]

    @staticmethod
    def _kept_when_large(entry: Entry) -> bool:
        if entry.kind == "workflow":
            return entry.pinned
        return entry.kind != "builtin" or entry.target not in UNLISTED_WHEN_LARGE

    @property
    def large(self) -> bool:
        """More workflows than `catalogue_max`: tools/list shows the pinned ones only."""
        self.entries()
        return self._large

    # -- workflow_search and workflow_start ------------------------------------------------

    def _search_index(self) -> SearchIndex:
        self.entries()  # a registry change drops both: the entries first, then the index built from them
        if self._index is None:
            workflows = self._orc.registry.workflows
            self._index = SearchIndex(search_doc(workflows[e.target].blueprint) for e in self._searchable()
                                      if e.target in workflows)
        return self._index

    def search(self, query: str, limit: int = 5) -> list[dict[str, Any]]:
        """workflow_search's results: the best workflows for `query`, best first, each with its tool and inputs."""
        results = []
        for hit in self._search_index().search(query, max(1, min(limit, SEARCH_LIMIT))):
            entry = self._by_id.get(("workflow", hit.name))
            if entry is not None:
                results.append({"name": hit.name, "description": (entry.tool.description or "")[:DESCRIPTION_CHARS],
                                "score": hit.score, "tool": entry.name, "inputs": entry.schema})
        return results

    def workflow(self, name: str) -> Entry:
        """workflow_start's workflow: by its name (its tool's name or canonical id do too); raises IceError
        `unknown_workflow` naming the closest ones."""
        self.entries()
        entry = self._by_id.get(("workflow", name))
        if entry is None and (found := self.resolve(name)) is not None and found.kind == "workflow":
            entry = found
        if entry is not None:
            return entry
        close = self._close_names(name)
        hint = f"; did you mean {', '.join(map(repr, close))}?" if close else ""
        raise IceError(f"unknown workflow {name!r}{hint} (workflow_search finds a workflow by what it does)",
                       code="unknown_workflow", details={"name": name, "suggestions": close})

    def _close_names(self, name: str, count: int = 3) -> list[str]:
        """Names spelled like `name`, then names its words find (a guessed name is often a description)."""
        names = [e.target for e in self._searchable()]
        close = difflib.get_close_matches(name, names, n=count, cutoff=0.6)
        close += [hit.name for hit in self._search_index().search(name, count)]
        return list(dict.fromkeys(close))[:count]

    def resolve(self, name: str) -> Entry | None:
        """Find a tool by advertised name, canonical id (`workflow:x`) or alias (`network.execute`)."""
        self.entries()
        entry = self._by_name.get(name) or self._by_name.get(self._long_names.get(name, ""))
        if entry is not None:
            return entry
        if name in ALIASES:
            return self._by_id.get(("builtin", ALIASES[name]))
        if name in BY_NAME:
            return self._by_id.get(("builtin", name))
        parsed = parse_canonical(name)
        if parsed is not None:
            return self._by_id.get(parsed)
        for kind in ("workflow", "tool", "agent"):
            # The `_` form even when canonical names are advertised.
            prefix = f"{kind}_"
            if name.startswith(prefix) and (found := self._by_id.get((kind, name[len(prefix) :]))):
                return found
        return None

    def names(self) -> list[str]:
        return [e.name for e in self.entries()]

    def input_schema(self, name: str) -> dict[str, Any] | None:
        entry = self.resolve(name)
        return entry.schema if entry is not None else None


def workflow_inputs_schema(blueprint: Any, plan: Any) -> dict[str, Any]:
    """A workflow's inputs as its tool's inputSchema, closed (`additionalProperties: false`) when the server
    refuses inputs the blueprint does not declare (plan.prepare_inputs), so strict clients know it too."""
    schema = flatten_schema(blueprint.inputs)
    if plan is not None and plan.declared_inputs is not None:
        schema["additionalProperties"] = False
    return schema


def search_doc(blueprint: Any) -> SearchDoc:
    """What workflow_search reads of a blueprint: name, description, input names (with their descriptions)
    and tags (`tags`, and the older `metadata.tags`: a list or a comma-separated string)."""
    properties = blueprint.inputs.get("properties") if isinstance(blueprint.inputs, dict) else None
    inputs = tuple(f"{key} {spec.get('title') or ''} {spec.get('description') or ''}" if isinstance(spec, dict)
                   else str(key) for key, spec in (properties or {}).items()) if isinstance(properties, dict) else ()
    tags = blueprint.metadata.get("tags") if isinstance(blueprint.metadata, dict) else None
    if isinstance(tags, str):
        tags = tags.split(",")
    kept = tuple(str(tag) for tag in tags) if isinstance(tags, list) else ()
    return SearchDoc(blueprint.name, blueprint.description or "", inputs, (*blueprint.tags, *kept))
