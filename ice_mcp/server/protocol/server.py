"""The MCP server: a low-level `Server` whose catalogue, resources and prompts come from the orchestrator."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import mcp_types as types
from mcp import MCPError
from mcp.server import Server
from mcp.server.apps import client_supports_apps
from mcp.server.context import HandlerResult, ServerRequestContext
from mcp.server.extension import Extension, MethodBinding, RequestHandler, compose_tool_call_handler
from mcp.server.lowlevel.server import NotificationOptions
from mcp.server.models import InitializationOptions
from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel, ConfigDict

from ice_mcp.bundled import workspace_note
from ice_mcp.errors import IceError
from ice_mcp.operations.arguments import check_arguments
from ice_mcp.operations.builtins import BY_NAME
from ice_mcp.operations.run_relay import RunLog
from ice_mcp.orchestrator import Orchestrator
from ice_mcp.server.auth.callers import ActingPrincipal, caller_id, may_administer, principal_of
from ice_mcp.server.extensions import NativeTool
from ice_mcp.server.options import ServerOptions
from ice_mcp.server.protocol.app_view import RunViewApp, with_run_view
from ice_mcp.server.protocol.calls import ToolCalls
from ice_mcp.server.protocol.catalogue import Catalogue
from ice_mcp.server.protocol.editor_app import with_editor
from ice_mcp.server.protocol.envelope import error_result
from ice_mcp.server.protocol.follow import CallAnswer, CallWay
from ice_mcp.server.protocol.listen import Listen
from ice_mcp.server.protocol.notify import ChangeNotifier
from ice_mcp.server.protocol.prompts import Prompts
from ice_mcp.server.protocol.resources import RUN_URI, TEMPLATES, Resources, visible_uri
from ice_mcp.server.protocol.tasks import TasksExtension, can_elicit, modern, negotiated
from ice_mcp.store.events import Event
from ice_mcp.store.vocabulary import QUESTION_EVENTS, RUN_EVENTS

logger = logging.getLogger(__name__)

INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
METHOD_NOT_FOUND = -32601
FORBIDDEN = -32003
INSTRUCTIONS = (
    "Every registered workflow is a tool named workflow_<name> (canonical id workflow:<name>). "
    "A call returns {run_id, status, outputs, error, cost_usd, duration_ms}; a run still going after "
    "the wait budget answers status 'running': follow it with run_result(run_id). "
    "Read ice://docs/getting-started to begin."
)


class NetworkExecuteParams(BaseModel):
    """Params of the `network.execute` JSON-RPC method on /mcp."""

    model_config = ConfigDict(extra="allow")
    manifest: dict[str, Any] | str
    wait_seconds: float | None = None
    idempotency_key: str | None = None


class IceServer(Server[Any]):
    """Advertises listChanged to 2025 sessions (the low-level default says no)."""

    ice_calls: ToolCalls
    ice_catalogue: Catalogue
    ice_notifier: ChangeNotifier

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        return super().create_initialization_options(
            notification_options or NotificationOptions(tools_changed=True, resources_changed=True),
            experimental_capabilities,
            extensions,
        )


def _request(ctx: ServerRequestContext[Any, Any]) -> Any:
    return ctx.request


def _wants_progress(ctx: ServerRequestContext[Any, Any], meta: Any) -> bool:
    """On the wire a progressToken comes in `_meta`; an in-process modern client passes a callback instead."""
    if isinstance(meta, Mapping) and meta.get("progressToken") is not None:
        return True
    return ctx.protocol_version in MODERN_PROTOCOL_VERSIONS and ctx.request is None


# A resources/subscribe or resources/unsubscribe handler.
Subscription = Callable[[ServerRequestContext[Any, Any], Any], Awaitable[types.EmptyResult]]
STATUS_EVENTS = RUN_EVENTS | QUESTION_EVENTS  # the events that change a run record's status


def build_server(orc: Orchestrator, options: ServerOptions | None = None) -> IceServer:
    """The MCP server for `orc`. Registering or removing anything in its registry notifies clients."""
    options = options or ServerOptions()
    catalogue = Catalogue(orc, options)
    notifier = ChangeNotifier()
    resources = Resources(orc, options)
    prompts = Prompts(orc, options)
    calls = ToolCalls(orc, options, catalogue)
    listen = Listen(notifier.bus, calls.view)
    added = options.additions

    def on_registry_change(kind: str, name: str) -> None:
        catalogue.invalidate()
        notifier.changed()
        if kind == "workflow":
            notifier.resource_updated(f"ice://workflows/{name}")

    def on_additions_change(kind: str) -> None:
        if kind == "tools":
            catalogue.invalidate()
            notifier.changed()
        else:
            notifier.prompts_changed_soon()

    def on_run_event(event: Event) -> None:
        if event.type in STATUS_EVENTS:  # the run record's status changed: tell its subscribers
            notifier.resource_updated(f"{RUN_URI}{event.run_id}")
            listen.task_changed(event.run_id)

    orc.registry.subscribe(on_registry_change)
    added.listeners.append(on_additions_change)
    orc.watch_runs(on_run_event)

    # Each handler remembers its 2025-era connection, to tell it of catalogue changes (no middleware layer).
    remember = notifier.remember

    async def list_tools(ctx: ServerRequestContext[Any, Any], params: Any) -> types.ListToolsResult:
        remember(ctx)
        request = _request(ctx)
        scopes = principal_of(request).scopes if options.oauth is not None else None  # OAuth: what it may call
        tools = catalogue.listed(admin=may_administer(request, options), scopes=scopes)
        return types.ListToolsResult(tools=with_editor(with_run_view(tools)))  # the MCP Apps on their tools

    async def call_tool(ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams) -> CallAnswer:
        remember(ctx)
        entry = catalogue.resolve(params.name)
        if entry is None:
            raise MCPError(
                INVALID_PARAMS, f"Unknown tool: {params.name!r}", data={"name": params.name}
            )
        if entry.kind == "native":
            return await _call_native(added.tools[entry.target], ctx, params)
        raw = ctx.params or {}
        meta = raw.get("_meta") if isinstance(raw, Mapping) else None
        request = _request(ctx)
        try:
            return await calls.call(
                entry,
                dict(params.arguments or {}),
                meta=meta if isinstance(meta, Mapping) else {},
                admin=may_administer(request, options),
                report=ctx.session.report_progress if _wants_progress(ctx, meta) else None,
                caller=caller_id(request),  # budgets are per caller
                log=_run_log(ctx, notifier),
                way=_call_way(ctx, params),
            )
        except (MCPError, asyncio.CancelledError):
            raise
        except Exception:
            logger.exception("tool %s failed inside the MCP layer", params.name)
            raise MCPError(INTERNAL_ERROR, "internal error") from None

    async def list_resources(
        ctx: ServerRequestContext[Any, Any], params: Any
    ) -> types.ListResourcesResult:
        remember(ctx)
        extra = [resource for resource, _ in added.resources.values()]
        return types.ListResourcesResult(resources=resources.listing() + extra)

    async def list_templates(
        ctx: ServerRequestContext[Any, Any], params: Any
    ) -> types.ListResourceTemplatesResult:
        remember(ctx)
        extra = [added_template.template for added_template in added.templates]
        return types.ListResourceTemplatesResult(resource_templates=list(TEMPLATES) + extra)

    async def read_resource(
        ctx: ServerRequestContext[Any, Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        remember(ctx)
        if (found := added.read(str(params.uri))) is not None:
            return found
        return resources.read(str(params.uri))

    async def list_prompts(
        ctx: ServerRequestContext[Any, Any], params: Any
    ) -> types.ListPromptsResult:
        remember(ctx)
        extra = [added_prompt.prompt for added_prompt in added.prompts.values()]
        return types.ListPromptsResult(prompts=prompts.listing() + extra)

    async def get_prompt(
        ctx: ServerRequestContext[Any, Any], params: types.GetPromptRequestParams
    ) -> types.GetPromptResult | types.InputRequiredResult:
        remember(ctx)
        if (added_prompt := added.prompts.get(params.name)) is not None:
            return added_prompt.get(params)
        return prompts.get(params.name, params.arguments)

    async def complete(
        ctx: ServerRequestContext[Any, Any], params: types.CompleteRequestParams
    ) -> types.CompleteResult:
        remember(ctx)
        prefix = params.argument.value or ""
        if isinstance(params.ref, types.ResourceTemplateReference):
            values = resources.complete(params.ref.uri, params.argument.name, prefix)
        else:
            values = prompts.complete(params.ref.name, params.argument.name, prefix)
        return types.CompleteResult(
            completion=types.Completion(
                values=values[:100], total=len(values), has_more=len(values) > 100
            )
        )

    async def set_level(
        ctx: ServerRequestContext[Any, Any], params: types.SetLevelRequestParams
    ) -> types.EmptyResult:
        remember(ctx)
        notifier.set_level(ctx, params.level)
        return types.EmptyResult()

    def subscription(act: Callable[[ServerRequestContext[Any, Any], str], None]) -> Subscription:
        async def handler(ctx: ServerRequestContext[Any, Any],
                          params: types.SubscribeRequestParams | types.UnsubscribeRequestParams) -> types.EmptyResult:
            remember(ctx)
            if visible_uri(orc.get_run, str(params.uri)):  # another principal's run: accepted, silent, as a random id
                act(ctx, str(params.uri))
            return types.EmptyResult()
        return handler

    server = IceServer(
        options.name,
        version=options.version,
        title="ice_mcp",
        # Where file paths point: named over stdio, "the server's workspace" to callers over HTTP.
        instructions=INSTRUCTIONS + workspace_note(orc.settings.workspace, named=orc.settings.name_workspace),
        get_tool_input_schema=catalogue.input_schema,
        on_list_tools=list_tools,
        on_list_resources=list_resources,
        on_list_resource_templates=list_templates,
        on_read_resource=read_resource,
        on_subscribe_resource=subscription(notifier.subscribe),
        on_unsubscribe_resource=subscription(notifier.unsubscribe),
        on_list_prompts=list_prompts,
        on_get_prompt=get_prompt,
        on_completion=complete,
        on_subscriptions_listen=listen,
    )
    # 2025 sessions set their log level (a 2026 request opts in through its `_meta`); the SDK warns that the
    # method is gone from 2026, which is why it is added here rather than passed to the constructor.
    server.add_request_handler("logging/setLevel", types.SetLevelRequestParams, set_level)
    apply_extensions(server, [TasksExtension(orc, options, catalogue), RunViewApp()], call_tool)
    # Seal the multi-round-trip requestState: clients echo it back, so it is attacker-controlled.
    server.middleware.append(
        RequestStateBoundary(request_state_security(orc), default_audience=options.name)
    )
    if options.oauth is not None:
        server.middleware.append(ActingPrincipal())

    async def network_execute(
        ctx: ServerRequestContext[Any, Any], params: NetworkExecuteParams
    ) -> dict[str, Any]:
        try:
            args = params.model_dump(include={"manifest", "wait_seconds", "idempotency_key"}, exclude_none=True)
            return await calls.settled(BY_NAME["network_execute"], args, caller_id(_request(ctx)),
                                       "mcp:network.execute")
        except IceError as exc:
            code = FORBIDDEN if exc.code == "forbidden" else INVALID_PARAMS
            raise MCPError(code, exc.message, data=exc.as_dict()) from None
        except (MCPError, asyncio.CancelledError):
            raise
        except Exception:
            logger.exception("network.execute failed inside the MCP layer")
            raise MCPError(INTERNAL_ERROR, "internal error") from None

    server.add_request_handler("network.execute", NetworkExecuteParams, network_execute)
    server.ice_calls = calls
    server.ice_catalogue = catalogue
    server.ice_notifier = notifier
    return server


def apply_extensions(server: IceServer, extensions: list[Extension], call_tool: RequestHandler) -> None:
    """What `MCPServer(extensions=...)` does, for this low-level server: each extension's methods (gated
    on their protocol versions), its capability, and its tools/call interceptor around `call_tool`."""
    for extension in extensions:
        for method in extension.methods():
            server.add_request_handler(method.method, method.params_type, _version_gated(method))
        server.extensions[extension.identifier] = extension.settings()
    server.add_request_handler("tools/call", types.CallToolRequestParams,
                               compose_tool_call_handler(extensions, call_tool))


def _version_gated(method: MethodBinding) -> RequestHandler:
    if method.protocol_versions is None:
        return method.handler
    versions = method.protocol_versions

    async def gated(ctx: ServerRequestContext[Any, Any], params: Any) -> HandlerResult:
        if ctx.protocol_version not in versions:
            raise MCPError(METHOD_NOT_FOUND, "Method not found", data=method.method)
        return await method.handler(ctx, params)

    return gated


def _call_way(ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams) -> CallWay:
    """What this call's client can take besides a finished result (see follow.py)."""
    elicit = None
    if not modern(ctx) and can_elicit(ctx) and ctx.session.can_send_request:

        async def elicit(message: str, schema: dict[str, Any]) -> Mapping[str, Any]:
            result = await ctx.session.elicit_form(message, schema,
                                                   related_request_id=ctx.request_id)
            return result.model_dump(by_alias=True, mode="json", exclude_none=True)

    return CallWay(tasks=negotiated(ctx), input_required=modern(ctx) and can_elicit(ctx), elicit=elicit,
                   request_state=params.request_state, input_responses=params.input_responses,
                   cancels=_cancels_run(ctx), apps=client_supports_apps(ctx))


def _cancels_run(ctx: ServerRequestContext[Any, Any]) -> Callable[[], bool] | None:
    """Whether the call's cancellation cancels its run: on 2026-07-28 always (closing the stream is
    cancellation); on a 2025 session only once the client sent notifications/cancelled for it, not when its
    connection dropped or its session ended (the run goes on: run_result finds it)."""
    if modern(ctx):
        return None
    # The request's dispatch context sets this event on notifications/cancelled (the SDK keeps it private).
    asked = getattr(getattr(ctx.session, "_request_outbound", None), "cancel_requested", None)
    return asked.is_set if asked is not None else None


async def _call_native(
    added: NativeTool, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
) -> types.CallToolResult | types.InputRequiredResult:
    """An extension's tool: its arguments checked against its schema, then its handler (never a traceback)."""
    try:
        check_arguments(added.tool.input_schema, dict(params.arguments or {}))
    except IceError as exc:
        return error_result(exc.code, f"invalid arguments for {added.tool.name}: {exc.message}", exc.details)
    try:
        return await added.handler(ctx, params)
    except (MCPError, asyncio.CancelledError):
        raise
    except Exception:
        logger.exception("tool %s failed", added.tool.name)
        raise MCPError(INTERNAL_ERROR, "internal error") from None


def _run_log(ctx: ServerRequestContext[Any, Any], notifier: ChangeNotifier) -> RunLog:
    """Log messages about a run, on the request's stream, at the levels the client asked for."""

    async def log(level: str, text: str) -> None:
        if notifier.wants_log(ctx, level):
            message = types.LoggingMessageNotificationParams(level=level, data=text,  # type: ignore[arg-type]
                                                             logger="ice_mcp.run")
            await ctx.session.send_notification(types.LoggingMessageNotification(params=message),
                                                related_request_id=ctx.request_id)

    return log


def request_state_security(orc: Orchestrator) -> RequestStateSecurity:
    """The key that seals multi-round requestState: kept in the run store, so a question asked before a
    restart, or through another replica, can still be answered; a process-local key when runs are not kept."""
    if orc.store is None:
        return RequestStateSecurity.ephemeral()
    return RequestStateSecurity(keys=[orc.store.secret("request-state")])
