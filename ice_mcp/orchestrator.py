"""The orchestrator's public face: validate, register, start, watch, cancel and look up runs."""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import os
import sys
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from ice_mcp.blueprint.issues import ValidationIssue, ValidationReport, nearest
from ice_mcp.blueprint.models import Blueprint, NetworkManifest
from ice_mcp.engine.context import RunContext, Sleep, Spend, check_fits
from ice_mcp.engine.events import Event, EventLog, Listener
from ice_mcp.engine.metrics import Metrics
from ice_mcp.engine.plan import Plan
from ice_mcp.engine.records import RunRecord
from ice_mcp.engine.runner import Runner
from ice_mcp.engine.store import RunStore
from ice_mcp.engine.workflows import check_blueprint, compile_plan, plan_for
from ice_mcp.errors import BlueprintInvalid, IceError, InputsInvalid, UnknownName
from ice_mcp.services import Services, Settings
from ice_mcp.tools.builtin import register_builtin_tools
from ice_mcp.tools.registry import DEFAULT_REGISTRY, Registry

Target = str | Blueprint | Mapping[str, Any] | Path
RECENT_RUNS = 512
# Who is asking: set by the MCP layer per request (a hash of the bearer token, or "local").
CURRENT_CALLER: ContextVar[str | None] = ContextVar("ice_mcp_caller", default=None)


class RunHandle:
    """A run in progress (or finished): its live record, its events, and a way to wait or cancel."""

    def __init__(self, record: RunRecord, events: EventLog, task: asyncio.Task[RunRecord] | None) -> None:
        self.record = record
        self.events = events
        self._task = task

    @property
    def run_id(self) -> str:
        return self.record.run_id

    @property
    def done(self) -> bool:
        return self._task is None or self._task.done()

    def subscribe(self, listener: Listener) -> None:
        self.events.listeners.append(listener)

    async def wait(self, timeout: float | None = None) -> RunRecord:
        """The record once the run ends, or as it stands after `timeout` seconds (the run goes on)."""
        if self._task is not None and not self._task.done():
            await asyncio.wait({self._task}, timeout=timeout)
        return self.record

    def cancel(self) -> bool:
        """Ask the run to stop: every running node is cancelled; the record ends `cancelled`."""
        if self._task is None or self._task.done():
            return False
        return self._task.cancel()


class Orchestrator:
    def __init__(
        self,
        *,
        registry: Registry | None = None,
        settings: Settings | None = None,
        store: RunStore | None = None,
        builtin_tools: bool = True,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        self.settings = settings or Settings.from_env()
        self.registry = registry if registry is not None else DEFAULT_REGISTRY
        if builtin_tools:
            register_builtin_tools(self.registry)
        self.services = Services(self.registry, self.settings)
        if store is None and self.settings.persist_runs:
            store = RunStore.in_data_dir(self.settings.data_dir)
        self.store = store
        self.sleep = sleep  # backoff between retries; tests pass a recorder
        self.metrics = Metrics()
        self.runner = Runner()
        self._handles: OrderedDict[str, RunHandle] = OrderedDict()
        self._keys: dict[str, str] = {}
        self._callers: dict[str, Spend] = {}

    # -- blueprints and the catalogue ---------------------------------------

    def validate(self, source: Target) -> ValidationReport:
        """Every problem at once, as structured issues, plus a cost estimate. Never raises."""
        return check_blueprint(source, self.services)[0]

    def compile(self, source: Target) -> Plan:
        return compile_plan(source, self.services)

    def register_blueprint(self, source: Target, *, origin: str = "runtime") -> Blueprint:
        """Validate and register a workflow (replacing one of the same name); raises BlueprintInvalid."""
        plan = self.compile(source)
        entry = self.registry.add_workflow(plan.blueprint, origin)
        entry.plan = plan
        return plan.blueprint

    def remove_workflow(self, name: str) -> bool:
        return self.registry.remove("workflow", name)

    def load_blueprints(self, folder: Path | str) -> list[ValidationIssue]:
        """Register every blueprint in a folder; returns the problems of those that failed."""
        problems: list[ValidationIssue] = []
        paths = sorted(p for p in Path(folder).glob("*") if p.suffix in (".json", ".yaml", ".yml"))
        pending = list(paths)
        # Blueprints may use each other as workflow nodes: retry until no more register.
        while pending:
            failed: list[tuple[Path, BlueprintInvalid]] = []
            for path in pending:
                try:
                    self.register_blueprint(path, origin=str(path))
                except BlueprintInvalid as exc:
                    failed.append((path, exc))
            if len(failed) == len(pending):
                for path, invalid in failed:
                    problems.extend(e.model_copy(update={"message": f"{path.name}: {e.message}"})
                                    for e in invalid.report.errors)
                break
            pending = [path for path, _ in failed]
        return problems

    # -- runs ---------------------------------------------------------------

    async def start(
        self,
        target: Target | Plan,
        inputs: Mapping[str, Any] | None = None,
        *,
        idempotency_key: str | None = None,
        on_event: Listener | None = None,
        globals: Mapping[str, Any] | None = None,
        parent_spend: Spend | None = None,
    ) -> RunHandle:
        """Start a run and return at once. Raises BlueprintInvalid, InputsInvalid or UnknownName."""
        if idempotency_key:
            existing = self._by_key(idempotency_key)
            if existing is not None:
                if on_event is not None and not existing.done:
                    existing.subscribe(on_event)
                return existing
        plan = target if isinstance(target, Plan) else self._plan(target)
        parent_spend = parent_spend or self.caller_spend()
        check_fits(plan.estimate, parent_spend, plan.name)
        inputs, problems = plan.prepare_inputs(inputs or {})
        if problems:
            raise InputsInvalid("; ".join(f"{p['path']}: {p['message']}" for p in problems),
                                details={"errors": problems})
        record = RunRecord(run_id=uuid.uuid4().hex, workflow=plan.name, inputs=inputs)
        listeners: list[Listener] = [self.metrics.observe]
        if on_event is not None:
            listeners.append(on_event)
        events = EventLog(record.run_id, listeners)
        spend = Spend(budget_usd=plan.blueprint.budget_usd, parent=parent_spend)
        ctx = RunContext(record.run_id, self.services, events, spend, self.runner, sleep=self.sleep,
                         globals=dict(globals or {}))
        if self.store is not None:
            self.store.save(record, idempotency_key=idempotency_key)
        task = asyncio.get_running_loop().create_task(self._execute(plan, record, ctx, idempotency_key))
        handle = RunHandle(record, events, task)
        task.add_done_callback(lambda t: self._finalize(t, handle))
        self._remember(handle, idempotency_key)
        return handle

    async def run(self, target: Target | Plan, inputs: Mapping[str, Any] | None = None, **options: Any) -> RunRecord:
        """Run to the end and return the record. Cancelling the caller cancels the run."""
        handle = await self.start(target, inputs, **options)
        try:
            return await handle.wait()
        except asyncio.CancelledError:
            handle.cancel()
            await asyncio.shield(handle.wait())
            raise

    async def _execute(self, plan: Plan, record: RunRecord, ctx: RunContext, key: str | None) -> RunRecord:
        try:
            return await self.runner.execute(plan, record, ctx)
        finally:
            if self.store is not None:
                self.store.save(record, idempotency_key=key, events=ctx.events.events)

    def _finalize(self, task: asyncio.Task[RunRecord], handle: RunHandle) -> None:
        # A run cancelled before its first step, or whose task died, never closed its record: close it here.
        if handle.record.status != "running":
            return
        if task.cancelled():
            handle.record.status = "cancelled"
            handle.record.error = {"code": "cancelled", "message": "the run was cancelled before it started"}
        else:
            exc = task.exception()
            handle.record.status = "failed"
            handle.record.error = {"code": "internal_error", "message": f"{type(exc).__name__}: {exc}"}
        if self.store is not None:
            self.store.save(handle.record, events=handle.events.events)

    def _plan(self, target: Target) -> Plan:
        if isinstance(target, str) and target in self.registry.workflows:
            return plan_for(self.services, target)
        if isinstance(target, str) and _is_name(target):
            raise UnknownName("workflow", target, nearest(target, self.registry.workflows))
        return self.compile(target)

    def _remember(self, handle: RunHandle, key: str | None) -> None:
        self._handles[handle.run_id] = handle
        if key:
            self._keys[key] = handle.run_id
        while len(self._handles) > RECENT_RUNS:
            oldest_id, oldest = next(iter(self._handles.items()))
            if not oldest.done:
                break
            del self._handles[oldest_id]

    def _by_key(self, key: str) -> RunHandle | None:
        run_id = self._keys.get(key) or (self.store.by_idempotency_key(key) if self.store else None)
        if run_id is None:
            return None
        handle = self._handles.get(run_id)
        if handle is None:
            record = self.get_run(run_id)
            handle = RunHandle(record, EventLog(run_id), None) if record else None
        return handle

    def caller_spend(self, caller: str | None = None) -> Spend | None:
        """The running spend of a caller (default: the current one) against `caller_budget_usd`."""
        caller = caller or CURRENT_CALLER.get()
        if caller is None or self.settings.caller_budget_usd is None:
            return None
        spend = self._callers.get(caller)
        if spend is None:
            spend = self._callers[caller] = Spend(budget_usd=self.settings.caller_budget_usd)
        return spend

    def recover_interrupted_runs(self) -> int:
        """At server start: runs left `running` by a process that died are marked failed."""
        return self.store.mark_interrupted() if self.store is not None else 0

    def get_handle(self, run_id: str) -> RunHandle | None:
        return self._handles.get(run_id)

    def get_run(self, run_id: str) -> RunRecord | None:
        handle = self._handles.get(run_id)
        if handle is not None:
            return handle.record
        return self.store.get(run_id) if self.store is not None else None

    def run_events(self, run_id: str) -> list[dict[str, Any]]:
        handle = self._handles.get(run_id)
        if handle is not None:
            return [event.to_dict() for event in handle.events.events]
        return self.store.events(run_id) if self.store is not None else []

    def list_runs(self, *, status: str | None = None, workflow: str | None = None, limit: int = 50) -> list[RunRecord]:
        if self.store is not None:
            stored = {r.run_id: r for r in self.store.list(status=status, workflow=workflow, limit=limit)}
        else:
            stored = {}
        live = [h.record for h in self._handles.values()
                if (status is None or h.record.status == status) and (workflow is None or h.record.workflow == workflow)]
        merged = {**stored, **{r.run_id: r for r in live}}
        return sorted(merged.values(), key=lambda r: r.started_at or 0, reverse=True)[:limit]

    async def cancel(self, run_id: str) -> bool:
        handle = self._handles.get(run_id)
        if handle is None or not handle.cancel():
            return False
        await handle.wait()
        return True

    def validate_network(self, manifest: NetworkManifest | str | Path | Mapping[str, Any], *,
                         from_client: bool = True, base_dir: Path | None = None) -> ValidationReport:
        """Every problem of a network manifest (refs, `after`, templates, cycles); never raises."""
        from ice_mcp.engine.network import NetworkRunner

        try:
            NetworkRunner(self, from_client=from_client, base_dir=base_dir).check(manifest)
        except BlueprintInvalid as exc:
            return exc.report
        except IceError as exc:
            return ValidationReport(ok=False, errors=[ValidationIssue(code=exc.code, message=exc.message)])
        return ValidationReport(ok=True)

    async def run_network(self, manifest: NetworkManifest | str | Path | Mapping[str, Any], *,
                          from_client: bool = True, base_dir: Path | None = None,
                          on_event: Callable[[Event], None] | None = None) -> dict[str, Any]:
        from ice_mcp.engine.network import NetworkRunner

        return await NetworkRunner(self, from_client=from_client, base_dir=base_dir).run(manifest, on_event=on_event)

    def close(self) -> None:
        """Close the store (for short-lived callers with no runs in flight, like the CLI)."""
        if self.store is not None:
            self.store.close()

    async def aclose(self) -> None:
        for handle in list(self._handles.values()):
            handle.cancel()
        await asyncio.gather(*(h.wait() for h in self._handles.values()), return_exceptions=True)
        await self.services.aclose()
        if self.store is not None:
            self.store.close()


def _is_name(text: str) -> bool:
    return text.isidentifier() and "\n" not in text


def import_tool_modules(modules: Iterable[str] = ()) -> list[str]:
    """Import the user's tool modules (`--tools`, and ICE_MCP_TOOLS: comma-separated).

    A module name is looked up from the current folder too (as `python -m` does); a path
    to a `.py` file is loaded from that file. Raises IceError(code="tools_import_error").
    """
    names = [m for m in modules if m]
    names += [m.strip() for m in os.environ.get("ICE_MCP_TOOLS", "").split(",") if m.strip()]
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    for name in names:
        try:
            if name.endswith(".py"):
                path = Path(name).resolve()
                spec = importlib.util.spec_from_file_location(path.stem, path)
                if spec is None or spec.loader is None:
                    raise ImportError(f"cannot load {path}")
                module = importlib.util.module_from_spec(spec)
                sys.modules[path.stem] = module
                spec.loader.exec_module(module)
            else:
                importlib.import_module(name)
        except Exception as exc:
            raise IceError(f"cannot import tools from {name!r}: {type(exc).__name__}: {exc}",
                           code="tools_import_error") from exc
    return names
