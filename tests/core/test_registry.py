"""The registry and the `@tool` decorator: forms, schemas from type hints, argument checking."""

from __future__ import annotations

from typing import Annotated, Any

import pytest
from pydantic import BaseModel, Field

from ice_mcp import NodeFailure, Orchestrator, Registry, Tool, ToolAnnotations, UnknownName, tool

from .helpers import blueprint
from .helpers import tool as tool_node


def test_bare_decorator(registry: Registry) -> None:
    @tool(registry=registry)
    def add(a: int, b: int = 2) -> int:
        """Add two numbers.

        Longer text that is not part of the description."""
        return a + b

    entry = registry.tools["add"]
    assert add(1) == 3  # the function is returned unchanged
    assert entry.description == "Add two numbers."
    assert entry.is_async is False
    assert entry.input_schema == {
        "additionalProperties": False,
        "properties": {"a": {"title": "A", "type": "integer"}, "b": {"default": 2, "title": "B", "type": "integer"}},
        "required": ["a"], "type": "object"}


def test_plain_bare_decorator_uses_the_default_registry() -> None:
    from ice_mcp import DEFAULT_REGISTRY

    def ice_core_test_tool_xyz() -> int:
        return 1

    try:
        assert tool(ice_core_test_tool_xyz) is ice_core_test_tool_xyz
        assert "ice_core_test_tool_xyz" in DEFAULT_REGISTRY.tools
    finally:
        DEFAULT_REGISTRY.remove("tool", "ice_core_test_tool_xyz")
    assert "ice_core_test_tool_xyz" not in DEFAULT_REGISTRY.tools


def test_named_decorator_and_options(registry: Registry) -> None:
    @tool("fetch_page", registry=registry, description="Fetch it.", annotations=ToolAnnotations(read_only=True),
          blocking=True)
    def whatever(url: str) -> str:
        return url

    entry = registry.tools["fetch_page"]
    assert "whatever" not in registry.tools
    assert entry.description == "Fetch it."
    assert entry.annotations == ToolAnnotations(read_only=True)
    assert entry.blocking is True


async def test_async_and_sync_tools(registry: Registry) -> None:
    @tool(registry=registry)
    async def slow_upper(text: str) -> str:
        return text.upper()

    @tool(registry=registry)
    def fast_lower(text: str) -> str:
        return text.lower()

    assert registry.tools["slow_upper"].is_async is True
    assert await registry.tools["slow_upper"].invoke({"text": "ab"}) == {"result": "AB"}
    assert await registry.tools["fast_lower"].invoke({"text": "AB"}) == {"result": "ab"}


async def test_blocking_tool_runs_in_a_worker_thread(registry: Registry) -> None:
    import threading

    main = threading.get_ident()

    @tool(registry=registry, blocking=True)
    def where() -> dict[str, bool]:
        return {"other_thread": threading.get_ident() != main}

    assert await registry.tools["where"].invoke({}) == {"other_thread": True}


async def test_class_form(registry: Registry) -> None:
    @tool(registry=registry)
    class Counter(Tool):
        """Counts calls."""

        name = "counter"
        annotations = ToolAnnotations(idempotent=False)

        def __init__(self) -> None:
            self.calls = 0

        def run(self, step: int = 1) -> dict[str, int]:
            self.calls += step
            return {"calls": self.calls}

    entry = registry.tools["counter"]
    assert entry.description == "Counts calls."
    assert entry.input_schema["properties"] == {"step": {"default": 1, "title": "Step", "type": "integer"}}
    assert await entry.invoke({}) == {"calls": 1}
    assert await entry.invoke({"step": 5}) == {"calls": 6}

    class Doubler(Tool):
        async def run(self, n: int) -> int:
            return n * 2

    registry.add_tool(Doubler())
    assert registry.tools["doubler"].is_async
    assert await registry.tools["doubler"].invoke({"n": 4}) == {"result": 8}


class Point(BaseModel):
    x: float
    y: float


def test_schema_from_type_hints(registry: Registry) -> None:
    def shapes(names: list[str], weights: dict[str, float], point: Point, maybe: int | None = None,
               flag: bool = False, anything: Any = None) -> dict[str, Any]:
        return {}

    schema = registry.add_tool(shapes).input_schema
    props = schema["properties"]
    assert props["names"] == {"items": {"type": "string"}, "title": "Names", "type": "array"}
    assert props["weights"] == {"additionalProperties": {"type": "number"}, "title": "Weights", "type": "object"}
    assert props["point"] == {"$ref": "#/$defs/Point"}
    assert schema["$defs"]["Point"]["required"] == ["x", "y"]
    assert props["maybe"] == {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": None, "title": "Maybe"}
    assert props["flag"] == {"default": False, "title": "Flag", "type": "boolean"}
    assert schema["required"] == ["names", "weights", "point"]


def _bounded(n: Annotated[int, Field(ge=0, le=10, description="how many")]) -> int:
    return n


async def test_annotated_constraints_reach_the_schema(registry: Registry) -> None:
    # regression: get_type_hints without include_extras dropped Annotated constraints
    entry = registry.add_tool(_bounded, name="bounded")
    assert entry.input_schema["properties"]["n"] == {"description": "how many", "maximum": 10, "minimum": 0,
                                                     "title": "N", "type": "integer"}
    assert await entry.invoke({"n": 10}) == {"result": 10}
    with pytest.raises(NodeFailure) as info:
        await entry.invoke({"n": 11})
    assert info.value.code == "invalid_arguments"


@pytest.mark.parametrize(("arguments", "problem"), [
    ({"a": "x"}, "a: Input should be a valid integer, unable to parse string as an integer"),
    ({}, "a: Field required"),
    ({"a": 1, "zzz": 2}, "zzz: unknown argument"),
    ({"aa": 1}, "a: Field required; aa: unknown argument; did you mean 'a'?"),
])
async def test_bad_arguments_are_invalid_arguments(registry: Registry, arguments: dict[str, Any],
                                                   problem: str) -> None:
    registry.add_tool(_typed_ident, name="ident")
    with pytest.raises(NodeFailure) as info:
        await registry.tools["ident"].invoke(arguments)
    assert info.value.code == "invalid_arguments"
    assert info.value.retryable is False
    assert info.value.message == f"invalid arguments for tool 'ident': {problem}"
    assert info.value.details["errors"][0]["type"] in {"int_parsing", "missing", "extra_forbidden"}


def _typed_ident(a: int) -> int:
    return a


async def test_bad_arguments_in_a_run(orc: Orchestrator, registry: Registry) -> None:
    registry.add_tool(_typed_ident, name="ident")
    record = await orc.run(blueprint(tool_node("i", "ident", {"a": "{{ inputs.a }}"}, retries=3,
                                               backoff_seconds=0)), {"a": "nope"})
    assert record.status == "failed"
    assert record.nodes["i"].error["code"] == "invalid_arguments"
    assert record.nodes["i"].attempts == 1  # never retried


def test_lookups_suggest_the_nearest_name(registry: Registry) -> None:
    registry.add_tool(_typed_ident, name="identity")
    with pytest.raises(UnknownName) as info:
        registry.tool("identty")
    assert info.value.code == "unknown_tool"
    assert info.value.message == "unknown tool 'identty'; did you mean 'identity'?"
    with pytest.raises(UnknownName) as info:
        registry.workflow("x")
    assert info.value.code == "unknown_workflow"
    with pytest.raises(UnknownName):
        registry.agent("x")


def test_listeners_remove_iter_and_copy(registry: Registry) -> None:
    changes: list[tuple[str, str]] = []
    unsubscribe = registry.subscribe(lambda kind, name: changes.append((kind, name)))
    registry.add_tool(_typed_ident, name="b_tool")
    registry.add_agent("helper", {"model": "m"}, "helps")
    copy = registry.copy()
    assert registry.remove("tool", "b_tool") is True
    assert registry.remove("tool", "b_tool") is False
    unsubscribe()
    registry.add_tool(_typed_ident, name="quiet")
    assert changes == [("tool", "b_tool"), ("agent", "helper"), ("tool", "b_tool")]
    assert list(registry) == [("tool", "quiet"), ("agent", "helper")]
    assert "b_tool" in copy.tools and "quiet" not in copy.tools
    assert registry.agents["helper"].description == "helps"


async def test_tool_returning_a_model_is_dumped(registry: Registry) -> None:
    class Out(BaseModel):
        total: float

    registry.add_tool(lambda: Out(total=1.5), name="model_tool")
    assert await registry.tools["model_tool"].invoke({}) == {"total": 1.5}
