"""The registry of tools, agents and workflows (one per orchestrator), and the `@tool` decorator.

`@tool` collects into DEFAULT_REGISTRY, which only the default orchestrator reads (live, beneath
its own registry); other orchestrators get the registry they are given, or a copy the caller makes."""

from __future__ import annotations

import asyncio
import inspect
from collections import ChainMap
from collections.abc import Callable, Iterator, MutableMapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar, cast, get_type_hints, overload

from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from ice_mcp.blueprint.issues import nearest
from ice_mcp.blueprint.schemas import SchemaInvalid, schema_validator
from ice_mcp.errors import NodeFailure, UnknownName
from ice_mcp.types import Effects

if TYPE_CHECKING:
    from ice_mcp.blueprint.models import Blueprint
    from ice_mcp.core.plan import Plan

ToolFunction = Callable[..., Any]
K = TypeVar("K")
V = TypeVar("V")
_ABSENT: Any = object()


class Layered(ChainMap[K, V]):
    """A ChainMap of this registry's own table over its parent's (live), whose lookups skip ChainMap's
    generic search: compiling and running look a tool up per node, a ChainMap lookup costs ~0.8 µs."""

    def __getitem__(self, key: K) -> V:
        for mapping in self.maps:
            value = mapping.get(key, _ABSENT)
            if value is not _ABSENT:
                return value
        raise KeyError(key)

    def get(self, key: K, default: Any = None) -> Any:
        for mapping in self.maps:
            value = mapping.get(key, _ABSENT)
            if value is not _ABSENT:
                return value
        return default

    def __contains__(self, key: object) -> bool:
        return self.get(cast(K, key), _ABSENT) is not _ABSENT


@dataclass(frozen=True, slots=True)
class ToolAnnotations:
    """What a tool may do, for MCP annotations and workflow-level hints."""

    read_only: bool = False
    destructive: bool = False
    idempotent: bool = False
    open_world: bool = False

    def effects(self) -> Effects:
        """As a workflow's node counts them: a read-only tool is idempotent too."""
        return Effects(read_only=self.read_only, destructive=self.destructive,
                       idempotent=self.idempotent or self.read_only, open_world=self.open_world)


class _ArgsBase(BaseModel):
    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)


def _input_model(name: str, fn: ToolFunction) -> type[BaseModel]:
    signature = inspect.signature(fn)
    hints = get_type_hints(fn, include_extras=True)  # keep Annotated[..., Field(...)] constraints
    fields: dict[str, Any] = {}
    for param in signature.parameters.values():
        if param.name == "self" or param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        annotation = hints.get(param.name, Any)
        default = ... if param.default is inspect.Parameter.empty else param.default
        fields[param.name] = (annotation, default)
    return create_model(f"{name}_arguments", __base__=_ArgsBase, **fields)


_ANNOTATION_KEYWORDS = frozenset({"title", "description", "default", "examples", "deprecated"})


@dataclass(slots=True)
class ToolEntry:
    """A callable tool: validated arguments in, a JSON object out."""

    name: str
    description: str
    function: ToolFunction
    input_model: type[BaseModel]
    annotations: ToolAnnotations = ToolAnnotations()
    is_async: bool = False
    blocking: bool = False
    input_schema: dict[str, Any] = field(default_factory=dict)
    # Arguments whose schema constrains their value (an `Any` argument takes anything): what validation checks.
    constrained: frozenset[str] = frozenset()
    parameters: tuple[str, ...] = ()  # read once: pydantic's model_fields costs microseconds per access

    def __post_init__(self) -> None:
        self.parameters = tuple(self.input_model.model_fields)
        self.input_schema = self.input_model.model_json_schema()
        self.input_schema.pop("title", None)
        self.constrained = frozenset(name for name, schema in self.input_schema.get("properties", {}).items()
                                     if set(schema) - _ANNOTATION_KEYWORDS)

    @property
    def model_name(self) -> str:
        """Its name where only `[A-Za-z0-9_-]{1,64}` is accepted (models' tool lists, MCP clients)."""
        return self.name

    @property
    def properties(self) -> dict[str, Any]:
        return self.input_schema.get("properties", {})

    @property
    def required(self) -> list[str]:
        return self.input_schema.get("required", [])

    def parse_arguments(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """The tool's keyword arguments from JSON arguments; raises NodeFailure(invalid_arguments) naming each
        problem (an unknown argument with the nearest one the tool takes)."""
        if not arguments and not self.parameters:
            return {}
        try:
            parsed = self.input_model.model_validate(arguments)
        except ValidationError as exc:
            problems = "; ".join(self._problem(e) for e in exc.errors())
            raise NodeFailure(
                f"invalid arguments for tool {self.name!r}: {problems}",
                code="invalid_arguments",
                retryable=False,
                details={"errors": exc.errors(include_url=False, include_context=False, include_input=False)},
            ) from None
        return {key: getattr(parsed, key) for key in self.parameters}

    def _problem(self, error: Any) -> str:
        where = ".".join(str(p) for p in error["loc"]) or "(arguments)"
        if error["type"] == "extra_forbidden" and len(error["loc"]) == 1:
            hint = nearest(str(error["loc"][0]), self.parameters)
            return f"{where}: unknown argument" + (f"; did you mean {hint!r}?" if hint else "")
        return f"{where}: {error['msg']}"

    async def call(self, arguments: dict[str, Any]) -> Any:
        """Validate the arguments and call the tool; returns what the tool returned."""
        return await self.call_parsed(self.parse_arguments(arguments))

    async def call_parsed(self, kwargs: dict[str, Any]) -> Any:
        """Call the tool with arguments `parse_arguments` already checked."""
        if self.is_async:
            return await self.function(**kwargs)
        if self.blocking:
            return await asyncio.to_thread(self.function, **kwargs)
        return self.function(**kwargs)

    async def invoke(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """Call the tool and return its result as an object (what agents and MCP clients see)."""
        result = await self.call(arguments)
        output = getattr(result, "output", result)  # a metered tool's NodeResult
        return as_object(output)


class _AnyArguments(BaseModel):
    model_config = ConfigDict(extra="allow")


@dataclass(slots=True, eq=False)
class SchemaToolEntry(ToolEntry):
    """A tool described by a JSON Schema instead of a Python signature (a tool of an upstream MCP
    server): arguments are checked against `input_schema` and handed to `function` as one object."""

    input_model: type[BaseModel] = _AnyArguments  # unused: the schema is the contract
    server: str | None = None  # the upstream MCP server the tool belongs to
    safe_name: str = ""
    validator: Any = None  # None when the schema cannot be used here (the tool still checks its arguments)

    def __post_init__(self) -> None:
        schema = self.input_schema
        if schema.get("type") != "object" or not isinstance(schema.get("properties", {}), dict):
            schema = self.input_schema = {"type": "object", "properties": {}}
        self.parameters = tuple(schema.get("properties", {}))
        self.constrained = frozenset(name for name, sub in schema.get("properties", {}).items()
                                     if not isinstance(sub, dict) or set(sub) - _ANNOTATION_KEYWORDS)
        self.is_async = True
        self.safe_name = self.safe_name or self.name
        try:
            self.validator = schema_validator(schema)
        except SchemaInvalid:
            self.validator = None

    @property
    def model_name(self) -> str:
        return self.safe_name

    def parse_arguments(self, arguments: dict[str, Any]) -> dict[str, Any]:
        if self.validator is None:
            return dict(arguments)
        errors = sorted(self.validator.iter_errors(arguments), key=lambda e: [str(p) for p in e.absolute_path])
        if not errors:
            return dict(arguments)
        details = [self._detail(error, arguments) for error in errors[:20]]
        problems = "; ".join(f"{'.'.join(map(str, d['loc'])) or '(arguments)'}: {d['msg']}" for d in details)
        raise NodeFailure(f"invalid arguments for tool {self.name!r}: {problems}", code="invalid_arguments",
                          retryable=False, details={"errors": details})

    def _detail(self, error: Any, arguments: dict[str, Any]) -> dict[str, Any]:
        """A jsonschema error in the shape pydantic gives (`loc`, `msg`, `type`), read by validation."""
        loc = list(error.absolute_path)
        if error.validator == "required":
            return {"loc": loc, "msg": error.message[:300], "type": "missing"}
        if error.validator == "additionalProperties" and not loc:
            unknown = sorted(k for k in arguments if k not in self.properties)
            hint = nearest(unknown[0], self.parameters) if unknown else None
            return {"loc": unknown[:1], "type": "extra_forbidden",
                    "msg": "unknown argument" + (f"; did you mean {hint!r}?" if hint else "")}
        return {"loc": loc, "msg": error.message[:300], "type": str(error.validator)}

    def type_problem(self, argument: str, kinds: frozenset[str]) -> str | None:
        """Why a value of one of the JSON types `kinds` cannot be `argument`, when its schema names types."""
        wanted = self.properties.get(argument, {}).get("type") if isinstance(self.properties.get(argument), dict) \
            else None
        accepted = {wanted} if isinstance(wanted, str) else set(wanted) if isinstance(wanted, list) else None
        if not accepted:
            return None
        numeric = {"integer", "number"}
        if kinds & accepted or (kinds & numeric and accepted & numeric):
            return None
        return (f"argument {argument!r} is {' or '.join(sorted(map(str, accepted)))}, but its template renders "
                f"{' or '.join(sorted(kinds))}")

    async def call_parsed(self, kwargs: dict[str, Any]) -> Any:
        return await self.function(kwargs)


def as_object(value: Any) -> dict[str, Any]:
    """A node's output is an object: anything else is wrapped as `{"result": value}`."""
    if type(value) is dict:  # the usual output: no check against pydantic's metaclass
        return value
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json")
    return value if isinstance(value, dict) else {"result": value}


class Tool:
    """Base of class-form tools, for tools that hold state: set `name`, write `run`."""

    name: str = ""
    description: str = ""
    annotations: ToolAnnotations = ToolAnnotations()
    blocking: bool = False

    def run(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError


@dataclass(slots=True)
class AgentEntry:
    """A registered agent: its configuration (an InlineAgent-shaped dict) and description."""

    name: str
    description: str
    config: dict[str, Any]


@dataclass(slots=True)
class WorkflowEntry:
    name: str
    blueprint: Blueprint
    source: str = "runtime"
    plan: Plan | None = None  # compiled on first use
    version: int | None = None  # registered at run time: its version in the run store


Listener = Callable[[str, str], Any]


class Registry:
    """Everything runnable by name. Listeners hear of each change as (kind, name).

    With a `parent`, names the registry lacks are looked up there (live); additions and removals
    change only this registry.
    """

    def __init__(self, parent: Registry | None = None) -> None:
        self.tools: MutableMapping[str, ToolEntry] = {} if parent is None else Layered({}, parent.tools)
        self.agents: MutableMapping[str, AgentEntry] = {} if parent is None else Layered({}, parent.agents)
        self.workflows: MutableMapping[str, WorkflowEntry] = (
            {} if parent is None else Layered({}, parent.workflows))
        self._listeners: list[Listener] = []
        if parent is not None:
            parent.subscribe(self._changed)

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    def _changed(self, kind: str, name: str) -> None:
        for listener in list(self._listeners):
            listener(kind, name)

    def add_tool(
        self,
        function: ToolFunction | Tool,
        *,
        name: str | None = None,
        description: str | None = None,
        annotations: ToolAnnotations | None = None,
        blocking: bool | None = None,
    ) -> ToolEntry:
        if isinstance(function, Tool):
            instance = function
            entry_name = name or instance.name or type(instance).__name__.lower()
            target: ToolFunction = instance.run
            doc = description or instance.description or inspect.getdoc(type(instance)) or ""
            annotations = annotations or instance.annotations
            blocking = instance.blocking if blocking is None else blocking
        else:
            target = function
            entry_name = name or function.__name__
            doc = description or inspect.getdoc(function) or ""
        entry = ToolEntry(
            name=entry_name,
            description=doc.strip().split("\n\n")[0] if doc else entry_name,
            function=target,
            input_model=_input_model(entry_name, target),
            annotations=annotations or ToolAnnotations(),
            is_async=inspect.iscoroutinefunction(target),
            blocking=bool(blocking),
        )
        self.tools[entry_name] = entry
        self._changed("tool", entry_name)
        return entry

    def add(self, entry: ToolEntry) -> ToolEntry:
        """Register a tool entry built elsewhere (an upstream server's tool), replacing one of its name."""
        self.tools[entry.name] = entry
        self._changed("tool", entry.name)
        return entry

    def add_agent(self, name: str, config: dict[str, Any], description: str = "") -> AgentEntry:
        entry = AgentEntry(name, description or config.get("description", "") or name, config)
        self.agents[name] = entry
        self._changed("agent", name)
        return entry

    def add_workflow(self, blueprint: Blueprint, source: str = "runtime") -> WorkflowEntry:
        entry = WorkflowEntry(blueprint.name, blueprint, source)
        self.workflows[blueprint.name] = entry
        self._changed("workflow", blueprint.name)
        return entry

    def remove(self, kind: str, name: str) -> bool:
        tables: dict[str, MutableMapping[str, Any]] = {"tool": self.tools, "agent": self.agents,
                                                       "workflow": self.workflows}
        table = tables[kind]
        if table.pop(name, None) is None:
            return False
        self._changed(kind, name)
        return True

    def tool(self, name: str) -> ToolEntry:
        try:
            return self.tools[name]
        except KeyError:
            raise UnknownName("tool", name, nearest(name, self.tools)) from None

    def agent(self, name: str) -> AgentEntry:
        try:
            return self.agents[name]
        except KeyError:
            raise UnknownName("agent", name, nearest(name, self.agents)) from None

    def workflow(self, name: str) -> WorkflowEntry:
        try:
            return self.workflows[name]
        except KeyError:
            raise UnknownName("workflow", name, nearest(name, self.workflows)) from None

    def __iter__(self) -> Iterator[tuple[str, str]]:
        for kind, table in (("workflow", self.workflows), ("tool", self.tools), ("agent", self.agents)):
            for name in sorted(table):
                yield kind, name

    def copy(self) -> Registry:
        """A registry with the same entries as this one now (the parent's included), changed independently."""
        other = Registry()
        other.tools, other.agents, other.workflows = dict(self.tools), dict(self.agents), dict(self.workflows)
        return other


DEFAULT_REGISTRY = Registry()  # where `@tool` and `@agent` collect; read by the default orchestrator only


@overload
def tool(function: ToolFunction, /) -> ToolFunction: ...
@overload
def tool(
    name: str | None = None,
    /,
    *,
    description: str | None = None,
    annotations: ToolAnnotations | None = None,
    blocking: bool | None = None,
    registry: Registry | None = None,
) -> Callable[[Any], Any]: ...


def tool(
    name_or_function: Any = None,
    /,
    *,
    description: str | None = None,
    annotations: ToolAnnotations | None = None,
    blocking: bool | None = None,
    registry: Registry | None = None,
) -> Any:
    """Register a function (sync or async) or a `Tool` class as a tool.

    `@tool`, `@tool("name")`, `@tool(description=..., annotations=...)`. Type hints
    become the input schema. Sync functions run on the event loop unless
    `blocking=True`, which runs them in a worker thread.
    """
    target = registry or DEFAULT_REGISTRY

    def register(obj: Any, name: str | None) -> Any:
        if inspect.isclass(obj) and issubclass(obj, Tool):
            target.add_tool(obj(), name=name, description=description, annotations=annotations, blocking=blocking)
        else:
            target.add_tool(obj, name=name, description=description, annotations=annotations, blocking=blocking)
        return obj

    if callable(name_or_function) and not isinstance(name_or_function, str):
        return register(name_or_function, None)
    return lambda obj: register(obj, name_or_function)

