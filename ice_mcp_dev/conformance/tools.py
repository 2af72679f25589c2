"""The conformance suite's tool fixtures, answered natively with MCP content and server-to-client requests."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import mcp_types as types
from mcp import MCPError

from ice_mcp.server.extensions import ServerAdditions
from ice_mcp_dev.conformance.blocks import (
    AUDIO,
    CONFIRM_SCHEMA,
    NAME_SCHEMA,
    Ctx,
    Handler,
    answered,
    elicit,
    embedded_text,
    image,
    object_schema,
    sample,
    text_result,
)

NO_ARGUMENTS = object_schema({})
ARGUMENTS: dict[str, dict[str, Any]] = {
    "test_sampling": object_schema({"prompt": {"type": "string"}}, "prompt"),
    "test_elicitation": object_schema({"message": {"type": "string"}}, "message"),
}


def _titled(**titles: str) -> list[dict[str, str]]:
    """The options of an enum whose values have titles (`oneOf`/`anyOf` items), in the order given."""
    return [{"const": value, "title": title} for value, title in titles.items()]


# The forms the elicitation fixtures ask for.
RESPONSE_FORM = object_schema({"response": {"type": "string", "description": "User's response"}}, "response")
DEFAULTS_FORM = object_schema({
    "name": {"type": "string", "default": "John Doe", "description": "User name"},
    "age": {"type": "integer", "default": 30, "description": "User age"},
    "score": {"type": "number", "default": 95.5, "description": "User score"},
    "status": {
        "type": "string",
        "default": "active",
        "enum": ["active", "inactive", "pending"],
        "description": "User status",
    },
    "verified": {"type": "boolean", "default": True, "description": "Verification status"},
})
ENUMS_FORM = object_schema(
    {
        "untitledSingle": {"type": "string", "enum": ["active", "inactive", "pending"]},
        "titledSingle": {
            "type": "string",
            "oneOf": _titled(low="Low Priority", medium="Medium Priority", high="High Priority"),
        },
        "untitledMulti": {"type": "array", "items": {"type": "string", "enum": ["read", "write", "execute"]}},
        "titledMulti": {
            "type": "array",
            "items": {"anyOf": _titled(feature="New Feature", bug="Bug Fix", docs="Documentation")},
        },
        "legacyEnum": {
            "type": "string",
            "enum": ["small", "medium", "large"],
            "enumNames": ["Small Size", "Medium Size", "Large Size"],
        },
    },
    "untitledSingle", "titledSingle", "untitledMulti", "titledMulti", "legacyEnum",
)
COLOR_FORM = object_schema({"color": {"type": "string"}}, "color")


class ToolFixtures:
    """The tool fixtures, answered natively: MCP content blocks and server-to-client requests (a method
    `_t_NAME` answers the tool NAME)."""

    def __init__(self, orc: Any, additions: ServerAdditions) -> None:
        self.orc = orc
        self.additions = additions

    def handlers(self) -> dict[str, Handler]:
        return {name.removeprefix("_t_"): getattr(self, name) for name in dir(self) if name.startswith("_t_")}

    async def _t_test_simple_text(self, ctx: Ctx, args: dict[str, Any], p: Any) -> Any:
        return text_result("This is a simple text response for testing.")

    async def _t_test_image_content(self, ctx: Ctx, args: dict[str, Any], p: Any) -> Any:
        return types.CallToolResult(content=[image()])

    async def _t_test_audio_content(self, ctx: Ctx, args: dict[str, Any], p: Any) -> Any:
        return types.CallToolResult(
            content=[types.AudioContent(type="audio", data=AUDIO, mime_type="audio/wav")]
        )

    async def _t_test_embedded_resource(self, ctx: Ctx, args: dict[str, Any], p: Any) -> Any:
        resource = embedded_text("test://embedded-resource", "text/plain", "This is an embedded resource content.")
        return types.CallToolResult(content=[resource])

    async def _t_test_multiple_content_types(self, ctx: Ctx, args: dict[str, Any], p: Any) -> Any:
        resource = embedded_text("test://mixed-content-resource", "application/json", '{"test": "data", "value": 123}')
        return types.CallToolResult(
            content=[types.TextContent(type="text", text="Multiple content types test:"), image(), resource]
        )

    async def _log(self, ctx: Ctx, text: str) -> None:
        await ctx.session.send_log_message("info", text, related_request_id=ctx.request_id)

    async def _t_test_tool_with_logging(self, ctx: Ctx, args: dict[str, Any], p: Any) -> Any:
        for step in ("Tool execution started", "Tool processing data", "Tool execution completed"):
            await self._log(ctx, step)
            await asyncio.sleep(0.05)
        return text_result("Tool with logging executed successfully")

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
        return text_result(str(token if token is not None else 0))

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
            return text_result(f"LLM response: {text}")
        except Exception as exc:
            return text_result(f"Sampling not supported or error: {exc}")

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
            return text_result(f"{label}: action={result.action}, content={content}")
        except Exception as exc:
            return text_result(f"Elicitation not supported or error: {exc}")

    async def _t_test_elicitation(self, ctx: Ctx, args: dict[str, Any], p: Any) -> Any:
        return await self._elicit_form(ctx, args["message"], RESPONSE_FORM, "User response")

    async def _t_test_elicitation_sep1034_defaults(
        self, ctx: Ctx, args: dict[str, Any], p: Any
    ) -> Any:
        return await self._elicit_form(
            ctx, "Please provide user information", DEFAULTS_FORM, "Elicitation result"
        )

    async def _t_test_elicitation_sep1330_enums(
        self, ctx: Ctx, args: dict[str, Any], p: Any
    ) -> Any:
        return await self._elicit_form(
            ctx,
            "Please select values using different enum schema types",
            ENUMS_FORM,
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
        return text_result("Client declared sampling capability; proceeding.")

    async def _t_test_streaming_elicitation(self, ctx: Ctx, args: dict[str, Any], p: Any) -> Any:
        if p.input_responses and "user_name" in p.input_responses:
            return text_result(
                f"Hello, {answered(p.input_responses['user_name'], 'name') or 'stranger'}!"
            )
        return types.InputRequiredResult(
            input_requests={"user_name": elicit("What is your name?", NAME_SCHEMA)}
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
            return text_result(f"Model said: {text}")
        return types.InputRequiredResult(
            input_requests={"capital_question": sample("What is the capital of France?")}
        )

    async def _t_test_input_required_result_list_roots(
        self, ctx: Ctx, args: dict[str, Any], p: Any
    ) -> Any:
        answer = (p.input_responses or {}).get("client_roots")
        if isinstance(answer, types.ListRootsResult):
            return text_result(f"Client exposed {len(answer.roots)} root(s).")
        return types.InputRequiredResult(input_requests={"client_roots": types.ListRootsRequest()})

    async def _t_test_input_required_result_request_state(
        self, ctx: Ctx, args: dict[str, Any], p: Any
    ) -> Any:
        if (
            p.input_responses
            and "confirm" in p.input_responses
            and p.request_state == "request-state-nonce"
        ):
            return text_result("state-ok: confirmation received")
        return types.InputRequiredResult(
            input_requests={"confirm": elicit("Please confirm", CONFIRM_SCHEMA)},
            request_state="request-state-nonce",
        )

    async def _t_test_input_required_result_multiple_inputs(
        self, ctx: Ctx, args: dict[str, Any], p: Any
    ) -> Any:
        if p.input_responses and {"user_name", "greeting", "client_roots"} <= set(
            p.input_responses
        ):
            return text_result("All inputs received.")
        return types.InputRequiredResult(
            input_requests={
                "user_name": elicit("What is your name?", NAME_SCHEMA),
                "greeting": sample("Generate a greeting", 50),
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
            input_requests={"step1": elicit("Step 1: What is your name?", NAME_SCHEMA)},
            request_state=json.dumps({"round": 1}),
        )
        if state.get("round") == 1 and "step1" in responses:
            return types.InputRequiredResult(
                input_requests={"step2": elicit("Step 2: What is your favorite color?", COLOR_FORM)},
                request_state=json.dumps(
                    {"round": 2, "name": answered(responses["step1"], "name")}
                ),
            )
        if state.get("round") == 2 and "step2" in responses:
            return text_result(f"{state.get('name')} likes {answered(responses['step2'], 'color')}.")
        return first

    async def _t_test_input_required_result_tampered_state(
        self, ctx: Ctx, args: dict[str, Any], p: Any
    ) -> Any:
        if p.request_state is None:
            return types.InputRequiredResult(
                input_requests={"confirm": elicit("Please confirm", CONFIRM_SCHEMA)},
                request_state="round-1",
            )
        return text_result(f"state-ok: {p.request_state}")

    async def _t_test_input_required_result_capabilities(
        self, ctx: Ctx, args: dict[str, Any], p: Any
    ) -> Any:
        caps = ctx.session.client_capabilities
        requests: dict[str, Any] = {}
        if caps is None or caps.sampling is not None:
            requests["sample"] = sample("Say hello", 50)
        if caps is None or caps.elicitation is not None:
            requests["ask"] = elicit("What is your name?", NAME_SCHEMA)
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
        return text_result("tool list changed")

    async def _t_test_trigger_prompt_change(self, ctx: Ctx, args: dict[str, Any], p: Any) -> Any:
        # A real change of the prompt list: add a prompt, then remove it.
        prompt = types.Prompt(name="conformance_dynamic", description="Added and removed at once")
        self.additions.add_prompt(prompt, lambda params: types.GetPromptResult(messages=[]))
        self.additions.remove_prompt(prompt.name)
        await asyncio.sleep(0.05)
        return text_result("prompt list changed")
