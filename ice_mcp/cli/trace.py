"""`ice-mcp trace export RUN_ID`: a recorded run's trace as OTLP/JSON, rebuilt from its journal.

It works for runs recorded with tracing off (no OpenTelemetry package is imported), so a failed run can be
opened afterwards in any viewer that reads OTLP/JSON. By default the trace holds names, timings, attempts,
token counts, costs and error codes only; `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true` adds
inputs, outputs, tool arguments and error messages (which often quote inputs). See `ice_mcp.observability.trace_export`.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ice_mcp.errors import IceError

if TYPE_CHECKING:
    from ice_mcp.observability.trace_export import ProviderResolver
    from ice_mcp.orchestrator import Orchestrator
    from ice_mcp.store.records import RunRecord

PREFIX_SCAN = 1000  # a short run id is looked for among this many of the newest runs

EXPORT_HELP = "write a run's trace as OTLP/JSON, rebuilt from its journal (works with tracing off)"
EXPORT_DESCRIPTION = (
    "Write the run's trace as OTLP/JSON (an ExportTraceServiceRequest, as OTLP/HTTP posts it) rebuilt from its "
    "journal and record: the run span, a span per node attempt, and chat / execute_tool spans, with the trace id "
    "of the live trace when the run was traced. No inputs, prompts, answers, tool arguments, outputs or error "
    "messages are written unless OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true (without it a failure "
    "shows its error code only). OTEL_SERVICE_NAME names the service (default ice-mcp).")


class RunNotFound(IceError):
    """No run, or more than one, answers to the id given: one line for stderr."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message, code=code)


def add_trace_commands(commands: Any) -> None:
    """`trace export`, on the `ice-mcp` parser's subcommands."""
    trace = commands.add_parser("trace", help="runs' traces (OpenTelemetry)")
    leaves = trace.add_subparsers(dest="trace_command", required=True, metavar="COMMAND")
    export = leaves.add_parser("export", help=EXPORT_HELP, description=EXPORT_DESCRIPTION)
    export.add_argument("run_id", metavar="RUN_ID", help="the run's id, or a unique prefix of a recent run's id")
    export.add_argument("-o", "--output", type=Path, metavar="FILE", help="write the JSON here (default: stdout)")
    export.add_argument("--data-dir", type=Path, help="where runs are kept (ICE_MCP_DATA_DIR)")
    export.add_argument("--state", metavar="URL", help="the run store a cluster shares instead of the data folder: "
                                                       "redis://, postgresql:// or sqlite:///FILE (ICE_MCP_STATE)")
    export.set_defaults(handler=export_command)


def export_command(args: argparse.Namespace) -> int:
    """Write the trace; an unknown run is one line on stderr and exit status 1."""
    from ice_mcp.assembly import build_orchestrator
    from ice_mcp.settings import Settings

    # The run store read directly, as `runs show` does: no tools, upstream servers or engine start.
    orchestrator = build_orchestrator(Settings.from_env(data_dir=args.data_dir, state_url=args.state),
                                      store_only=True)
    try:
        try:
            body = export_run(orchestrator, args.run_id, os.environ)
        except RunNotFound as exc:
            print(f"error [{exc.code}]: {exc.message}", file=sys.stderr)
            return 1
    finally:
        orchestrator.close()
    if args.output is None:
        out = getattr(sys.stdout, "buffer", None)
        if out is not None:
            sys.stdout.flush()
            out.write(body)
            out.flush()
        else:
            sys.stdout.write(body.decode())
        return 0
    try:
        args.output.write_bytes(body)
    except OSError as exc:
        print(f"error [cannot_write]: {args.output}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    return 0


def export_run(orchestrator: Orchestrator, run_id: str, environ: Mapping[str, str]) -> bytes:
    """The OTLP/JSON bytes of one run of `orchestrator`'s store (raises RunNotFound)."""
    from ice_mcp.observability.trace_export import (
        DEFAULT_SERVICE_NAME,
        capture_content,
        dumps_trace,
        export_trace,
        workflow_operation,
    )

    record = find_run(orchestrator, run_id)
    store = orchestrator.store
    stored = store.run(record.run_id) if store is not None else None
    blueprint = stored.blueprint if stored is not None and isinstance(stored.blueprint, dict) else None

    def workflow(name: str) -> dict[str, Any] | None:
        """A nested workflow's latest kept version (runs keep their own blueprint, not their sub-workflows')."""
        versions = store.blueprint_versions(name) if store is not None else []
        return versions[-1].source if versions else None

    trace = export_trace(record, orchestrator.run_events(record.run_id), blueprint=blueprint, workflows=workflow,
                         resolve_provider=_provider_resolver(environ), content=capture_content(environ),
                         service_name=environ.get("OTEL_SERVICE_NAME") or DEFAULT_SERVICE_NAME,
                         operation=workflow_operation(environ),
                         scope_version=_package_version())
    return dumps_trace(trace)


def find_run(orchestrator: Orchestrator, run_id: str) -> RunRecord:
    """The run of this id, else the one recent run whose id starts with it."""
    record = orchestrator.get_run(run_id)
    if record is not None:
        return record
    rows, _ = orchestrator.runs_page(limit=PREFIX_SCAN) if run_id else ([], None)
    matches = sorted({row["run_id"] for row in rows if str(row.get("run_id", "")).startswith(run_id)})
    if len(matches) > 1:
        shown = ", ".join(matches[:5]) + (", ..." if len(matches) > 5 else "")
        raise RunNotFound("ambiguous_run_id", f"{run_id!r} starts {len(matches)} run ids: {shown}")
    record = orchestrator.get_run(matches[0]) if matches else None
    if record is None:
        raise RunNotFound("unknown_run", f"no run {run_id!r}")
    return record


def _provider_resolver(environ: Mapping[str, str]) -> ProviderResolver:
    """Which provider serves a model, by this machine's LLM configuration (for blueprints that do not say)."""
    from ice_mcp.llm.config import LLMConfig

    config: list[LLMConfig] = []

    def resolve(model: str, provider: str | None) -> str | None:
        if not config:
            config.append(LLMConfig.load(env=environ))  # loaded once, and only for runs with llm nodes
        return config[0].resolve(model, provider).provider

    return resolve


def _package_version() -> str | None:
    try:
        return version("ice_mcp")
    except PackageNotFoundError:  # a checkout that was never installed
        return None
