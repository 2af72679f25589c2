"""`ice-mcp serve`, `ice-mcp ui`, `ice-mcp dev-cluster` and `ice-mcp claude-config`, and what every command
shares: the parser whose help shows defaults, and the default workspace.

The orchestrator (the engine, the store, the compiler) loads inside `server_orchestrator`: a stdio server may answer
its host's first requests before (see warm_start), and parsing a command line never needs it."""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import logging
import os
import shutil
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from ice_mcp.bundled import SAMPLES_FOLDER, seed_workspace
from ice_mcp.errors import IceError
from ice_mcp.observability import tracing
from ice_mcp.server.auth.resource_server import OAuthConfig
from ice_mcp.server.dev_tools import CONFORMANCE_MODULE, add_dev_cluster_command, dev_module
from ice_mcp.server.extensions import load_extension
from ice_mcp.server.options import ServerOptions
from ice_mcp.server.web.serving import bind_listener, serve_http
from ice_mcp.server.web.ui.viewer import add_catalogue_arguments, add_ui_command, run_server
from ice_mcp.settings import Settings
from ice_mcp.tools.egress import allow_net_argument

if TYPE_CHECKING:
    from ice_mcp.orchestrator import Orchestrator

logger = logging.getLogger("ice_mcp.server")
WORKSPACE_NAME = "ice-mcp-workspace"
WORKSPACE_HELP = f"the only folder file tools may use (ICE_MCP_WORKSPACE; default ~/{WORKSPACE_NAME}, created, with " \
                 f"sample files in {SAMPLES_FOLDER}/ when new)"
DATA_DIR_HELP = "where runs are kept (ICE_MCP_DATA_DIR; default ~/.local/share/ice_mcp, shared by every ice-mcp " \
                "on this machine that is not given another)"
LOG_LEVEL_HELP = "what the log shows: DEBUG, INFO, WARNING or ERROR (ICE_MCP_LOG_LEVEL)"
# Help for options that rooms of their own define without it (the run view's `ice-mcp ui`).
FALLBACK_HELP = {"host": "the address to listen on", "port": "the TCP port to listen on (0: any free one)",
                 "log_level": LOG_LEVEL_HELP}
# Options whose default is decided when the command runs (environment, home folder): said in their help.
RUNTIME_DEFAULTS = {"workspace": f"~/{WORKSPACE_NAME}", "data_dir": "~/.local/share/ice_mcp"}


class HelpWithDefaults(argparse.HelpFormatter):
    """Every option's help ends with its default, unless its text already says it."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        if (text and action.option_strings and "default" not in text and action.nargs != 0
                and default not in (None, [], (), argparse.SUPPRESS)):
            return f"{text} (default: %(default)s)"
        return text


class IceArgumentParser(argparse.ArgumentParser):
    """The command line's parser: its sub-commands are of this class too, so every `--help` shows defaults."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", HelpWithDefaults)
        super().__init__(*args, **kwargs)


def complete_help(parser: argparse.ArgumentParser) -> None:
    """Give every option of `parser` and its sub-commands a help text that says its default (FALLBACK_HELP,
    RUNTIME_DEFAULTS), whichever room defined the option."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in dict.fromkeys(action.choices.values()):  # aliases share a parser
                complete_help(child)
            continue
        if not action.help and action.dest in FALLBACK_HELP:
            action.help = FALLBACK_HELP[action.dest]
        runtime = RUNTIME_DEFAULTS.get(action.dest)
        if runtime and action.help and "default" not in action.help:
            action.help = f"{action.help} (default: {runtime})"


def apply_default_workspace(args: argparse.Namespace) -> None:
    """A command with `--workspace` and neither it nor ICE_MCP_WORKSPACE set uses ~/ice-mcp-workspace, the folder
    `claude-config` names too: never the current folder (a checkout's git tree, or `/` for Claude Desktop)."""
    if "workspace" in vars(args) and args.workspace is None and not os.environ.get("ICE_MCP_WORKSPACE"):
        args.workspace = default_workspace()


def add_serve_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--http", action="store_true", help="serve Streamable HTTP instead of stdio"
    )
    parser.add_argument("--auth", choices=("token", "oauth"), default=os.environ.get("ICE_MCP_AUTH") or "token",
                        help="who may call `--http`: the static ICE_MCP_TOKEN (default), or OAuth access tokens "
                             "(ICE_MCP_RESOURCE, ICE_MCP_ISSUER, ...: see the README) (ICE_MCP_AUTH)")
    parser.add_argument("--forwarded-allow-ips", metavar="IPS",
                        default=os.environ.get("ICE_MCP_FORWARDED_ALLOW_IPS") or None,
                        help="behind a reverse proxy: the proxies (comma-separated IPs, or *) whose X-Forwarded-For "
                             "makes a client's address real (ICE_MCP_FORWARDED_ALLOW_IPS; default 127.0.0.1)")
    parser.add_argument("--host", default="127.0.0.1",
                        help="with --http: the address to listen on (0.0.0.0 for every interface)")
    parser.add_argument("--port", type=int, default=8000, help="with --http: the TCP port (0: any free one)")
    parser.add_argument(
        "--stateless", action="store_true", help="no sessions (for replicas behind a load balancer)"
    )
    parser.add_argument(
        "--read-only",
        action="store_true",
        help="offer only tools whose readOnlyHint is true (no file writes, no ad-hoc blueprints)",
    )
    parser.add_argument(
        "--canonical-names", action="store_true", help="advertise workflow:<name> ids"
    )
    add_catalogue_arguments(parser, "register blueprints from DIR")
    parser.add_argument(
        "--include", action="append", default=[], metavar="PATTERN", help="list only matching tools"
    )
    parser.add_argument(
        "--exclude", action="append", default=[], metavar="PATTERN", help="hide matching tools"
    )
    parser.add_argument(
        "--wait-seconds", type=float, default=None,
        help="how long a tool call waits for its run before it answers status 'running' with the run's id "
             "(ICE_MCP_WAIT_SECONDS; default 25)"
    )
    parser.add_argument("--pin", action="append", default=[], metavar="NAME",
                        help="keep workflow NAME in tools/list when there are more workflows than "
                             "ICE_MCP_CATALOGUE_MAX (40) (repeatable)")
    parser.add_argument(
        "--allowed-host", action="append", default=[], help="extra Host header value to accept"
    )
    parser.add_argument("--data-dir", type=Path, help=DATA_DIR_HELP)
    parser.add_argument("--state", metavar="URL", help="keep runs, journals, keys, spend and blueprints in a store "
                                                       "that replicas share: redis://HOST:PORT/DB or "
                                                       "postgresql://USER@HOST:PORT/DB (ICE_MCP_STATE)")
    parser.add_argument("--max-runs", type=int, metavar="N", help="run at most N runs at once; more wait for a "
                                                                   "slot (ICE_MCP_MAX_RUNS)")
    parser.add_argument("--workspace", type=Path, help=WORKSPACE_HELP)
    parser.add_argument("--allow-net", action="append", type=allow_net_argument, metavar="CIDR|HOST",
                        help="let outbound fetches reach this private address range or host (repeatable; "
                             "ICE_MCP_ALLOW_NET)")
    parser.add_argument("--engine", choices=("embedded", "temporal"),
                        help="what runs the runs: this process (embedded, the default) or Temporal workers "
                             "(ICE_MCP_ENGINE)")
    parser.add_argument("--temporal", metavar="HOST:PORT", help="the Temporal frontend (ICE_MCP_TEMPORAL)")
    parser.add_argument("--namespace", help="Temporal namespace (ICE_MCP_TEMPORAL_NAMESPACE; default 'default')")
    parser.add_argument("--task-queue", help="Temporal task queue (ICE_MCP_TEMPORAL_TASK_QUEUE; default 'ice-mcp')")
    add_upstream_arguments(parser)
    parser.add_argument("--expose-upstream", action="store_true",
                        help="list the --mcp-config servers' tools on this server's catalogue too "
                             "(as tool_SERVER__TOOL)")
    parser.add_argument("--sandbox-expressions", action="store_true",
                        help="evaluate conditions and convergence in the WebAssembly sandbox")
    parser.add_argument("--extend", action="append", default=[], metavar="MODULE",
                        help="import MODULE and call its extend(orchestrator, additions): MCP tools, resources "
                             "and prompts of its own (repeatable)")
    parser.add_argument("--conformance-fixtures", action="store_true",
                        help="serve the MCP conformance suite's fixtures (the same as --extend ice_mcp_dev.conformance)")
    parser.add_argument("--log-level", default=os.environ.get("ICE_MCP_LOG_LEVEL", "WARNING"), help=LOG_LEVEL_HELP)
    parser.add_argument("--log-file", type=Path, default=os.environ.get("ICE_MCP_LOG_FILE") or None,
                        help="append logs (everything the server writes to stderr) to this file")


def add_upstream_arguments(parser: argparse.ArgumentParser) -> None:
    """`--mcp-config FILE`: for every command that runs or checks workflows (and a worker)."""
    parser.add_argument("--mcp-config", action="append", default=[], metavar="FILE",
                        help="use the tools of the MCP servers in this Claude Desktop-format file as SERVER.TOOL "
                             "(repeatable; also ICE_MCP_MCP_CONFIG=a.json,b.json)")


def add_serve_commands(subparsers: Any) -> None:
    """Add `serve`, `ui` and `claude-config` to the main CLI's subparsers (each sets `handler`)."""
    serve = subparsers.add_parser(
        "serve", help="run the MCP server (stdio, or --http)",
        description="Serve workflows, tools and agents as MCP tools: over stdio for a client that starts the "
                    "server (Claude Desktop), or over Streamable HTTP with --http (/mcp, /rpc, /ui, /healthz).")
    add_serve_arguments(serve)
    # `resume_gc`: the command line may pause the cyclic GC for the start-up and set this; `_serve` calls it once
    # the server is up (see `_started`).
    serve.set_defaults(handler=run_serve, resume_gc=None)
    config = subparsers.add_parser(
        "claude-config", help="print the claude_desktop_config.json block"
    )
    config.add_argument("--name", default="ice-mcp", help="the server's name in mcpServers")
    config.add_argument("--workspace", type=Path,
                        help=f"the only folder the server's file tools may use (default ~/{WORKSPACE_NAME}, created, "
                             f"with sample files in {SAMPLES_FOLDER}/ when new)")
    config.set_defaults(handler=run_claude_config)
    add_ui_command(subparsers)
    add_dev_cluster_command(subparsers)


def _options(args: argparse.Namespace) -> ServerOptions:
    options = ServerOptions(
        canonical_names=args.canonical_names,
        read_only=args.read_only,
        include=tuple(args.include),
        exclude=tuple(args.exclude),
        expose_upstream=args.expose_upstream,
        pinned=tuple(args.pin),
    )
    if args.wait_seconds is not None:
        options.wait_seconds = args.wait_seconds
    if args.http and args.auth == "oauth":  # stdio never asks for a token
        try:
            options.oauth = OAuthConfig.from_env()
        except ValueError as exc:
            raise IceError(str(exc), code="invalid_config") from None
    return options


def serve_settings(args: argparse.Namespace) -> Settings:
    """The settings `serve` runs with: its arguments over the environment's."""
    return Settings.from_env(data_dir=getattr(args, "data_dir", None), workspace=getattr(args, "workspace", None),
                             name_workspace=not getattr(args, "http", False),  # over HTTP callers are remote
                             state_url=getattr(args, "state", None),
                             max_concurrent_runs=getattr(args, "max_runs", None),
                             sandbox_expressions=getattr(args, "sandbox_expressions", False) or None,
                             allow_net=tuple(getattr(args, "allow_net", None) or ()) or None,
                             engine=getattr(args, "engine", None), temporal_address=getattr(args, "temporal", None),
                             temporal_namespace=getattr(args, "namespace", None),
                             temporal_task_queue=getattr(args, "task_queue", None))


async def server_orchestrator(args: argparse.Namespace, options: ServerOptions, settings: Settings | None = None
                              ) -> Orchestrator:
    # The engine and its imports (~200 ms): only once serving.
    from ice_mcp.assembly import build_orchestrator, load_blueprint_folders

    settings = settings or serve_settings(args)
    copied = seed_workspace(settings.workspace)  # the folder named by claude-config may be new
    if copied:
        logger.info("workspace %s: sample files copied: %s", settings.workspace, ", ".join(copied))
    orc = build_orchestrator(settings, tools=args.tools)
    try:
        extensions = list(getattr(args, "extend", None) or [])
        if getattr(args, "conformance_fixtures", False):
            dev_module("conformance")  # found in the checkout (imported by name: the server never depends on it)
            extensions.append(CONFORMANCE_MODULE)
        for module in extensions:
            load_extension(module, orc, options.additions)
        # Before any blueprint: validation (and resumed runs) need the upstream tools' schemas.
        await orc.connect_upstream(args.mcp_config)
    except BaseException:
        await orc.aclose()
        raise
    for problem in load_blueprint_folders(orc, args.blueprints, templates=getattr(args, "templates", False)):
        logger.warning("blueprint not registered: %s", problem.message)
    for pin in options.pinned:  # a misspelt pin would leave its workflow out of a large list without a word
        if pin not in orc.registry.workflows and pin.removeprefix("workflow_") not in orc.registry.workflows:
            logger.warning("--pin %s: no such workflow (yet)", pin)
    resumed = orc.recover_interrupted_runs()  # last: resumed runs need every tool and workflow registered
    if resumed:
        logger.warning("resumed %d run(s) left running by a server that stopped", resumed)
    if orc.store is not None:
        orc.schedules.start_loop()  # every server on a store takes part in firing its schedules
        orc.notifications.start_loop()  # and in delivering its notifications
        if settings.engine == "temporal":
            await _temporal_clock(orc)
    return orc


async def _temporal_clock(orc: Orchestrator) -> None:
    """On the temporal engine each schedule is also a Temporal Schedule (the clock); repair drift at start."""
    from ice_mcp.engines.temporal.client import connect  # temporalio: only on this engine
    from ice_mcp.engines.temporal.clock import open_clock

    assert orc.store is not None
    try:
        clock = await open_clock(await connect(orc.settings, orc.store), orc.settings.temporal_task_queue,
                                 orc.schedules)
        orc.schedules.mirror = clock
        done = await clock.reconcile(orc.store.schedules())
    except Exception as exc:  # Temporal away: the servers' firing loop keeps every schedule firing
        logger.warning("schedules: Temporal Schedules not kept in step (the firing loop fires them): %s", exc)
        return
    logger.info("schedules: Temporal Schedules reconciled: %s", done)


async def _serve(args: argparse.Namespace) -> None:
    options = _options(args)
    tracing.configure(stdio=not args.http)  # only OTEL_* variables turn it on; off, the SDK is never imported
    if not args.http:
        from ice_mcp.server.stdio import serve_stdio_starting  # the MCP SDK: only `serve` loads it
        from ice_mcp.server.warm_start import WarmStart

        settings = serve_settings(args)

        @contextlib.asynccontextmanager
        async def orchestrator() -> AsyncIterator[Orchestrator]:
            orc = await server_orchestrator(args, options, settings)
            try:
                _started(args, collect=False)
                yield orc
            finally:
                await orc.aclose(suspend=True)  # runs in flight go on in the next server on this data folder
                tracing.shutdown()  # the host may kill us soon after EOF: export what is queued now

        await serve_stdio_starting(orchestrator, options, WarmStart.for_serve(args, settings))
        return
    # Take the port before anything else: a busy port fails at once, with nothing announced.
    with bind_listener(args.host, args.port) as listener:
        from ice_mcp.server.web.app import (
            create_http_app,  # the MCP SDK, Starlette: only `serve` loads them
        )

        orc = await server_orchestrator(args, options)
        try:
            port = listener.getsockname()[1]
            app = create_http_app(
                orc,
                options,
                host=args.host,
                port=port,
                stateless=args.stateless,
                allowed_hosts=args.allowed_host,
            )
            workflows = sorted(orc.registry.workflows)
            _started(args, collect=True)
            await serve_http(app, listener, args.log_level,
                             on_started=lambda: announce(args.host, port, workflows, settings=orc.settings),
                             forwarded_allow_ips=args.forwarded_allow_ips)
        finally:
            await orc.aclose(suspend=True)  # runs in flight go on in the next server on this data folder


def _started(args: argparse.Namespace, *, collect: bool) -> None:
    """The server is built. Start-up objects live as long as it does: out of the GC's generations with them, so
    that no full pass walks them again (latency). Then the collector runs again if the command line paused it.
    `collect`: first free the start-up's garbage (~85 ms of CPU); a stdio server, which its host starts for each
    session and waits for, keeps that (~1 MB of cycles, the parser's mostly) instead."""
    if collect:
        gc.collect()
    gc.freeze()
    resume = getattr(args, "resume_gc", None)
    if resume is not None:
        resume()


def announce(host: str, port: int, workflows: list[str], *, settings: Settings | None = None) -> None:
    """What `make run` shows: where the server listens, where its files and runs are, and how to use it from
    Claude Desktop (stderr)."""
    url_host = f"[{host}]" if ":" in host else host
    lines = [
        f"ice_mcp: MCP over Streamable HTTP at http://{url_host}:{port}/mcp (JSON-RPC at /rpc, health at /healthz)",
        f"ice_mcp: run view in a browser at http://{url_host}:{port}/ui",
        f"ice_mcp: {len(workflows)} workflow(s): {', '.join(workflows) or '(none)'}",
    ]
    if settings is not None:
        lines.append(f"ice_mcp: files in {settings.workspace} (--workspace), runs in {runs_location(settings)} "
                     "(--data-dir)")
    lines += ["ice_mcp: for Claude Desktop (stdio), add this to claude_desktop_config.json:",
              json.dumps(claude_config(), indent=2)]
    print("\n".join(lines), file=sys.stderr, flush=True)


def runs_location(settings: Settings) -> str:
    """Where a command reads and writes runs: the shared store's URL (without its password) or the data folder."""
    if not settings.state_url:
        return str(settings.data_dir)
    parts = urlsplit(settings.state_url)
    if parts.password is None:
        return settings.state_url
    host = parts.hostname or ""
    netloc = f"{parts.username or ''}:***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


def run_serve(args: argparse.Namespace) -> int:
    if args.log_file is not None:
        # Before any logging is configured, so uvicorn's handlers and late tracebacks land there too.
        sys.stderr = open(args.log_file, "a", buffering=1, encoding="utf-8")  # noqa: SIM115
    return run_server(_serve, args)


def default_workspace() -> Path:
    """Where a Claude Desktop server keeps its files unless told otherwise: never the process's current
    folder, which for Claude Desktop may be `/`."""
    return Path.home() / WORKSPACE_NAME


def claude_config(name: str = "ice-mcp", workspace: Path | None = None) -> dict[str, Any]:
    """The `mcpServers` block for this installation, with absolute paths and an explicit workspace."""
    script = Path(sys.executable).with_name("ice-mcp")
    if script.exists():
        command, cmd_args = str(script), ["serve"]
    elif found := shutil.which("ice-mcp"):
        command, cmd_args = str(Path(found).resolve()), ["serve"]
    else:
        command, cmd_args = str(Path(sys.executable).absolute()), ["-m", "ice_mcp.server", "serve"]
    folder = (workspace or default_workspace()).expanduser().resolve()
    server: dict[str, Any] = {"command": command, "args": [*cmd_args, "--templates", "--workspace", str(folder)]}
    if cmd_args[0] == "-m":
        # The folder that holds the ice_mcp package (a checkout, or site-packages).
        server["env"] = {"PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    return {"mcpServers": {name: server}}


def run_claude_config(args: argparse.Namespace) -> int:
    config = claude_config(getattr(args, "name", "ice-mcp"), getattr(args, "workspace", None))
    workspace = Path(next(iter(config["mcpServers"].values()))["args"][-1])
    if seed_workspace(workspace):  # stderr: stdout is the block to paste
        print(f"ice_mcp: sample files copied into {workspace / SAMPLES_FOLDER}", file=sys.stderr)
    print(json.dumps(config, indent=2))
    return 0


def serve_main(argv: list[str]) -> int:
    """`serve ...` or `claude-config`: for callers that do not share the main parser."""
    parser = IceArgumentParser(prog="ice-mcp")
    add_serve_commands(parser.add_subparsers(dest="command", required=True))
    complete_help(parser)
    args = parser.parse_args(argv)
    apply_default_workspace(args)
    return int(args.handler(args))
