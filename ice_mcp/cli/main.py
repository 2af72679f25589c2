"""The `ice-mcp` command line: a command for every built-in tool that has one, worker, and the server's commands.

This module imports only the standard library and `ice_mcp.errors` when it loads: the orchestrator, the built-in
tools' table and the server's commands load inside `main` (`build_parser`, the commands), where the start-up runs
with the cyclic GC paused (see `main`)."""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ice_mcp.cli.evals import compare_arguments, eval_arguments, run_compare, run_eval
from ice_mcp.cli.state import add_state_commands
from ice_mcp.cli.trace import add_trace_commands
from ice_mcp.errors import BlueprintInvalid, IceError
from ice_mcp.observability import tracing

if TYPE_CHECKING:
    from ice_mcp.blueprint.issues import ValidationReport
    from ice_mcp.core.plan import Plan
    from ice_mcp.operations.tool_table import BuiltinTool
    from ice_mcp.orchestrator import Orchestrator
    from ice_mcp.store.events import Event

# The exit status of a command whose reader went away (128 + SIGPIPE), as for any Unix tool in a pipe.
BROKEN_PIPE_EXIT = 141
WAIT_FOREVER = 365 * 24 * 3600.0  # how long a command waits for a run nobody set a wait for


class UsageError(IceError):
    """A malformed command-line value: reported in one line, exit status 2 like argparse's own errors."""


def _common(parser: argparse.ArgumentParser) -> None:
    from ice_mcp.server.cli import DATA_DIR_HELP, WORKSPACE_HELP, add_upstream_arguments

    parser.add_argument("--tools", action="append", default=[], metavar="MODULE",
                        help="import a Python module that registers tools (repeatable; also ICE_MCP_TOOLS)")
    parser.add_argument("--blueprints", action="append", default=[], metavar="DIR",
                        help="register every blueprint in this folder (repeatable)")
    parser.add_argument("--data-dir", type=Path, help=DATA_DIR_HELP)
    parser.add_argument("--state", metavar="URL", help="the run store a cluster shares instead of the data folder: "
                                                       "redis://HOST:PORT/DB, postgresql://USER@HOST:PORT/DB or sqlite:///FILE "
                                                       "(ICE_MCP_STATE)")
    parser.add_argument("--workspace", type=Path, help=WORKSPACE_HELP)
    add_upstream_arguments(parser)


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The `ice-mcp` parser. `command` "serve": only the server's commands, which is all a host starting the
    server for a session parses (~1 ms, the whole tree ~10 ms: a command per built-in tool)."""
    from ice_mcp.server.cli import (
        LOG_LEVEL_HELP,
        IceArgumentParser,
        add_serve_commands,
        complete_help,
    )
    from ice_mcp.tools.egress import allow_net_argument

    parser = IceArgumentParser(prog="ice-mcp", description="Workflow orchestration as MCP tools.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {package_version()}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    if command == "serve":
        add_serve_commands(commands)
        complete_help(parser)
        return parser

    _add_builtin_commands(commands)

    worker = commands.add_parser(
        "worker", help="run a Temporal worker: it runs the runs of servers started with --engine temporal")
    add_temporal_arguments(worker, required=True)
    worker.add_argument("--concurrency", type=int, default=100, metavar="N",
                        help="node activities this worker runs at once (default 100)")
    worker.add_argument("--allow-net", action="append", type=allow_net_argument, metavar="CIDR|HOST",
                        help="let outbound fetches reach this private address range or host (repeatable)")
    worker.add_argument("--log-level", default=os.environ.get("ICE_MCP_LOG_LEVEL", "WARNING"), help=LOG_LEVEL_HELP)
    worker.add_argument("--metrics-port", type=int, metavar="PORT",
                        help="serve this worker's Prometheus metrics on http://METRICS_HOST:PORT/metrics (no auth)")
    worker.add_argument("--metrics-host", default="127.0.0.1", metavar="HOST",
                        help="the address --metrics-port listens on (default 127.0.0.1)")
    _common(worker)

    _add_extension_commands(commands)
    add_trace_commands(commands)
    add_state_commands(commands)
    complete_help(parser)  # options defined elsewhere (the run view's `ui`) get their help and default too
    return parser


@dataclass(frozen=True, slots=True)
class Form:
    """A built-in tool's command where the form derived from its schema is not enough (files, a live display,
    answers typed at the terminal, one line per run): its arguments, what it does, its help."""

    arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]
    help: str


def _run_arguments(run: argparse.ArgumentParser) -> None:
    from ice_mcp.tools.egress import allow_net_argument

    run.add_argument("file", metavar="FILE_OR_NAME",
                     help="blueprint (JSON or YAML), or the name of a workflow from --blueprints or the bundled templates")
    run.add_argument("--inputs", help="inputs as a JSON object")
    run.add_argument("-i", "--input", action="append", default=[], metavar="KEY=VALUE",
                     help="one input (VALUE is parsed as JSON when it can be); repeatable")
    run.add_argument("--no-progress", action="store_true", help="no live progress display")
    run.add_argument("--allow-net", action="append", type=allow_net_argument, metavar="CIDR|HOST",
                     help="let outbound fetches reach this private address range or host (repeatable; ICE_MCP_ALLOW_NET)")


def _validate_arguments(validate: argparse.ArgumentParser) -> None:
    validate.add_argument("file", help="a blueprint or a network manifest (JSON or YAML)")
    validate.add_argument("--json", action="store_true", help="print the report as JSON")


def _network_arguments(network_run: argparse.ArgumentParser) -> None:
    network_run.add_argument("manifest", help="a network manifest (JSON or YAML)")


def _list_arguments(runs_list: argparse.ArgumentParser) -> None:
    runs_list.add_argument("--status", help="only runs in this state: running, succeeded, failed, canceled, "
                                            "input_required, queued (default: every state)")
    runs_list.add_argument("--workflow", help="only runs of this workflow (default: every workflow)")
    runs_list.add_argument("--schedule-id", help="only the runs this schedule started (default: every run)")
    runs_list.add_argument("--limit", type=int, default=20, help="at most this many, newest first")


def _show_arguments(runs_show: argparse.ArgumentParser) -> None:
    runs_show.add_argument("run_id", help="the run's id")
    runs_show.add_argument("--events", action="store_true", help="include the event stream")


def _retry_arguments(runs_retry: argparse.ArgumentParser) -> None:
    runs_retry.add_argument("run_id", help="the finished run to run again")
    runs_retry.add_argument("--from", dest="from_node", metavar="NODE",
                            help="run this top-level node and everything after it again")


FORMS: dict[str, Form] = {
    "blueprint_run": Form(_run_arguments, lambda args: asyncio.run(_run(args)),
                          "run a blueprint file or a workflow by name; print its run record as JSON"),
    "blueprint_validate": Form(_validate_arguments, lambda args: asyncio.run(_validate(args)),
                               "check a blueprint; every problem is listed"),
    "network_execute": Form(_network_arguments, lambda args: asyncio.run(_network(args)), "run a network manifest"),
    "run_list": Form(_list_arguments, lambda args: _local_runs(args, _list_runs), "the latest runs"),
    "run_status": Form(_show_arguments, lambda args: _local_runs(args, _show_run), "one run's record"),
    "run_retry": Form(_retry_arguments, lambda args: asyncio.run(_retry(args)),
                      "run a finished run again as a new run, reusing every node it finished"),
    "eval_run": Form(eval_arguments, lambda args: run_eval(args, make_orchestrator),
                     "evaluate a workflow on a dataset, failing cases first (`eval drafting`: the drafting "
                     "benchmark, see `ice-mcp eval drafting --help`)"),
    "eval_compare": Form(compare_arguments, lambda args: run_compare(args, make_orchestrator),
                         "which cases changed between two versions on a dataset"),
}
GROUP_HELP = {"runs": "recorded runs", "network": "network manifests", "schedules": "schedules kept in the run store",
              "webhooks": "inbound webhooks that start workflows", "notify": "where finished runs are POSTed",
              "evals": "kept evaluations", "blueprints": "the versions kept of workflows registered at run time"}


def _add_builtin_commands(commands: Any) -> None:
    """A command for every built-in tool with a `cli` path: its Form, else arguments from its input schema."""
    from ice_mcp.operations.builtins import BUILTINS

    groups: dict[str, Any] = {}
    for tool in BUILTINS:
        if tool.cli is None:
            continue
        *group, leaf = tool.cli
        parent = commands
        for depth, name in enumerate(group):
            key = " ".join(group[: depth + 1])
            if key not in groups:
                parser = parent.add_parser(name, help=GROUP_HELP.get(name))
                groups[key] = parser.add_subparsers(dest=f"{name}_command", required=True, metavar="COMMAND")
            parent = groups[key]
        form = FORMS.get(tool.name)
        if form is not None:
            command = parent.add_parser(leaf, help=form.help)
            form.arguments(command)
            command.set_defaults(handler=form.run)
        else:
            command = parent.add_parser(leaf, help=tool.description.partition(". ")[0].rstrip(".").lower())
            _schema_arguments(command, tool.input_schema, flags=tool.cli_flags)
            command.set_defaults(handler=lambda args, tool=tool: asyncio.run(_derived(tool, args)))
        _common(command)


def _schema_arguments(parser: argparse.ArgumentParser, schema: dict[str, Any], flags: tuple[str, ...] = ()) -> None:
    """Required strings and integers are positional (except `flags`); every other property is `--its-name`,
    typed as its schema says."""
    required = set(schema.get("required") or ())
    for name, prop in (schema.get("properties") or {}).items():
        kind = prop.get("type")
        # Every option has a help text, even where a tool's schema does not describe the input.
        help_text = prop.get("description") or f"the tool's {name!r} input ({kind or 'JSON'})"
        if name in required and kind in ("string", "integer") and name not in flags:
            parser.add_argument(name, type=int if kind == "integer" else str, help=help_text)
        elif kind == "boolean":
            parser.add_argument(f"--{name.replace('_', '-')}", dest=name, action="store_true", default=None,
                                help=help_text)
        else:
            convert = {"integer": int, "number": float, "string": str}.get(str(kind), _json_argument)
            parser.add_argument(f"--{name.replace('_', '-')}", dest=name, type=convert, choices=prop.get("enum"),
                                required=name in required, help=help_text)


def _json_argument(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text  # YAML or plain text: the tool's own schema decides


async def _derived(tool: BuiltinTool, args: argparse.Namespace) -> int:
    """A built-in tool run from its derived command: its answer printed as JSON (a run's once it ends)."""
    from ice_mcp.operations.arguments import check_arguments
    from ice_mcp.operations.tool_table import BuiltinCall, Reply, settle

    params = {name: getattr(args, name) for name in tool.input_schema.get("properties") or {}
              if getattr(args, name, None) is not None}
    check_arguments(tool.input_schema, params)
    orchestrator = await make_orchestrator(args)
    try:
        key = params.get("idempotency_key")
        call = BuiltinCall(orchestrator, params, None if key is None else str(key), None, _no_wait_limit,
                           "cli:" + " ".join(tool.cli or ()))
        answer = await tool.handler(call)
        data = await settle(answer, _no_wait_limit(None))
    finally:
        await orchestrator.aclose()
    print(json.dumps(data, indent=2, default=str))
    return 0 if isinstance(answer, Reply) or data.get("status") == "succeeded" else 1  # a run: did it succeed


def _no_wait_limit(requested: Any) -> float:
    """At a terminal a run is waited for to its end unless a wait was asked for."""
    if isinstance(requested, int | float) and not isinstance(requested, bool) and requested >= 0:
        return float(min(requested, WAIT_FOREVER))
    return WAIT_FOREVER


def add_temporal_arguments(parser: argparse.ArgumentParser, *, required: bool = False) -> None:
    """--temporal HOST:PORT, --namespace, --task-queue (also ICE_MCP_TEMPORAL, ..._NAMESPACE, ..._TASK_QUEUE)."""
    parser.add_argument("--temporal", metavar="HOST:PORT", required=required and not os.environ.get("ICE_MCP_TEMPORAL"),
                        help="the Temporal frontend (ICE_MCP_TEMPORAL)")
    parser.add_argument("--namespace", help="Temporal namespace (ICE_MCP_TEMPORAL_NAMESPACE; default 'default')")
    parser.add_argument("--task-queue", help="Temporal task queue (ICE_MCP_TEMPORAL_TASK_QUEUE; default 'ice-mcp')")


def _add_extension_commands(commands: Any) -> None:
    """Commands contributed by the server and the sandbox (when its runtime is installed)."""
    from ice_mcp.sandbox import require_runtime
    from ice_mcp.server.cli import add_serve_commands

    add_serve_commands(commands)
    try:
        require_runtime()  # found, not imported: wasmtime loads when `sandbox warmup` runs
    except ImportError:
        pass
    else:
        sandbox = commands.add_parser("sandbox", help="the WebAssembly sandbox for code nodes")
        sandbox_commands = sandbox.add_subparsers(dest="sandbox_command", required=True, metavar="COMMAND")
        warmup = sandbox_commands.add_parser("warmup", help="install and compile the sandbox runtime ahead of time")
        warmup.add_argument("cache_dir", nargs="?", help="where the compiled module is kept")
        warmup.set_defaults(handler=_sandbox_warmup)


def _sandbox_warmup(args: argparse.Namespace) -> int:
    from ice_mcp.sandbox.cli import warmup_cli  # wasmtime: only for this command

    return warmup_cli([args.cache_dir] if args.cache_dir else [])


def package_version() -> str:
    try:
        return version("ice_mcp")
    except PackageNotFoundError:  # imported from a checkout that was never installed
        return "unknown (not installed)"


async def make_orchestrator(args: argparse.Namespace, *, samples: bool = True, **overrides: Any) -> Orchestrator:
    """The orchestrator a command runs with; `samples`: a new (empty or missing) workspace gets the sample files."""
    from ice_mcp.assembly import build_orchestrator, load_blueprint_folders
    from ice_mcp.bundled import seed_workspace
    from ice_mcp.settings import Settings

    settings = Settings.from_env(data_dir=args.data_dir, workspace=args.workspace, state_url=args.state,
                                 allow_net=tuple(getattr(args, "allow_net", None) or ()) or None, **overrides)
    if samples:
        seed_workspace(settings.workspace)
    orchestrator = build_orchestrator(settings, tools=args.tools)
    try:
        await orchestrator.connect_upstream(args.mcp_config)  # blueprints below may use upstream tools
    except BaseException:
        await orchestrator.aclose()
        raise
    orchestrator.restore_blueprints()  # workflows registered at run time (over MCP, /rpc or Python)
    for problem in load_blueprint_folders(orchestrator, args.blueprints):
        print(f"warning: {problem.message}", file=sys.stderr)
    return orchestrator


def parse_inputs(text: str | None, pairs: Sequence[str]) -> dict[str, Any]:
    inputs: dict[str, Any] = {}
    if text:
        try:
            loaded = json.loads(text)
        except json.JSONDecodeError as exc:
            raise UsageError(f"--inputs is not valid JSON: {exc}", code="invalid_inputs") from None
        if not isinstance(loaded, dict):
            raise UsageError("--inputs must be a JSON object", code="invalid_inputs")
        inputs.update(loaded)
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UsageError(f"-i expects KEY=VALUE, got {pair!r}", code="invalid_inputs")
        try:
            inputs[key] = json.loads(value)
        except json.JSONDecodeError:
            inputs[key] = value
    return inputs


def print_report(report: ValidationReport, source: str) -> None:
    if report.ok:
        estimate = report.estimate
        calls = estimate.llm_calls_max if estimate.llm_calls_max is not None else "unbounded"
        print(f"{source}: valid (LLM calls {estimate.llm_calls_min}..{calls})")
        return
    print(f"{source}: {len(report.errors)} problem(s)", file=sys.stderr)
    for issue in report.errors:
        where = ".".join(p for p in (issue.node_id, issue.field) if p) or "blueprint"
        hint = f" (did you mean {issue.suggestion!r}?)" if issue.suggestion else ""
        print(f"  [{issue.code}] {where}: {issue.message}{hint}", file=sys.stderr)


def plan_to_run(orchestrator: Orchestrator, file_or_name: str) -> Plan:
    """What `run` runs: a registered workflow, else a blueprint file, else a bundled template of that name."""
    from ice_mcp.blueprint.issues import nearest
    from ice_mcp.bundled import bundled_dir

    workflows = orchestrator.registry.workflows
    path = Path(file_or_name)
    if file_or_name not in workflows:
        if path.exists():
            return orchestrator.compile(path)
        if _names_a_file(file_or_name):  # examples/nope.yaml: meant as a file, so say that one is missing
            where = path if path.is_absolute() else Path.cwd() / path
            raise IceError(f"file not found: {file_or_name} (looked for {where})", code="not_found",
                           details={"path": str(where)})
        for problem in orchestrator.load_blueprints(bundled_dir("blueprints")):
            print(f"warning: bundled template not registered: {problem.message}", file=sys.stderr)
    entry = workflows.get(file_or_name)
    if entry is None:
        suggestion = nearest(file_or_name, workflows)
        hint = f"did you mean {suggestion!r}?" if suggestion else f"workflows: {', '.join(sorted(workflows))}"
        raise IceError(f"{file_or_name!r} is neither a blueprint file (no file {Path.cwd() / path}) nor a workflow "
                       f"name (from --blueprints and the bundled templates); {hint}",
                       code="unknown_workflow", details={"name": file_or_name})
    return orchestrator.workflow_plan(file_or_name)


def _names_a_file(text: str) -> bool:
    """A workflow name is one word: a slash or a blueprint's extension means a file was meant."""
    return "/" in text or os.sep in text or text.endswith((".json", ".yaml", ".yml"))


async def _run(args: argparse.Namespace) -> int:
    from ice_mcp.cli.terminal import Progress, TerminalAnswers

    inputs = parse_inputs(args.inputs, args.input)
    orchestrator = await make_orchestrator(args)
    try:
        plan = plan_to_run(orchestrator, args.file)
        progress = None
        if not args.no_progress and sys.stderr.isatty():
            progress = Progress(list(plan.graph.nodes))
            progress.live.start()
        answers = TerminalAnswers(orchestrator, progress)

        def on_event(event: Event) -> None:
            if progress is not None:
                progress(event)
            answers.on_event(event)

        answering = asyncio.create_task(answers.serve())
        try:
            record = await orchestrator.run(plan, inputs, on_event=on_event)
        finally:
            answering.cancel()
            if progress is not None:
                progress.live.stop()
        print(json.dumps(record.to_dict(), indent=2, default=str))
        return 0 if record.status == "succeeded" else 1
    finally:
        await orchestrator.aclose()


async def _network(args: argparse.Namespace) -> int:
    orchestrator = await make_orchestrator(args)
    try:
        result = await orchestrator.run_network(Path(args.manifest), from_client=False,
                                                base_dir=Path(args.manifest).resolve().parent)
        print(json.dumps(result, indent=2, default=str))
        return 0 if result["status"] == "succeeded" else 1
    finally:
        await orchestrator.aclose()


async def _validate(args: argparse.Namespace) -> int:
    from ice_mcp.blueprint.loading import read_document

    orchestrator = await make_orchestrator(args, samples=False)  # checks only: no workspace needed
    path = Path(args.file)
    try:
        document = read_document(path)
        if str(document.get("api_version", "")).startswith("network"):
            report = orchestrator.validate_network(path, from_client=False, base_dir=path.resolve().parent)
        else:
            report = orchestrator.validate(document)
    finally:
        await orchestrator.aclose()
    if args.json:
        print(report.model_dump_json(indent=2))
    else:
        print_report(report, args.file)
    return 0 if report.ok else 1


async def _retry(args: argparse.Namespace) -> int:
    orchestrator = await make_orchestrator(args)
    try:
        record = await (await orchestrator.retry(args.run_id, args.from_node)).wait()
        print(json.dumps(record.to_dict(), indent=2, default=str))
        return 0 if record.status == "succeeded" else 1
    finally:
        await orchestrator.aclose()


def _local_runs(args: argparse.Namespace, show: Callable[[Orchestrator, argparse.Namespace], int]) -> int:
    """`runs list` and `runs show`: the run store read directly, with no tools, upstreams or engine."""
    from ice_mcp.assembly import build_orchestrator
    from ice_mcp.settings import Settings

    orchestrator = build_orchestrator(Settings.from_env(data_dir=args.data_dir, state_url=args.state),
                                      store_only=True)
    try:
        return show(orchestrator, args)
    finally:
        orchestrator.close()


def _list_runs(orchestrator: Orchestrator, args: argparse.Namespace) -> int:
    from ice_mcp.server.cli import runs_location

    # On stderr, so stdout stays one line per run: whose runs these are (the default folder is machine-wide).
    chosen = args.data_dir or args.state or os.environ.get("ICE_MCP_DATA_DIR") or os.environ.get("ICE_MCP_STATE")
    shared = "" if chosen else (", shared by every ice-mcp on this machine not given --data-dir or "
                                "ICE_MCP_DATA_DIR")
    print(f"runs in {runs_location(orchestrator.settings)}{shared}", file=sys.stderr)
    for record in orchestrator.list_runs(status=args.status, workflow=args.workflow, limit=args.limit,
                                         schedule_id=args.schedule_id):
        data = record.to_dict()
        slot = f"  slot {record.trigger['slot']}" if record.trigger and record.trigger.get("slot") else ""
        print(f"{record.run_id}  {data['started_at']}  {record.status:<11} {record.workflow}{slot}")
    return 0


def _show_run(orchestrator: Orchestrator, args: argparse.Namespace) -> int:
    # A small module: no SDK comes with it.
    from ice_mcp.operations.run_ids import resolve_run_id

    try:  # the whole id, or a unique start of it as `runs list` and the run view show
        run_id = resolve_run_id(orchestrator, args.run_id)
    except IceError as exc:
        print(exc.message if exc.code == "ambiguous_run_id" else f"no run {args.run_id!r}", file=sys.stderr)
        return 1
    found = orchestrator.get_run(run_id)
    if found is None:
        print(f"no run {args.run_id!r}", file=sys.stderr)
        return 1
    data = found.to_dict()
    if args.events:
        data["events"] = orchestrator.run_events(run_id)
    print(json.dumps(data, indent=2, default=str))
    return 0


def _worker(args: argparse.Namespace) -> int:
    """`ice-mcp worker`: the runs of servers started with `--engine temporal`, until SIGTERM or Ctrl-C."""
    import logging
    import signal

    from ice_mcp.engines.temporal.worker import (
        run_worker,  # temporalio loads only for workers and its engine
    )

    logging.basicConfig(stream=sys.stderr, level=args.log_level.upper(), format="%(levelname)s %(name)s: %(message)s")
    if args.concurrency < 1:
        raise UsageError("--concurrency must be at least 1", code="invalid_concurrency")
    if args.metrics_port is not None and not 0 < args.metrics_port < 65536:
        raise UsageError("--metrics-port must be a TCP port (1-65535)", code="invalid_metrics_port")
    metrics = (args.metrics_host, args.metrics_port) if args.metrics_port is not None else None
    tracing.configure()  # only OTEL_* variables turn it on: then this worker exports the spans of what it runs

    async def serve() -> None:
        # The worker's own orchestrator runs in-process what an activity runs inside it (an agent's workflows),
        # with the upstream tools of its --mcp-config (each worker holds its own connections).
        orchestrator = await make_orchestrator(
            args, engine="embedded",
            temporal_address=args.temporal, temporal_namespace=args.namespace, temporal_task_queue=args.task_queue)
        stop = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
        try:
            await run_worker(orchestrator, concurrency=args.concurrency, stop=stop, metrics_address=metrics)
        finally:
            await orchestrator.aclose()

    try:
        asyncio.run(serve())
    except KeyboardInterrupt:
        pass
    return 0


def _gc_unchanged() -> None:
    """The collector was off before `main` (the caller's choice): it stays as it was."""


def main(argv: Sequence[str] | None = None) -> int:
    # A command's start-up (its imports, the parser, a server's orchestrator) allocates ~150k objects that live
    # as long as the process, and the cyclic GC would walk them again and again on the way (~100 ms of a stdio
    # server's start): it is paused until the command starts its work (see _dispatch), and on again at the end.
    collecting = gc.isenabled()
    gc.disable()
    try:
        try:
            return _dispatch(argv, collecting)
        finally:
            sys.stdout.flush()  # a reader gone away shows here (after --help too), while we can answer quietly
    except BrokenPipeError:
        # Whatever is left for stdout goes nowhere, so the flush at exit does not complain either.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return BROKEN_PIPE_EXIT
    finally:
        if collecting:
            gc.enable()


def _dispatch(argv: Sequence[str] | None, collecting: bool = False) -> int:
    from ice_mcp.server.cli import apply_default_workspace

    words = list(sys.argv[1:] if argv is None else argv)
    if words[:2] == ["eval", "drafting"]:  # the benchmark, beside `eval TARGET` (a workflow's evaluation)
        from ice_mcp.drafting.benchmark import drafting_parser

        args = drafting_parser().parse_args(words[2:])
    else:
        args = build_parser(words[0] if words else None).parse_args(words)
    apply_default_workspace(args)
    resume_gc = gc.enable if collecting else _gc_unchanged
    if "resume_gc" in vars(args):  # `serve`: turns the collector on itself, once it is up (ice_mcp.server.cli)
        args.resume_gc = resume_gc
    else:
        resume_gc()  # every other command does its work with the collector on
    try:
        if getattr(args, "handler", None) is not None:
            return int(args.handler(args) or 0)
        if args.command == "worker":
            return _worker(args)
    except BlueprintInvalid as exc:
        print_report(exc.report, str(getattr(args, "file", None) or getattr(args, "manifest", "blueprint")))
        return 1
    except UsageError as exc:
        print(f"error [{exc.code}]: {exc.message}", file=sys.stderr)
        return 2
    except IceError as exc:
        print(f"error [{exc.code}]: {exc.message}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 2


if __name__ == "__main__":
    sys.exit(main())
