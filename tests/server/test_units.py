"""Pure pieces of the MCP layer: names, schemas, diagrams, documents (annotations: test_effects.py)."""

from __future__ import annotations

import re

import pytest

from ice_mcp import Orchestrator, Settings
from ice_mcp.blueprint.models import Blueprint
from ice_mcp.operations.diagram import mermaid
from ice_mcp.operations.documents import DocumentError, parse_document
from ice_mcp.operations.flat_schema import flatten_schema
from ice_mcp.operations.naming import advertised_name, parse_canonical
from ice_mcp.tools.registry import Registry

PORTABLE = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def test_long_names_shortened_deterministically_and_unique() -> None:
    names = [f"{'a' * 47}_{i}" for i in range(50)]
    shortened = [advertised_name("workflow", n) for n in names]
    assert all(PORTABLE.match(s) for s in shortened)
    assert len(set(shortened)) == len(names)
    assert shortened == [advertised_name("workflow", n) for n in names]
    assert advertised_name("workflow", "sales") == "workflow_sales"
    assert advertised_name("workflow", "sales", canonical=True) == "workflow:sales"
    assert len(advertised_name("workflow", "x" * 60, limit=40)) == 40
    # Characters a client rejects are replaced, and the hash keeps look-alikes apart.
    odd = {advertised_name("tool", n) for n in ("a.b", "a b", "a_b")}
    assert len(odd) == 3 and all(PORTABLE.match(n) for n in odd)
    assert parse_canonical("agent:helper") == ("agent", "helper")
    assert parse_canonical("workflow_x") is None


def test_flatten_schema() -> None:
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$defs": {"Item": {"type": "object", "properties": {"sku": {"type": "string"}}}},
        "anyOf": [
            {
                "properties": {"items": {"type": "array", "items": {"$ref": "#/$defs/Item"}}},
                "required": ["items"],
            },
            {"properties": {"path": {"type": "string"}}, "required": ["path"]},
        ],
    }
    flat = flatten_schema(schema)
    text = repr(flat)
    assert flat["type"] == "object"
    assert (
        "$ref" not in text and "$defs" not in text and "$schema" not in text and "anyOf" not in flat
    )
    assert flat["properties"]["items"]["items"]["properties"]["sku"] == {"type": "string"}
    assert "required" not in flat  # neither variant's field is required by both
    recursive = {
        "$defs": {"N": {"type": "object", "properties": {"next": {"$ref": "#/$defs/N"}}}},
        "$ref": "#/$defs/N",
    }
    assert flatten_schema(recursive)["type"] == "object"
    assert flatten_schema({"type": "string"}) == {"type": "object", "properties": {}}
    assert flatten_schema(None) == {"type": "object", "properties": {}}


def test_mermaid_diagram() -> None:
    bp = Blueprint.model_validate(
        {
            "name": "d",
            "nodes": [
                {"id": "a", "type": "tool", "tool_name": "sleep", "tool_args": {"seconds": 0}},
                {"id": "c", "type": "condition", "expression": "a.slept > 1", "true_path": ["b"]},
                {
                    "id": "b",
                    "type": "tool",
                    "tool_name": "sleep",
                    "tool_args": {"seconds": "{{ a.slept }}"},
                },
            ],
        }
    )
    text = mermaid(Orchestrator(registry=Registry(), settings=Settings(persist_runs=False)).compile(bp))
    assert text.startswith("flowchart TD")
    assert "a --> c" in text and "c -->|true| b" in text and "a --> b" in text


def test_parse_document() -> None:
    assert parse_document('{"name": "x"}') == {"name": "x"}
    assert parse_document("name: x\nnodes: []") == {"name": "x", "nodes": []}
    for bad in ("[1, 2]", "a: [", 42, "x" * (2 * 1024 * 1024)):
        with pytest.raises(DocumentError):
            parse_document(bad)


# -- edges: Host/Origin parsing, surrogates, Authorization, stdio rejections -------------------

from starlette.datastructures import Headers  # noqa: E402

from ice_mcp.server.auth import callers  # noqa: E402
from ice_mcp.server.stdio import rejection  # noqa: E402
from ice_mcp.server.untrusted import lone_surrogate, valid_host, valid_origin  # noqa: E402


@pytest.mark.parametrize(
    "host", ["127.0.0.1", "127.0.0.1:8000", "localhost:1", "[::1]:65535", "api.example.com"]
)
def test_valid_hosts(host: str) -> None:
    assert valid_host(host)


@pytest.mark.parametrize(
    "host",
    [
        "localhost:8000@evil.example",
        "127.0.0.1:8000/../evil",
        "127.0.0.1:0",
        "127.0.0.1:65536",
        "127.0.0.1:",
        "user@127.0.0.1",
        "[::1",
        "[zz::1]:80",
        "a b",
        "",
        None,
    ],
)
def test_invalid_hosts(host: str | None) -> None:
    assert not valid_host(host)


def test_origins_parsed_strictly() -> None:
    assert valid_origin(None) and valid_origin("http://127.0.0.1:8000")
    assert not valid_origin("http://127.0.0.1:8000@evil.example")
    assert not valid_origin("http://127.0.0.1:8000/path") and not valid_origin("null")


def test_lone_surrogates_found_anywhere() -> None:
    assert lone_surrogate({"a": ["x", {"b": "\ud800"}]}) == "a/1/b"
    assert lone_surrogate({"\udfff": 1}) == "\\udfff"
    assert lone_surrogate({"a": "emoji \U0001f600 is fine", "n": 2**70}) is None


def test_authorization_read_once() -> None:
    one = Headers(raw=[(b"authorization", b"Bearer abc")])
    two = Headers(raw=[(b"authorization", b"Bearer abc"), (b"authorization", b"Bearer xyz")])
    assert callers.read_authorization(one) == callers.Credential("abc")
    assert callers.read_authorization(two).ambiguous and callers.bearer_token(two) is None
    assert callers.caller_id(type("R", (), {"headers": two})()) == "anonymous"
    assert callers.read_authorization(Headers(raw=[(b"authorization", b"Basic abc")])).token is None


def test_token_comparison_sees_fixed_length_digests(monkeypatch: pytest.MonkeyPatch) -> None:
    compared: list[tuple[int, int]] = []
    real = callers.hmac.compare_digest

    def recording(a: bytes, b: bytes) -> bool:
        compared.append((len(a), len(b)))
        return real(a, b)

    monkeypatch.setattr(callers.hmac, "compare_digest", recording)
    assert callers.same_secret("secret", "secret")
    assert not callers.same_secret("s", "secret")
    assert not callers.same_secret("x" * 10_000, "secret")
    assert compared == [(32, 32)] * 3


def test_stdio_rejections_keep_the_id() -> None:
    assert rejection('{"jsonrpc": "2.0", "id": 1, "method": "ping"}') is None
    assert rejection('{"jsonrpc": "2.0", "method": 5}') is None  # a notification: no answer
    bad = rejection('{"jsonrpc": "2.0", "id": 7, "method": 5}')
    assert bad is not None and bad.id == 7 and bad.error.code == -32600
    assert "method must be a string" in bad.error.message
    unparsable = rejection("{")
    assert unparsable is not None and unparsable.id is None and unparsable.error.code == -32700
    surrogate = rejection('{"jsonrpc": "2.0", "id": "\\ud800", "method": "ping"}')
    assert surrogate is not None and surrogate.id is None
