"""Explicit wiring: registries and node types per orchestrator, typed services, one error family,
plans compiled once, idempotency keys that expire."""

from __future__ import annotations

import asyncio
import importlib
import inspect
import pkgutil
from collections.abc import Iterator
from contextvars import ContextVar
from pathlib import Path
from typing import Any

import pytest

import ice_mcp
from ice_mcp import (
    DEFAULT_REGISTRY,
    IceError,
    NodeCall,
    NodeResult,
    NodeType,
    Orchestrator,
    Registry,
    Settings,
    default_orchestrator,
    tool,
)
from ice_mcp.blueprint.models import Blueprint
from ice_mcp.run_handles import ExpiringKeys

from .helpers import blueprint
from .helpers import tool as tool_node


def every_module() -> list[Any]:
    """Every module of the package but the sandbox's guest-side worker and the CLI entry points."""
    names = [info.name for info in pkgutil.walk_packages(ice_mcp.__path__, "ice_mcp.")
             if not info.name.endswith(("__main__", "sandbox.worker"))]
    return [importlib.import_module(name) for name in names]


def test_every_exception_of_the_package_is_an_ice_error() -> None:
    classes = {cls for module in every_module() for _, cls in inspect.getmembers(module, inspect.isclass)
               if issubclass(cls, BaseException) and cls.__module__.startswith("ice_mcp")}
    assert len(classes) >= 20
    assert [cls.__qualname__ for cls in classes if not issubclass(cls, IceError)] == []


def test_the_context_variables_are_the_tool_call_the_principal_and_two_inside_their_own_modules() -> None:
    names = {value.name for module in every_module() for value in vars(module).values()
             if isinstance(value, ContextVar)}
    # The tool call crosses layers (a tool's signature is its author's), and so does the acting principal
    # (set where a request enters, read at the orchestrator's one choke point for lookups); the render budget
    # and the client of the HTTP request being served stay inside the module that sets them.
    assert names == {"ice_mcp_tool_call", "ice_mcp_acting", "ice_mcp_render_budget", "ice_mcp_session_client"}


def test_an_orchestrator_leaves_the_default_registry_alone(settings: Settings) -> None:
    before = {kind: set(getattr(DEFAULT_REGISTRY, kind)) for kind in ("tools", "agents", "workflows")}
    orc = Orchestrator(settings=settings)
    orc.register_blueprint(blueprint(tool_node("s", "sleep", {"seconds": 0}), name="mine"))
    assert {kind: set(getattr(DEFAULT_REGISTRY, kind)) for kind in ("tools", "agents", "workflows")} == before
    assert "sleep" in orc.registry.tools and "mine" in orc.registry.workflows
    orc.close()


@pytest.fixture
def module_api(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A fresh default orchestrator on a temporary data folder; the default registry restored afterwards."""
    monkeypatch.setenv("ICE_MCP_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setattr(ice_mcp, "_default", None)
    saved = {kind: dict(getattr(DEFAULT_REGISTRY, kind)) for kind in ("tools", "agents", "workflows")}
    yield
    for kind, entries in saved.items():
        table = getattr(DEFAULT_REGISTRY, kind)
        table.clear()
        table.update(entries)


async def test_the_default_orchestrator_reads_tools_decorated_later(module_api: None) -> None:
    assert (await ice_mcp.run(blueprint(tool_node("s", "sleep", {"seconds": 0})))).status == "succeeded"

    @tool
    def ice_wiring_late_tool(x: int) -> int:
        return x + 1

    record = await ice_mcp.run(blueprint(tool_node("t", "ice_wiring_late_tool", {"x": 1})))
    assert record.outputs == {"t": {"result": 2}}
    assert "sleep" not in DEFAULT_REGISTRY.tools  # the built-ins live in the default orchestrator's own registry
    await default_orchestrator().aclose()


async def test_node_types_are_the_orchestrators_own(registry: Registry, settings: Settings) -> None:
    seen: list[str] = []

    async def loud_condition(call: NodeCall) -> NodeResult:
        seen.append(call.node_path)
        return NodeResult({"result": True})

    registry.add_tool(lambda: {"ok": True}, name="ok")
    plain = Orchestrator(registry=registry, settings=settings)
    custom = Orchestrator(registry=registry, settings=settings, store=plain.store,
                          node_types=[*plain.node_types.values(), NodeType("condition", loud_condition)])
    bp = blueprint({"id": "c", "type": "condition", "expression": "false", "true_path": ["t"]},
                   tool_node("t", "ok"))
    assert (await plain.run(bp)).nodes["t"].status == "skipped"
    assert (await custom.run(bp)).nodes["t"].status == "succeeded" and seen == ["c"]
    assert set(plain.node_types) == {"tool", "condition", "loop", "parallel", "workflow", "llm", "agent", "code",
                                     "recursive", "human"}
    await plain.aclose()


async def test_services_are_typed_and_created_once(orc: Orchestrator) -> None:
    assert orc.services.llm is orc.services.llm
    assert orc.services.memory() is orc.services.memory("memory")
    assert orc.services.memory("memory://") is not orc.services.memory()  # one store per URL asked for


async def test_a_blueprint_object_is_compiled_once(orc: Orchestrator, registry: Registry) -> None:
    registry.add_tool(lambda value=None: {"value": value}, name="echo")
    bp = Blueprint.model_validate(blueprint(tool_node("a", "echo", {"value": "{{ inputs.x }}-1"})))
    plan = orc.compile(bp)
    first = await orc.start(bp, {"x": "p"})
    second = await orc.start(bp, {"x": "q"})
    assert first.plan is plan and second.plan is plan
    assert (await second.wait()).outputs == {"a": {"value": "q-1"}}
    registry.add_tool(lambda: {}, name="other")  # the catalogue changed: what a check said may have too
    assert orc.compile(bp) is not plan


def test_expiring_keys_expire_and_stay_bounded() -> None:
    now = [0.0]
    keys: ExpiringKeys[str] = ExpiringKeys(10.0, limit=3, clock=lambda: now[0])
    keys.put("a", "run-a")
    now[0] = 5.0
    keys.put("b", "run-b")
    assert keys.get("a") == "run-a"
    now[0] = 10.0
    assert keys.get("a") is None and keys.get("b") == "run-b"
    for key in "cdef":
        keys.put(key, f"run-{key}")
    assert len(keys) == 3 and keys.get("b") is None and keys.get("f") == "run-f"


@pytest.mark.parametrize("persist", [False, True])
async def test_an_idempotency_key_attaches_until_it_expires(registry: Registry, tmp_path: Path,
                                                            persist: bool) -> None:
    registry.add_tool(lambda: {"ok": True}, name="ok")
    orc = Orchestrator(registry=registry, settings=Settings(data_dir=tmp_path, persist_runs=persist,
                                                            idempotency_key_seconds=0.2))
    bp = blueprint(tool_node("a", "ok"))
    first = await orc.start(bp, idempotency_key="k")
    again = await orc.start(bp, idempotency_key="k")
    assert again is first
    await first.wait()
    await asyncio.sleep(0.3)
    later = await orc.start(bp, idempotency_key="k")
    assert later.run_id != first.run_id
    await later.wait()
    await orc.aclose()
