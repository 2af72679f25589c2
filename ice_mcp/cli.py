"""The `ice-mcp` command line: run, validate, networks, runs, and (from the server) serve."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import threading
from collections.abc import Callable, Sequence
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from ice_mcp.blueprint.issues import ValidationReport, nearest
from ice_mcp.blueprint.loading import read_document
from ice_mcp.bundled import bundled_dir
from ice_mcp.core.plan import Plan
from ice_mcp.errors import AnswerInvalid, BlueprintInvalid, IceError, NotWaiting
from ice_mcp.orchestrator import Orchestrator
from ice_mcp.server.cli import add_serve_commands, add_upstream_arguments
from ice_mcp.settings import Settings
from ice_mcp.store.events import Event
from ice_mcp.tools.egress import allow_net_argument
from ice_mcp.tools.modules import import_tool_modules
from ice_mcp.tools.registry import DEFAULT_REGISTRY

# The exit status of a command whose reader went away (128 + SIGPIPE), as for any Unix tool in a pipe.
BROKEN_PIPE_EXIT = 141


class UsageError(IceError):
    """A malformed command-line value: reported in one line, exit status 2 like argparse's own errors."""


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tools", action="append", default=[], metavar="MODULE",
                        help="import a Python module that registers tools (repeatable; also ICE_MCP_TOOLS)")
    parser.add_argument("--blueprints", action="append", default=[], metavar="DIR",
                        help="register every blueprint in this folder (repeatable)")
    parser.add_argument("--data-dir", type=Path, help="where runs are kept (ICE_MCP_DATA_DIR)")
    parser.add_argument("--state", metavar="URL", help="the run store a cluster shares instead of the data folder: "
                                                       "redis://HOST:PORT/DB or sqlite:///FILE (ICE_MCP_STATE)")
    parser.add_argument("--workspace", type=Path, help="the folder file tools may use (ICE_MCP_WORKSPACE)")
    add_upstream_arguments(parser)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ice-mcp", description="Workflow orchestration as MCP tools.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {package_version()}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = commands.add_parser("run", help="run a blueprint file or a workflow by name; print its run record as JSON")
    run.add_argument("file", metavar="FILE_OR_NAME",
                     help="blueprint (JSON or YAML), or the name of a workflow from --blueprints or the bundled templates")
    run.add_argument("--inputs", help="inputs as a JSON object")
    run.add_argument("-i", "--input", action="append", default=[], metavar="KEY=VALUE",
                     help="one input (VALUE is parsed as JSON when it can be); repeatable")
    run.add_argument("--no-progress", action="store_true", help="no live progress display")
    run.add_argument("--allow-net", action="append", type=allow_net_argument, metavar="CIDR|HOST",
                     help="let outbound fetches reach this private address range or host (repeatable; ICE_MCP_ALLOW_NET)")
    _common(run)

    validate = commands.add_parser("validate", help="check a blueprint; every problem is listed")
    validate.add_argument("file")
    validate.add_argument("--json", action="store_true", help="print the report as JSON")
    _common(validate)

    network = commands.add_parser("network", help="network manifests")
    network_commands = network.add_subparsers(dest="network_command", required=True, metavar="COMMAND")
    network_run = network_commands.add_parser("run", help="run a network manifest")
    network_run.add_argument("manifest")
    _common(network_run)

    runs = commands.add_parser("runs", help="recorded runs")
    runs_commands = runs.add_subparsers(dest="runs_command", required=True, metavar="COMMAND")
    runs_list = runs_commands.add_parser("list", help="the latest runs")
    runs_list.add_argument("--status")
    runs_list.add_argument("--workflow")
    runs_list.add_argument("--limit", type=int, default=20)
    _common(runs_list)
    runs_show = runs_commands.add_parser("show", help="one run's record")
    runs_show.add_argument("run_id")
    runs_show.add_argument("--events", action="store_true", help="include the event stream")
    _common(runs_show)
    runs_retry = runs_commands.add_parser(
        "retry", help="run a finished run again as a new run, reusing every node it finished")
    runs_retry.add_argument("run_id")
    runs_retry.add_argument("--from", dest="from_node", metavar="NODE",
                            help="run this top-level node and everything after it again")
    _common(runs_retry)

    worker = commands.add_parser(
        "worker", help="run a Temporal worker: it runs the runs of servers started with --engine temporal")
    add_temporal_arguments(worker, required=True)
    worker.add_argument("--concurrency", type=int, default=100, metavar="N",
                        help="node activities this worker runs at once (default 100)")
    worker.add_argument("--allow-net", action="append", type=allow_net_argument, metavar="CIDR|HOST",
                        help="let outbound fetches reach this private address range or host (repeatable)")
    worker.add_argument("--log-level", default=os.environ.get("ICE_MCP_LOG_LEVEL", "WARNING"))
    _common(worker)

    _add_extension_commands(commands)
    return parser


def add_temporal_arguments(parser: argparse.ArgumentParser, *, required: bool = False) -> None:
    """--temporal HOST:PORT, --namespace, --task-queue (also ICE_MCP_TEMPORAL, ..._NAMESPACE, ..._TASK_QUEUE)."""
    parser.add_argument("--temporal", metavar="HOST:PORT", required=required and not os.environ.get("ICE_MCP_TEMPORAL"),
                        help="the Temporal frontend (ICE_MCP_TEMPORAL)")
    parser.add_argument("--namespace", help="Temporal namespace (ICE_MCP_TEMPORAL_NAMESPACE; default 'default')")
    parser.add_argument("--task-queue", help="Temporal task queue (ICE_MCP_TEMPORAL_TASK_QUEUE; default 'ice-mcp')")


def _add_extension_commands(commands: Any) -> None:
    """Commands contributed by the server and the sandbox (when its runtime is installed)."""
    add_serve_commands(commands)
    try:
        from ice_mcp.sandbox import (
            warmup_cli,  # imports wasmtime: only when the command line is built
        )
    except ImportError:
        pass
    else:
        sandbox = commands.add_parser("sandbox", help="the WebAssembly sandbox for code nodes")
        sandbox_commands = sandbox.add_subparsers(dest="sandbox_command", required=True, metavar="COMMAND")
        warmup = sandbox_commands.add_parser("warmup", help="install and compile the sandbox runtime ahead of time")
        warmup.add_argument("cache_dir", nargs="?", help="where the compiled module is kept")
        warmup.set_defaults(handler=lambda args: warmup_cli([args.cache_dir] if args.cache_dir else []))


def package_version() -> str:
    try:
        return version("ice_mcp")
    except PackageNotFoundError:  # imported from a checkout that was never installed
        return "unknown (not installed)"


async def make_orchestrator(args: argparse.Namespace, **overrides: Any) -> Orchestrator:
    import_tool_modules(args.tools)
    settings = Settings.from_env(data_dir=args.data_dir, workspace=args.workspace, state_url=args.state,
                                 allow_net=tuple(getattr(args, "allow_net", None) or ()) or None, **overrides)
    # The tools the modules just registered with @tool, in this orchestrator's own registry.
    orchestrator = Orchestrator(settings=settings, registry=DEFAULT_REGISTRY.copy())
    try:
        await orchestrator.connect_upstream(args.mcp_config)  # blueprints below may use upstream tools
    except BaseException:
        await orchestrator.aclose()
        raise
    orchestrator.restore_blueprints()  # workflows registered at run time (over MCP, /rpc or Python)
    for folder in args.blueprints:
        for problem in orchestrator.load_blueprints(folder):
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


class Progress:
    """A live table of node states on the terminal (stderr), fed by run events."""

    SYMBOLS = {"node_started": "running", "node_retrying": "retrying", "node_succeeded": "succeeded",
               "node_failed": "failed", "node_skipped": "skipped", "node_cancelled": "cancelled"}
    STYLES = {"running": "yellow", "retrying": "magenta", "succeeded": "green", "failed": "red",
              "skipped": "dim", "cancelled": "red"}

    def __init__(self, node_ids: Sequence[str]) -> None:
        from rich.console import Console
        from rich.live import Live

        self.states = dict.fromkeys(node_ids, "pending")
        self.live = Live(self._table(), console=Console(stderr=True), refresh_per_second=12, transient=False)

    def _table(self) -> Any:
        from rich.table import Table

        table = Table(show_header=True, header_style="bold")
        table.add_column("node")
        table.add_column("state")
        for node_id, state in self.states.items():
            table.add_row(node_id, f"[{self.STYLES.get(state, 'white')}]{state}[/]")
        return table

    def __call__(self, event: Event) -> None:
        if event.top_level and event.type in self.SYMBOLS and event.node_id in self.states:
            self.states[event.node_id] = self.SYMBOLS[event.type]
            self.live.update(self._table())


class TerminalAnswers:
    """Answers a run's `human` questions from this terminal: a prompt per question when stdin is a
    terminal, else one JSON object per line of stdin (`echo '{"approved": true}' | ice-mcp run gate.yaml`)."""

    def __init__(self, orchestrator: Orchestrator, progress: Progress | None) -> None:
        self._orc = orchestrator
        self._progress = progress
        self._interactive = sys.stdin.isatty()
        self._asked: asyncio.Queue[Event] = asyncio.Queue()

    def on_event(self, event: Event) -> None:
        if event.type == "node_waiting":
            self._asked.put_nowait(event)

    async def serve(self) -> None:
        """Answer questions as they come, one at a time (until cancelled)."""
        while True:
            event = await self._asked.get()
            if self._progress is not None:
                self._progress.live.stop()
            try:
                await self._answer(event)
            finally:
                if self._progress is not None:
                    self._progress.live.start()

    async def _answer(self, event: Event) -> None:
        path, data = str(event.node_id), event.data
        print(f"\n{path} asks: {data.get('question')}", file=sys.stderr)
        while True:
            try:
                answer = await _in_daemon_thread(lambda: self._read(data))
            except EOFError:
                # Nobody else can answer a question of this process: without a deadline, it is declined.
                waits = data.get("deadline") is not None
                print(f"no answer for {path} on stdin: " + ("it waits for its timeout" if waits else "declined"),
                      file=sys.stderr)
                if not waits:
                    await self._orc.respond(event.run_id, path, None, by="terminal", declined=True)
                return
            except ValueError as exc:
                print(f"  not an answer: {exc}", file=sys.stderr)
                if not self._interactive:
                    return
                continue
            try:
                await self._orc.respond(event.run_id, path, answer, by="terminal")
                return
            except NotWaiting:
                return  # timed out or cancelled meanwhile
            except AnswerInvalid as exc:
                print("  " + "; ".join(exc.problems), file=sys.stderr)
                if not self._interactive:
                    return

    def _read(self, data: dict[str, Any]) -> Any:
        """One answer: prompts on a terminal, else a JSON line. Raises ValueError (unreadable), EOFError."""
        if not self._interactive:
            line = sys.stdin.readline()
            if not line:
                raise EOFError
            return json.loads(line)
        schema = data.get("schema") or {}
        if data.get("approval"):
            approved = _yes(input("  approve? [y/n] "))
            return {"approved": approved, "reason": input("  reason: " if not approved else "  note (optional): ")}
        properties = schema.get("properties") or {}
        if not properties or any(not isinstance(p, dict) or p.get("type") in ("object", "array", None)
                                 for p in properties.values()):
            return json.loads(input("  answer (a JSON object): "))
        answer: dict[str, Any] = {}
        for name, prop in properties.items():
            choices = f" {prop['enum']}" if isinstance(prop.get("enum"), list) else ""
            text = input(f"  {prop.get('title') or name} ({prop.get('type')}){choices}: ").strip()
            if text or name in (schema.get("required") or []):
                answer[name] = _typed(text, str(prop.get("type")))
        return answer


async def _in_daemon_thread(read: Callable[[], Any]) -> Any:
    """`read()` in a daemon thread: a prompt nobody answers never keeps the process from exiting."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[Any] = loop.create_future()

    def deliver(value: Any, error: BaseException | None) -> None:
        if not done.done():
            done.set_exception(error) if error is not None else done.set_result(value)

    def work() -> None:
        try:
            value, error = read(), None
        except BaseException as exc:  # handed to the awaiting task
            value, error = None, exc
        try:
            loop.call_soon_threadsafe(deliver, value, error)
        except RuntimeError:
            pass  # the loop closed: nobody waits any more

    threading.Thread(target=work, name="ice_mcp-terminal-answer", daemon=True).start()
    return await done


def _yes(text: str) -> bool:
    return text.strip().lower() in ("y", "yes", "true", "1", "ok")


def _typed(text: str, kind: str) -> Any:
    if kind == "boolean":
        return _yes(text)
    if kind == "integer":
        return int(text)
    if kind == "number":
        return float(text)
    return text


def plan_to_run(orchestrator: Orchestrator, file_or_name: str) -> Plan:
    """What `run` runs: a registered workflow, else a blueprint file, else a bundled template of that name."""
    workflows = orchestrator.registry.workflows
    if file_or_name not in workflows:
        path = Path(file_or_name)
        if path.exists():
            return orchestrator.compile(path)
        for problem in orchestrator.load_blueprints(bundled_dir("blueprints")):
            print(f"warning: bundled template not registered: {problem.message}", file=sys.stderr)
    entry = workflows.get(file_or_name)
    if entry is None:
        suggestion = nearest(file_or_name, workflows)
        hint = f"; did you mean {suggestion!r}?" if suggestion else f"; workflows: {', '.join(sorted(workflows))}"
        raise IceError(f"{file_or_name!r} is neither a blueprint file nor a workflow name{hint}",
                       code="unknown_workflow", details={"name": file_or_name})
    return orchestrator.workflow_plan(file_or_name)


async def _run(args: argparse.Namespace) -> int:
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
    orchestrator = await make_orchestrator(args)
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


def _runs(args: argparse.Namespace) -> int:
    if args.runs_command == "retry":
        return asyncio.run(_retry(args))
    orchestrator = Orchestrator(settings=Settings.from_env(data_dir=args.data_dir, state_url=args.state))
    try:
        return _show_runs(orchestrator, args)
    finally:
        orchestrator.close()


def _show_runs(orchestrator: Orchestrator, args: argparse.Namespace) -> int:
    if args.runs_command == "list":
        for record in orchestrator.list_runs(status=args.status, workflow=args.workflow, limit=args.limit):
            data = record.to_dict()
            print(f"{record.run_id}  {data['started_at']}  {record.status:<11} {record.workflow}")
        return 0
    found = orchestrator.get_run(args.run_id)
    if found is None:
        print(f"no run {args.run_id!r}", file=sys.stderr)
        return 1
    data = found.to_dict()
    if args.events:
        data["events"] = orchestrator.run_events(args.run_id)
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

    async def serve() -> None:
        # The worker's own orchestrator runs in-process what an activity runs inside it (an agent's workflows),
        # with the upstream tools of its --mcp-config (each worker holds its own connections).
        orchestrator = await make_orchestrator(
            args, engine="embedded",
            temporal_address=args.temporal, temporal_namespace=args.namespace, temporal_task_queue=args.task_queue)
        stop = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
        try:
            await run_worker(orchestrator, concurrency=args.concurrency, stop=stop)
        finally:
            await orchestrator.aclose()

    try:
        asyncio.run(serve())
    except KeyboardInterrupt:
        pass
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    try:
        try:
            return _dispatch(argv)
        finally:
            sys.stdout.flush()  # a reader gone away shows here (after --help too), while we can answer quietly
    except BrokenPipeError:
        # Whatever is left for stdout goes nowhere, so the flush at exit does not complain either.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return BROKEN_PIPE_EXIT


def _dispatch(argv: Sequence[str] | None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if getattr(args, "handler", None) is not None:
            return int(args.handler(args) or 0)
        if args.command == "run":
            return asyncio.run(_run(args))
        if args.command == "validate":
            return asyncio.run(_validate(args))
        if args.command == "network":
            return asyncio.run(_network(args))
        if args.command == "runs":
            return _runs(args)
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
