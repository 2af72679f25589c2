"""The MCP server: a low-level `Server` whose catalogue, resources and prompts come from the orchestrator."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

import mcp_types as types
from mcp import MCPError
from mcp.server import Server
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import NotificationOptions
from mcp.server.models import InitializationOptions
from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity
from mcp.server.subscriptions import ListenHandler
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel, ConfigDict

from ice_mcp.errors import IceError
from ice_mcp.orchestrator import Orchestrator
from ice_mcp.server.access import caller_id, may_administer
from ice_mcp.server.calls import ToolCalls
from ice_mcp.server.catalogue import Catalogue
from ice_mcp.server.notify import ChangeNotifier
from ice_mcp.server.options import ServerOptions
from ice_mcp.server.prompts import Prompts
from ice_mcp.server.resources import TEMPLATES, Resources

logger = logging.getLogger(__name__)

INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
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


def build_server(orc: Orchestrator, options: ServerOptions | None = None) -> IceServer:
    """The MCP server for `orc`. Registering or removing anything in its registry notifies clients."""
    options = options or ServerOptions()
    catalogue = Catalogue(orc, options)
    notifier = ChangeNotifier()
    resources = Resources(orc, options)
    prompts = Prompts(orc, options)
    calls = ToolCalls(orc, options, catalogue)
    fixtures = options.fixtures

    def on_registry_change(*_: Any) -> None:
        catalogue.invalidate()
        notifier.changed()

    orc.registry.subscribe(on_registry_change)

    # Each handler remembers its 2025-era connection, to tell it of catalogue changes (no middleware layer).
    remember = notifier.remember

    async def list_tools(ctx: ServerRequestContext[Any, Any], params: Any) -> types.ListToolsResult:
        remember(ctx)
        return types.ListToolsResult(
            tools=catalogue.listed(admin=may_administer(_request(ctx), options))
        )

    async def call_tool(
        ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        remember(ctx)
        entry = catalogue.resolve(params.name)
        if entry is None:
            raise MCPError(
                INVALID_PARAMS, f"Unknown tool: {params.name!r}", data={"name": params.name}
            )
        if fixtures is not None and entry.kind == "tool" and fixtures.handles(entry.target):
            return await fixtures.call(entry.target, ctx, params)
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
        extra = fixtures.resources() if fixtures is not None else []
        return types.ListResourcesResult(resources=resources.listing() + extra)

    async def list_templates(
        ctx: ServerRequestContext[Any, Any], params: Any
    ) -> types.ListResourceTemplatesResult:
        remember(ctx)
        extra = fixtures.templates() if fixtures is not None else []
        return types.ListResourceTemplatesResult(resource_templates=list(TEMPLATES) + extra)

    async def read_resource(
        ctx: ServerRequestContext[Any, Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        remember(ctx)
        if fixtures is not None and (found := fixtures.read(str(params.uri))) is not None:
            return found
        return resources.read(str(params.uri))

    async def list_prompts(
        ctx: ServerRequestContext[Any, Any], params: Any
    ) -> types.ListPromptsResult:
        remember(ctx)
        extra = fixtures.prompts() if fixtures is not None else []
        return types.ListPromptsResult(prompts=prompts.listing() + extra)

    async def get_prompt(
        ctx: ServerRequestContext[Any, Any], params: types.GetPromptRequestParams
    ) -> types.GetPromptResult | types.InputRequiredResult:
        remember(ctx)
        if fixtures is not None and (found := fixtures.get_prompt(params)) is not None:
            return found
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

    server = IceServer(
        options.name,
        version=options.version,
        title="ice_mcp",
        instructions=INSTRUCTIONS,
        get_tool_input_schema=catalogue.input_schema,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_list_resource_templates=list_templates,
        on_read_resource=read_resource,
        on_list_prompts=list_prompts,
        on_get_prompt=get_prompt,
        on_completion=complete,
        on_subscriptions_listen=ListenHandler(notifier.bus),
    )
    # Seal the multi-round-trip requestState: clients echo it back, so it is attacker-controlled.
    server.middleware.append(
        RequestStateBoundary(RequestStateSecurity.ephemeral(), default_audience=options.name)
    )
    if fixtures is not None:
        fixtures.notifier = notifier
        _add_fixture_handlers(server, fixtures)

    async def network_execute(
        ctx: ServerRequestContext[Any, Any], params: NetworkExecuteParams
    ) -> dict[str, Any]:
        try:
            return await calls.network(params.manifest, params.wait_seconds, params.idempotency_key,
                                       caller_id(_request(ctx)))
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


def _add_fixture_handlers(server: IceServer, fixtures: Any) -> None:
    """logging/setLevel and resource subscriptions, which only the conformance fixtures use."""

    async def set_level(
        ctx: ServerRequestContext[Any, Any], params: types.SetLevelRequestParams
    ) -> types.EmptyResult:
        return types.EmptyResult()

    async def subscribe(
        ctx: ServerRequestContext[Any, Any], params: types.SubscribeRequestParams
    ) -> types.EmptyResult:
        fixtures.subscriptions.add(str(params.uri))
        return types.EmptyResult()

    async def unsubscribe(
        ctx: ServerRequestContext[Any, Any], params: types.UnsubscribeRequestParams
    ) -> types.EmptyResult:
        fixtures.subscriptions.discard(str(params.uri))
        return types.EmptyResult()

    server.add_request_handler("logging/setLevel", types.SetLevelRequestParams, set_level)
    server.add_request_handler("resources/subscribe", types.SubscribeRequestParams, subscribe)
    server.add_request_handler("resources/unsubscribe", types.UnsubscribeRequestParams, unsubscribe)
