"""The conformance suite's resource and prompt fixtures (`test://static-text`, `test_simple_prompt`, ...)."""

from __future__ import annotations

import base64

import mcp_types as types
from mcp import MCPError

from ice_mcp.server.protocol.envelope import to_json
from ice_mcp.server.protocol.resources import not_found, resource, resource_templates
from ice_mcp_dev.conformance.blocks import (
    IMAGE,
    answered,
    elicit,
    embedded_text,
    image,
    object_schema,
)

# -- resources ---------------------------------------------------------------------------------

TEMPLATES = resource_templates(
    ("template", "test://template/{id}/data", "application/json", "A resource template"),
)


def resources() -> list[types.Resource]:
    return [
        resource("static_text", "test://static-text", "text/plain",
                 description="A static text resource for testing"),
        resource("static_binary", "test://static-binary", "image/png",
                 description="A static binary resource (image) for testing"),
        resource("watched_resource", "test://watched-resource", "text/plain",
                 description="A resource that can be subscribed to for updates"),
    ]


def is_template_uri(uri: str) -> bool:
    return uri.startswith("test://template/") and uri.endswith("/data")


def read_known(uri: str) -> types.ReadResourceResult:
    found = read(uri)
    if found is None:
        raise not_found(uri)
    return found


def read(uri: str) -> types.ReadResourceResult | None:
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
    elif is_template_uri(uri):
        ident = uri.removeprefix("test://template/").removesuffix("/data")
        text = to_json({"id": ident, "templateTest": True, "data": f"Data for ID: {ident}"})
        contents = types.TextResourceContents(uri=uri, mime_type="application/json", text=text)
    else:
        return None
    return types.ReadResourceResult(contents=[contents])


# -- prompts -----------------------------------------------------------------------------------


def prompts() -> list[types.Prompt]:
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


def get_known_prompt(params: types.GetPromptRequestParams) -> types.GetPromptResult | types.InputRequiredResult:
    found = get_prompt(params)
    if found is None:
        raise MCPError(types.INVALID_PARAMS, f"Unknown prompt: {params.name}")
    return found


def get_prompt(
    params: types.GetPromptRequestParams
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
        resource = embedded_text(args.get("resourceUri", "test://example-resource"), "text/plain",
                                 "Embedded resource content for testing.")
        messages = [
            types.PromptMessage(role="user", content=resource),
            text("Please process the embedded resource above."),
        ]
    elif params.name == "test_prompt_with_image":
        messages = [
            types.PromptMessage(role="user", content=image()),
            text("Please analyze the image above."),
        ]
    elif params.name == "test_input_required_result_prompt":
        answer = (params.input_responses or {}).get("user_context")
        if answer is None:
            schema = object_schema({"context": {"type": "string"}}, "context")
            return types.InputRequiredResult(
                input_requests={
                    "user_context": elicit("What context should the prompt use?", schema)
                }
            )
        messages = [text(f"Use the following context: {answered(answer, 'context') or '?'}")]
    else:
        return None
    return types.GetPromptResult(messages=messages)
