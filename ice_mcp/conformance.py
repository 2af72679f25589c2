"""The official MCP conformance suite's fixtures, as an extension module (`serve --conformance-fixtures`,
the same as `serve --extend ice_mcp.conformance`).

The suite calls fixed names (`test_simple_text`, `test://static-text`, `test_simple_prompt`, `slow_compute`,
...). The content fixtures are native tools, resources and prompts added through the server's public
extension point; the task fixtures are ordinary blueprints (with `human` nodes where the suite asks for
input), so the suite drives the same runs, tasks and questions every user gets. Never enabled by default.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Awaitable, Callable
from typing import Any

import mcp_types as types
from mcp import MCPError

from ice_mcp.errors import IceError, NodeFailure
from ice_mcp.server.additions import ServerAdditions
from ice_mcp.server.protocol.envelope import to_json

IMAGE = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
AUDIO = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="
NAME_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"name": {"type": "string"}},
    "required": ["name"],
}
CONFIRM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"ok": {"type": "boolean"}},
    "required": ["ok"],
}

Ctx = Any
Handler = Callable[[Ctx, dict[str, Any], types.CallToolRequestParams], Awaitable[Any]]


def _text(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)])


def _elicit(message: str, schema: dict[str, Any]) -> types.ElicitRequest:
    return types.ElicitRequest(
        params=types.ElicitRequestFormParams(message=message, requested_schema=schema)
    )


def _sample(text: str, max_tokens: int = 100) -> types.CreateMessageRequest:
    message = types.SamplingMessage(role="user", content=types.TextContent(type="text", text=text))
    return types.CreateMessageRequest(
        params=types.CreateMessageRequestParams(messages=[message], max_tokens=max_tokens)
    )


def _content(answer: Any, key: str) -> Any:
    if isinstance(answer, types.ElicitResult) and answer.content:
        return answer.content.get(key)
    return None


class Fixtures:
    """The content fixtures, answered natively: MCP content blocks and server-to-client requests."""

    def __init__(self, orc: Any, additions: ServerAdditions) -> None:
        self.orc = orc
        self.additions = additions

    def handlers(self) -> dict[str, Handler]:
        return {name.removeprefix("_t_"): getattr(self, name) for name in dir(self) if name.startswith("_t_")}

    # -- tools --------------------------------------------------------------------------------

    async def _t_test_simple_text(self, ctx: Ctx, args: dict[str, Any], p: Any) -> Any:
        return _text("This is a simple text response for testing.")

    async def _t_test_image_content(self, ctx: Ctx, args: dict[str, Any], p: Any) -> Any:
        return types.CallToolResult(
            content=[types.ImageContent(type="image", data=IMAGE, mime_type="image/png")]
        )

    async def _t_test_audio_content(self, ctx: Ctx, args: dict[str, Any], p: Any) -> Any:
        return types.CallToolResult(
            content=[types.AudioContent(type="audio", data=AUDIO, mime_type="audio/wav")]
        )

    async def _t_test_embedded_resource(self, ctx: Ctx, args: dict[str, Any], p: Any) -> Any:
        resource = types.TextResourceContents(
            uri="test://embedded-resource",
            mime_type="text/plain",
            text="This is an embedded resource content.",
        )
        return types.CallToolResult(
            content=[types.EmbeddedResource(type="resource", resource=resource)]
        )

    async def _t_test_multiple_content_types(self, ctx: Ctx, args: dict[str, Any], p: Any) -> Any:
        resource = types.TextResourceContents(
            uri="test://mixed-content-resource",
            mime_type="application/json",
            text='{"test": "data", "value": 123}',
        )
        return types.CallToolResult(
            content=[
                types.TextContent(type="text", text="Multiple content types test:"),
                types.ImageContent(type="image", data=IMAGE, mime_type="image/png"),
                types.EmbeddedResource(type="resource", resource=resource),
            ]
        )

    async def _log(self, ctx: Ctx, text: str) -> None:
        await ctx.session.send_log_message("info", text, related_request_id=ctx.request_id)

    async def _t_test_tool_with_logging(self, ctx: Ctx, args: dict[str, Any], p: Any) -> Any:
        for step in ("Tool execution started", "Tool processing data", "Tool execution completed"):
            await self._log(ctx, step)
            await asyncio.sleep(0.05)
        return _text("Tool with logging executed successfully")

    async def _t_test_logging_tool(self, ctx: Ctx, args: dict[str, Any], p: Any) -> Any:
        return await self._t_test_tool_with_logging(ctx, args, p)

    async def _t_test_tool_with_progress(self, ctx: Ctx, args: dict[str, Any], p: Any) -> Any:
        for step in (0, 50, 100):
            await ctx.session.report_progress(step, 100, f"Completed step {step} of 100")
            await asyncio.sleep(0.05)
        meta = p.meta
        token = (
            meta.get("progressToken")
            if isinstance(meta, dict)
            else getattr(meta, "progress_token", None)
        )
        return _text(str(token if token is not None else 0))

    async def _t_test_sampling(self, ctx: Ctx, args: dict[str, Any], p: Any) -> Any:
        try:
            result = await ctx.session.create_message(
                messages=[
                    types.SamplingMessage(
                        role="user", content=types.TextContent(type="text", text=args["prompt"])
                    )
                ],
                max_tokens=100,
                related_request_id=ctx.request_id,
            )
            text = (
                result.content.text
                if getattr(result.content, "type", None) == "text"
                else "No response"
            )
            return _text(f"LLM response: {text}")
        except Exception as exc:
            return _text(f"Sampling not supported or error: {exc}")

    async def _elicit_form(self, ctx: Ctx, message: str, schema: dict[str, Any], label: str) -> Any:
        try:
            result = await ctx.session.elicit_form(
                message, schema, related_request_id=ctx.request_id
            )
            content = (
                json.dumps(result.content, separators=(",", ":"))
                if result.action == "accept"
                else "{}"
            )
            return _text(f"{label}: action={result.action}, content={content}")
        except Exception as exc:
            return _text(f"Elicitation not supported or error: {exc}")

    async def _t_test_elicitation(self, ctx: Ctx, args: dict[str, Any], p: Any) -> Any:
        schema = {
            "type": "object",
            "properties": {"response": {"type": "string", "description": "User's response"}},
            "required": ["response"],
        }
        return await self._elicit_form(ctx, args["message"], schema, "User response")

    async def _t_test_elicitation_sep1034_defaults(
        self, ctx: Ctx, args: dict[str, Any], p: Any
    ) -> Any:
        schema = {
            "type": "object",
            "properties": {
                "name": {"type": "string", "default": "John Doe", "description": "User name"},
                "age": {"type": "integer", "default": 30, "description": "User age"},
                "score": {"type": "number", "default": 95.5, "description": "User score"},
                "status": {
                    "type": "string",
                    "default": "active",
                    "enum": ["active", "inactive", "pending"],
                    "description": "User status",
                },
                "verified": {
                    "type": "boolean",
                    "default": True,
                    "description": "Verification status",
                },
            },
        }
        return await self._elicit_form(
            ctx, "Please provide user information", schema, "Elicitation result"
        )

    async def _t_test_elicitation_sep1330_enums(
        self, ctx: Ctx, args: dict[str, Any], p: Any
    ) -> Any:
        schema = {
            "type": "object",
            "properties": {
                "untitledSingle": {"type": "string", "enum": ["active", "inactive", "pending"]},
                "titledSingle": {
                    "type": "string",
                    "oneOf": [
                        {"const": "low", "title": "Low Priority"},
                        {"const": "medium", "title": "Medium Priority"},
                        {"const": "high", "title": "High Priority"},
                    ],
                },
                "untitledMulti": {
                    "type": "array",
                    "items": {"type": "string", "enum": ["read", "write", "execute"]},
                },
                "titledMulti": {
                    "type": "array",
                    "items": {
                        "anyOf": [
                            {"const": "feature", "title": "New Feature"},
                            {"const": "bug", "title": "Bug Fix"},
                            {"const": "docs", "title": "Documentation"},
                        ]
                    },
                },
                "legacyEnum": {
                    "type": "string",
                    "enum": ["small", "medium", "large"],
                    "enumNames": ["Small Size", "Medium Size", "Large Size"],
                },
            },
            "required": [
                "untitledSingle",
                "titledSingle",
                "untitledMulti",
                "titledMulti",
                "legacyEnum",
            ],
        }
        return await self._elicit_form(
            ctx,
            "Please select values using different enum schema types",
            schema,
            "Elicitation completed",
        )

    async def _t_test_error_handling(self, ctx: Ctx, args: dict[str, Any], p: Any) -> Any:
        return types.CallToolResult(
            content=[
                types.TextContent(
                    type="text", text="This tool intentionally returns an error for testing"
                )
            ],
            is_error=True,
        )

    async def _t_test_missing_capability(self, ctx: Ctx, args: dict[str, Any], p: Any) -> Any:
        caps = ctx.session.client_capabilities
        if caps is None or caps.sampling is None:
            raise MCPError(
                types.MISSING_REQUIRED_CLIENT_CAPABILITY,
                "This tool requires the client 'sampling' capability",
                data={"requiredCapabilities": {"sampling": {}}},
            )
        return _text("Client declared sampling capability; proceeding.")

    async def _t_test_streaming_elicitation(self, ctx: Ctx, args: dict[str, Any], p: Any) -> Any:
        if p.input_responses and "user_name" in p.input_responses:
            return _text(
                f"Hello, {_content(p.input_responses['user_name'], 'name') or 'stranger'}!"
            )
        return types.InputRequiredResult(
            input_requests={"user_name": _elicit("What is your name?", NAME_SCHEMA)}
        )

    async def _t_test_input_required_result_elicitation(
        self, ctx: Ctx, args: dict[str, Any], p: Any
    ) -> Any:
        return await self._t_test_streaming_elicitation(ctx, args, p)

    async def _t_test_input_required_result_sampling(
        self, ctx: Ctx, args: dict[str, Any], p: Any
    ) -> Any:
        answer = (p.input_responses or {}).get("capital_question")
        if isinstance(answer, types.CreateMessageResult):
            text = getattr(answer.content, "text", "?")
            return _text(f"Model said: {text}")
        return types.InputRequiredResult(
            input_requests={"capital_question": _sample("What is the capital of France?")}
        )

    async def _t_test_input_required_result_list_roots(
        self, ctx: Ctx, args: dict[str, Any], p: Any
    ) -> Any:
        answer = (p.input_responses or {}).get("client_roots")
        if isinstance(answer, types.ListRootsResult):
            return _text(f"Client exposed {len(answer.roots)} root(s).")
        return types.InputRequiredResult(input_requests={"client_roots": types.ListRootsRequest()})

    async def _t_test_input_required_result_request_state(
        self, ctx: Ctx, args: dict[str, Any], p: Any
    ) -> Any:
        if (
            p.input_responses
            and "confirm" in p.input_responses
            and p.request_state == "request-state-nonce"
        ):
            return _text("state-ok: confirmation received")
        return types.InputRequiredResult(
            input_requests={"confirm": _elicit("Please confirm", CONFIRM_SCHEMA)},
            request_state="request-state-nonce",
        )

    async def _t_test_input_required_result_multiple_inputs(
        self, ctx: Ctx, args: dict[str, Any], p: Any
    ) -> Any:
        if p.input_responses and {"user_name", "greeting", "client_roots"} <= set(
            p.input_responses
        ):
            return _text("All inputs received.")
        return types.InputRequiredResult(
            input_requests={
                "user_name": _elicit("What is your name?", NAME_SCHEMA),
                "greeting": _sample("Generate a greeting", 50),
                "client_roots": types.ListRootsRequest(),
            },
            request_state="multiple-inputs",
        )

    async def _t_test_input_required_result_multi_round(
        self, ctx: Ctx, args: dict[str, Any], p: Any
    ) -> Any:
        state = json.loads(p.request_state) if p.request_state else {"round": 0}
        responses = p.input_responses or {}
        first = types.InputRequiredResult(
            input_requests={"step1": _elicit("Step 1: What is your name?", NAME_SCHEMA)},
            request_state=json.dumps({"round": 1}),
        )
        if state.get("round") == 1 and "step1" in responses:
            color = {
                "type": "object",
                "properties": {"color": {"type": "string"}},
                "required": ["color"],
            }
            return types.InputRequiredResult(
                input_requests={"step2": _elicit("Step 2: What is your favorite color?", color)},
                request_state=json.dumps(
                    {"round": 2, "name": _content(responses["step1"], "name")}
                ),
            )
        if state.get("round") == 2 and "step2" in responses:
            return _text(f"{state.get('name')} likes {_content(responses['step2'], 'color')}.")
        return first

    async def _t_test_input_required_result_tampered_state(
        self, ctx: Ctx, args: dict[str, Any], p: Any
    ) -> Any:
        if p.request_state is None:
            return types.InputRequiredResult(
                input_requests={"confirm": _elicit("Please confirm", CONFIRM_SCHEMA)},
                request_state="round-1",
            )
        return _text(f"state-ok: {p.request_state}")

    async def _t_test_input_required_result_capabilities(
        self, ctx: Ctx, args: dict[str, Any], p: Any
    ) -> Any:
        caps = ctx.session.client_capabilities
        requests: dict[str, Any] = {}
        if caps is None or caps.sampling is not None:
            requests["sample"] = _sample("Say hello", 50)
        if caps is None or caps.elicitation is not None:
            requests["ask"] = _elicit("What is your name?", NAME_SCHEMA)
        return types.InputRequiredResult(input_requests=requests, request_state="capability-gated")

    async def _t_test_trigger_tool_change(self, ctx: Ctx, args: dict[str, Any], p: Any) -> Any:
        # A real catalogue change through the orchestrator: register a workflow, then remove it.
        blueprint = {
            "name": "conformance_dynamic",
            "nodes": [
                {"id": "nap", "type": "tool", "tool_name": "sleep", "tool_args": {"seconds": 0}}
            ],
        }
        self.orc.register_blueprint(blueprint)
        self.orc.remove_workflow("conformance_dynamic")
        await asyncio.sleep(0.05)
        return _text("tool list changed")

    async def _t_test_trigger_prompt_change(self, ctx: Ctx, args: dict[str, Any], p: Any) -> Any:
        # A real change of the prompt list: add a prompt, then remove it.
        prompt = types.Prompt(name="conformance_dynamic", description="Added and removed at once")
        self.additions.add_prompt(prompt, lambda params: types.GetPromptResult(messages=[]))
        self.additions.remove_prompt(prompt.name)
        await asyncio.sleep(0.05)
        return _text("prompt list changed")

    # -- resources -----------------------------------------------------------------------------

    def resources(self) -> list[types.Resource]:
        return [
            types.Resource(
                name="static_text",
                uri="test://static-text",
                mime_type="text/plain",
                description="A static text resource for testing",
            ),
            types.Resource(
                name="static_binary",
                uri="test://static-binary",
                mime_type="image/png",
                description="A static binary resource (image) for testing",
            ),
            types.Resource(
                name="watched_resource",
                uri="test://watched-resource",
                mime_type="text/plain",
                description="A resource that can be subscribed to for updates",
            ),
        ]

    def templates(self) -> list[types.ResourceTemplate]:
        return [
            types.ResourceTemplate(
                name="template",
                uri_template="test://template/{id}/data",
                mime_type="application/json",
                description="A resource template",
            )
        ]

    def read_known(self, uri: str) -> types.ReadResourceResult:
        found = self.read(uri)
        if found is None:
            raise MCPError(-32002, f"Resource not found: {uri}", data={"uri": uri})
        return found

    def get_known_prompt(self, params: types.GetPromptRequestParams) -> types.GetPromptResult | types.InputRequiredResult:
        found = self.get_prompt(params)
        if found is None:
            raise MCPError(types.INVALID_PARAMS, f"Unknown prompt: {params.name}")
        return found

    def read(self, uri: str) -> types.ReadResourceResult | None:
        contents: types.TextResourceContents | types.BlobResourceContents
        if uri == "test://static-text":
            contents = types.TextResourceContents(
                uri=uri,
                mime_type="text/plain",
                text="This is the content of the static text resource.",
            )
        elif uri == "test://static-binary":
            blob = base64.b64encode(base64.b64decode(IMAGE)).decode()
            contents = types.BlobResourceContents(uri=uri, mime_type="image/png", blob=blob)
        elif uri == "test://watched-resource":
            contents = types.TextResourceContents(
                uri=uri, mime_type="text/plain", text="Watched resource content"
            )
        elif uri.startswith("test://template/") and uri.endswith("/data"):
            ident = uri.removeprefix("test://template/").removesuffix("/data")
            text = to_json({"id": ident, "templateTest": True, "data": f"Data for ID: {ident}"})
            contents = types.TextResourceContents(uri=uri, mime_type="application/json", text=text)
        else:
            return None
        return types.ReadResourceResult(contents=[contents])

    # -- prompts -------------------------------------------------------------------------------

    def prompts(self) -> list[types.Prompt]:
        arg = types.PromptArgument
        return [
            types.Prompt(
                name="test_simple_prompt", description="A simple prompt without arguments"
            ),
            types.Prompt(
                name="test_prompt_with_arguments",
                description="A prompt with required arguments",
                arguments=[arg(name="arg1", required=True), arg(name="arg2", required=True)],
            ),
            types.Prompt(
                name="test_prompt_with_embedded_resource",
                description="A prompt with an embedded resource",
                arguments=[arg(name="resourceUri", required=True)],
            ),
            types.Prompt(
                name="test_prompt_with_image", description="A prompt that includes image content"
            ),
            types.Prompt(
                name="test_input_required_result_prompt",
                description="InputRequiredResult from prompts/get",
            ),
        ]

    def get_prompt(
        self, params: types.GetPromptRequestParams
    ) -> types.GetPromptResult | types.InputRequiredResult | None:
        args = params.arguments or {}

        def text(value: str) -> types.PromptMessage:
            return types.PromptMessage(
                role="user", content=types.TextContent(type="text", text=value)
            )

        if params.name == "test_simple_prompt":
            messages = [text("This is a simple prompt for testing.")]
        elif params.name == "test_prompt_with_arguments":
            messages = [
                text(f"Prompt with arguments: arg1='{args.get('arg1')}', arg2='{args.get('arg2')}'")
            ]
        elif params.name == "test_prompt_with_embedded_resource":
            resource = types.TextResourceContents(
                uri=args.get("resourceUri", "test://example-resource"),
                mime_type="text/plain",
                text="Embedded resource content for testing.",
            )
            messages = [
                types.PromptMessage(
                    role="user", content=types.EmbeddedResource(type="resource", resource=resource)
                ),
                text("Please process the embedded resource above."),
            ]
        elif params.name == "test_prompt_with_image":
            messages = [
                types.PromptMessage(
                    role="user",
                    content=types.ImageContent(type="image", data=IMAGE, mime_type="image/png"),
                ),
                text("Please analyze the image above."),
            ]
        elif params.name == "test_input_required_result_prompt":
            answer = (params.input_responses or {}).get("user_context")
            if answer is None:
                schema = {
                    "type": "object",
                    "properties": {"context": {"type": "string"}},
                    "required": ["context"],
                }
                return types.InputRequiredResult(
                    input_requests={
                        "user_context": _elicit("What context should the prompt use?", schema)
                    }
                )
            messages = [text(f"Use the following context: {_content(answer, 'context') or '?'}")]
        else:
            return None
        return types.GetPromptResult(messages=messages)


NO_ARGUMENTS: dict[str, Any] = {"type": "object", "properties": {}}
ARGUMENTS: dict[str, dict[str, Any]] = {
    "test_sampling": {"type": "object", "properties": {"prompt": {"type": "string"}}, "required": ["prompt"]},
    "test_elicitation": {"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]},
}


def _seconds(value: str) -> dict[str, Any]:
    return {"id": "work", "type": "tool", "tool_name": "sleep", "tool_args": {"seconds": value}}


# The tasks scenarios' fixtures: ordinary workflows, so the suite drives real runs, tasks and questions.
TASK_WORKFLOWS: list[dict[str, Any]] = [
    {"name": "slow_compute", "description": "Sleeps `seconds`, then answers (a task when it takes a while).",
     "inputs": {"type": "object", "properties": {"seconds": {"type": "number", "minimum": 0},
                                                 "label": {"type": "string"}}, "required": ["seconds"]},
     "outputs": {"label": "{{ inputs.label }}", "slept": "{{ work.slept }}"},
     "nodes": [_seconds("{{ inputs.seconds }}")]},
    {"name": "failing_job", "description": "Fails after about a second (always a task).", "execution": "task",
     "nodes": [_seconds("1"), {"id": "fail", "type": "tool", "tool_name": "conformance_fail",
                              "tool_args": {"why": "{{ work.slept }}"}}]},
    {"name": "protocol_error_job", "description": "Breaks inside the server (always a task).", "execution": "task",
     "nodes": [{"id": "crash", "type": "tool", "tool_name": "conformance_crash"}]},
    {"name": "confirm_delete", "description": "Asks to confirm, then deletes (always a task).", "execution": "task",
     "inputs": {"type": "object", "properties": {"filename": {"type": "string"}}, "required": ["filename"]},
     "outputs": {"deleted": "{{ inputs.filename }}", "confirmed": "{{ ask.answer.confirm }}"},
     "nodes": [{"id": "ask", "type": "human", "prompt": "Delete {{ inputs.filename }}?",
                "schema": {"type": "object", "properties": {"confirm": {"type": "boolean"}}, "required": ["confirm"]}}]},
    {"name": "multi_input", "description": "Asks two questions at once (always a task).", "execution": "task",
     "outputs": {"name": "{{ name.answer.name }}", "confirm": "{{ sure.answer.confirm }}"},
     "nodes": [{"id": "name", "type": "human", "prompt": "What is your name?", "schema": NAME_SCHEMA},
               {"id": "sure", "type": "human", "prompt": "Are you sure?",
                "schema": {"type": "object", "properties": {"confirm": {"type": "boolean"}}, "required": ["confirm"]}}]},
    {"name": "test_tool_with_task", "description": "Asks a name in the call, then goes on as a task.",
     "outputs": {"greeting": "Hello, {{ user_name.answer.name }}!"},
     "nodes": [{"id": "user_name", "type": "human", "prompt": "What is your name?", "schema": NAME_SCHEMA},
               {**_seconds("2"), "dependencies": ["user_name"]}]},
]


def conformance_fail(why: Any = None) -> dict[str, Any]:
    """Fails like a tool does (a tool error the model reads)."""
    raise NodeFailure(f"the job failed (after {why} s)", code="job_failed", retryable=False)


def conformance_crash() -> dict[str, Any]:
    """Fails like the server itself broke (a task `failed`, not a tool error)."""
    raise IceError("the fixture broke inside the server", code="internal_error")


async def _greet(ctx: Ctx, params: types.CallToolRequestParams) -> types.CallToolResult:
    return _text(f"Hello, {(params.arguments or {}).get('name')}!")


def extend(orc: Any, additions: ServerAdditions) -> None:
    """Add every fixture to a server (the extension point's entry)."""
    orc.registry.add_tool(conformance_fail)
    orc.registry.add_tool(conformance_crash)
    for blueprint in TASK_WORKFLOWS:
        orc.register_blueprint(blueprint, origin="conformance")
        additions.advertise_bare(blueprint["name"])
    greet = types.Tool(name="greet", description="Says hello (never a task).",
                       input_schema={"type": "object", "properties": {"name": {"type": "string"}},
                                     "required": ["name"]})
    additions.add_tool(greet, _greet)
    fixtures = Fixtures(orc, additions)
    for name, handler in sorted(fixtures.handlers().items()):
        tool = types.Tool(name=name, description=f"Conformance fixture {name}",
                          input_schema=ARGUMENTS.get(name, NO_ARGUMENTS))
        additions.add_tool(tool, _native(handler))
    for resource in fixtures.resources():
        additions.add_resource(resource, fixtures.read_known)
    for template in fixtures.templates():
        additions.add_template(template, _is_template_uri, fixtures.read_known)
    for prompt in fixtures.prompts():
        additions.add_prompt(prompt, fixtures.get_known_prompt)


def _native(handler: Handler) -> Any:
    async def call(ctx: Ctx, params: types.CallToolRequestParams) -> Any:
        return await handler(ctx, dict(params.arguments or {}), params)

    return call


def _is_template_uri(uri: str) -> bool:
    return uri.startswith("test://template/") and uri.endswith("/data")
