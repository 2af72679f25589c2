"""What each tool call does: translate MCP arguments to orchestrator calls and results to envelopes."""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Mapping
from typing import Any

import mcp_types as types
from jsonschema import exceptions as js_exceptions

from ice_mcp.blueprint.schemas import SchemaInvalid, schema_validator
from ice_mcp.errors import IceError
from ice_mcp.server.catalogue import Catalogue, Entry
from ice_mcp.server.documents import DocumentError, parse_document
from ice_mcp.server.edges import lone_surrogate
from ice_mcp.server.envelope import error_result, json_result, record_dict, run_result
from ice_mcp.server.options import ServerOptions
from ice_mcp.server.runs import Progress, run_and_wait, top_level_count

logger = logging.getLogger(__name__)

IDEMPOTENCY_META_KEYS = ("idempotency_key", "io.ice_mcp/idempotency_key", "idempotencyKey")
_SAFE = re.compile(r"[^a-z0-9_]")


class ArgumentsInvalid(Exception):
    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


_VALIDATORS: dict[int, tuple[Mapping[str, Any], Any]] = {}


def _validator(schema: Mapping[str, Any]) -> Any:
    """One validator per schema object (catalogue schemas live until the catalogue changes)."""
    found = _VALIDATORS.get(id(schema))
    if found is None or found[0] is not schema:
        if len(_VALIDATORS) > 1024:
            _VALIDATORS.clear()
        found = _VALIDATORS[id(schema)] = (schema, schema_validator(schema))
    return found[1]


def check_arguments(schema: Mapping[str, Any], arguments: Mapping[str, Any]) -> None:
    """Raise ArgumentsInvalid listing every problem (path: message)."""
    try:
        validator = _validator(schema)
        if validator.is_valid(arguments):
            return
        errors = sorted(validator.iter_errors(arguments), key=lambda e: list(e.absolute_path))
    except (SchemaInvalid, js_exceptions.SchemaError, TypeError, ValueError, RecursionError):
        return  # a schema the validator cannot use: the engine checks the inputs again
    if errors:
        problems = []
        for error in errors[:20]:
            where = "/".join(str(p) for p in error.absolute_path) or "(arguments)"
            problems.append(f"{where}: {error.message[:300]}")
        raise ArgumentsInvalid(problems)


def _ice_error(exc: IceError) -> types.CallToolResult:
    return error_result(exc.code, exc.message, exc.details)


def _slug(prefix: str, name: str) -> str:
    slug = _SAFE.sub("_", f"{prefix}_{name}".lower())
    return slug[:48] if slug[0].isalpha() else f"x{slug}"[:48]


class ToolCalls:
    def __init__(self, orc: Any, options: ServerOptions, catalogue: Catalogue) -> None:
        self._orc = orc
        self._options = options
        self._catalogue = catalogue
        self._networks: dict[str, asyncio.Task[dict[str, Any]]] = {}

    @property
    def catalogue(self) -> Catalogue:
        return self._catalogue

    def wait_budget(self, requested: Any) -> float:
        if (
            isinstance(requested, int | float)
            and not isinstance(requested, bool)
            and requested >= 0
        ):
            # Compare before converting: float() of a huge integer overflows.
            return float(min(requested, self._options.max_wait_seconds))
        return self._options.wait_seconds

    def refusal(self, entry: Entry) -> str | None:
        """Why this server will not run `entry` (read-only: only tools whose readOnlyHint is true)."""
        if self._catalogue.allowed(entry):
            return None
        return f"{entry.name} may change data (its readOnlyHint is false) and the server is read-only"

    @staticmethod
    def _key(arguments: Mapping[str, Any], meta: Mapping[str, Any]) -> str | None:
        key = arguments.get("idempotency_key")
        if key is None:
            key = next((meta[k] for k in IDEMPOTENCY_META_KEYS if meta.get(k) is not None), None)
        return None if key is None else str(key)[:200]

    async def call(
        self,
        entry: Entry,
        arguments: dict[str, Any],
        *,
        meta: Mapping[str, Any],
        admin: bool,
        report: Progress | None,
    ) -> types.CallToolResult:
        if (why := self.refusal(entry)) is not None:
            return error_result("forbidden", why)
        if (where := lone_surrogate(arguments)) is not None:
            return error_result(
                "invalid_arguments", f"{where}: a string holds a lone UTF-16 surrogate"
            )
        key = self._key(arguments, meta)
        if entry.kind != "builtin":
            arguments.pop("idempotency_key", None)
        try:
            if (
                entry.kind != "workflow"
            ):  # the orchestrator checks a workflow's inputs itself (InputsInvalid)
                check_arguments(entry.schema, arguments)
        except ArgumentsInvalid as exc:
            return error_result(
                "invalid_arguments",
                f"invalid arguments for {entry.name}: {exc}",
                {"problems": exc.problems},
            )
        try:
            if entry.kind == "workflow":
                bp = self._orc.registry.workflows[entry.target].blueprint
                return await self._run(entry.target, arguments, key, report, top_level_count(bp))
            if entry.kind == "tool":
                return await self._run(
                    self._tool_blueprint(entry.target, arguments), arguments, key, report, 1
                )
            if entry.kind == "agent":
                return await self._run(
                    self._agent_blueprint(entry.target), arguments, key, report, 1
                )
            return await self._builtin(entry, arguments, key, admin, report)
        except IceError as exc:
            return _ice_error(exc)
        except DocumentError as exc:
            return error_result("invalid_document", str(exc))
        except KeyError as exc:
            return error_result("unknown_name", f"not found: {exc.args[0]!s}")

    # -- runs -----------------------------------------------------------------------------

    async def _run(
        self,
        target: Any,
        inputs: dict[str, Any],
        key: str | None,
        report: Progress | None,
        total: int | None,
        wait: Any = None,
    ) -> types.CallToolResult:
        record = await run_and_wait(
            self._orc,
            target,
            inputs,
            wait_seconds=self.wait_budget(wait),
            idempotency_key=key,
            progress=report,
            total=total,
        )
        return run_result(record)

    @staticmethod
    def _tool_blueprint(name: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """A one-node blueprint calling the tool with exactly the arguments given."""
        return {
            "name": _slug("tool", name),
            "description": f"Direct call of the tool {name}",
            "inputs": {"type": "object"},
            "outputs": {"result": "{{ call }}"},
            "nodes": [
                {
                    "id": "call",
                    "type": "tool",
                    "tool_name": name,
                    "tool_args": {k: f"{{{{ inputs[{k!r}] }}}}" for k in arguments},
                }
            ],
        }

    @staticmethod
    def _agent_blueprint(name: str) -> dict[str, Any]:
        return {
            "name": _slug("agent", name),
            "description": f"Direct call of the agent {name}",
            "inputs": {
                "type": "object",
                "properties": {"input": {"type": "string"}},
                "required": ["input"],
            },
            "nodes": [
                {"id": "agent", "type": "agent", "agent": name, "input": "{{ inputs.input }}"}
            ],
            "outputs": {"text": "{{ agent.text }}", "result": "{{ agent }}"},
        }

    # -- built-in tools -------------------------------------------------------------------

    async def _builtin(
        self,
        entry: Entry,
        args: dict[str, Any],
        key: str | None,
        admin: bool,
        report: Progress | None,
    ) -> types.CallToolResult:
        name = entry.target
        orc = self._orc
        if entry.admin and not admin:
            why = (
                "the server is read-only" if self._options.read_only else "it needs the admin token"
            )
            return error_result("forbidden", f"{name} changes the catalogue and {why}")
        if name == "run_status":
            record = orc.get_run(args["run_id"])
            if record is None:
                return error_result("unknown_run", f"unknown run {args['run_id']!r}")
            return json_result(record_dict(record))
        if name == "run_result":
            return await self._run_result(args["run_id"], args.get("wait_seconds"))
        if name == "run_cancel":
            cancelled = await orc.cancel(args["run_id"])
            record = orc.get_run(args["run_id"])
            if record is None:
                return error_result("unknown_run", f"unknown run {args['run_id']!r}")
            data = record_dict(record)
            return json_result(
                {
                    "run_id": args["run_id"],
                    "cancelled": bool(cancelled),
                    "status": data.get("status"),
                }
            )
        if name == "run_retry":
            handle = await orc.retry(args["run_id"], args.get("from_node"))
            record = await handle.wait(timeout=self.wait_budget(args.get("wait_seconds")))
            return run_result(record)
        if name == "run_list":
            runs = orc.list_runs(
                status=args.get("status"),
                workflow=args.get("workflow"),
                limit=int(args.get("limit") or 50),
            )
            items = []
            for run in runs:
                data = record_dict(run)
                items.append(
                    {
                        k: data.get(k)
                        for k in ("run_id", "workflow", "status", "started_at", "duration_ms")
                    }
                )
            return json_result({"runs": items})
        # Parsing and compiling a large blueprint takes longer than an event-loop turn: a thread does it.
        if name == "blueprint_validate" or (name == "blueprint_register" and args.get("validate_only")):
            report_ = await asyncio.to_thread(lambda: orc.validate(parse_document(args["blueprint"])))
            return json_result(report_.model_dump(mode="json"), is_error=name != "blueprint_validate" and not report_.ok)
        if name == "blueprint_register":
            plan = await asyncio.to_thread(lambda: orc.compile(parse_document(args["blueprint"])))
            bp = orc.register_blueprint(plan)
            tool = self._catalogue.resolve(f"workflow:{bp.name}")
            return json_result(
                {
                    "registered": bp.name,
                    "tool": tool.name if tool else None,
                    "uri": f"ice://workflows/{bp.name}",
                }
            )
        if name == "blueprint_delete":
            removed = orc.remove_workflow(args["name"])
            if not removed:
                return error_result("unknown_workflow", f"unknown workflow {args['name']!r}")
            return json_result({"deleted": args["name"]})
        if name == "blueprint_run":
            plan = await asyncio.to_thread(lambda: orc.compile(parse_document(args["blueprint"])))
            return await self._run(
                plan,
                dict(args.get("inputs") or {}),
                key,
                report,
                len(plan.graph.nodes) or None,
                args.get("wait_seconds"),
            )
        if name == "network_execute":
            result = await self.network(args["manifest"], args.get("wait_seconds"), key)
            failed = result.get("status") not in ("succeeded", "running")
            return json_result(result, is_error=failed)
        return error_result("unknown_tool", f"unknown tool {name!r}")

    async def _run_result(self, run_id: str, wait: Any) -> types.CallToolResult:
        handle_of = getattr(self._orc, "get_handle", None)
        record = self._orc.get_run(run_id)
        if record is None:
            return error_result("unknown_run", f"unknown run {run_id!r}")
        if record_dict(record).get("status") == "running":
            handle = handle_of(run_id) if callable(handle_of) else None
            if handle is not None:
                record = await handle.wait(timeout=self.wait_budget(wait))
            else:
                record = await self._poll(run_id, self.wait_budget(wait))
        return run_result(record)

    async def _poll(self, run_id: str, wait: float) -> Any:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait
        record = self._orc.get_run(run_id)
        while record_dict(record).get("status") == "running" and loop.time() < deadline:
            await asyncio.sleep(min(0.05, max(0.0, deadline - loop.time())))
            record = self._orc.get_run(run_id)
        return record

    async def network(self, manifest: Any, wait: Any, key: str | None) -> dict[str, Any]:
        if self._options.read_only:
            raise IceError(
                "network.execute runs workflows that may change data and the server is read-only",
                code="forbidden",
            )
        doc = parse_document(manifest, "manifest")
        task = self._networks.get(key) if key else None
        if task is None:
            task = asyncio.ensure_future(self._orc.run_network(doc, from_client=True))
            if key:
                self._networks[key] = task
        try:
            return await asyncio.wait_for(asyncio.shield(task), timeout=self.wait_budget(wait))
        except TimeoutError:
            return {"network": doc.get("name"), "status": "running", "workflows": {}}
        except asyncio.CancelledError:
            if not key:
                task.cancel()
            raise
