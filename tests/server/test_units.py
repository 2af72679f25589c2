"""Pure pieces of the MCP layer: names, schemas, annotations, diagrams, documents."""

from __future__ import annotations

import re

import pytest

from ice_mcp.blueprint.models import Blueprint
from ice_mcp.server.annotations import workflow_annotations
from ice_mcp.server.diagram import mermaid
from ice_mcp.server.documents import DocumentError, parse_document
from ice_mcp.server.naming import advertised_name, parse_canonical
from ice_mcp.server.schema import flatten_schema
from ice_mcp.tools.builtin import register_builtin_tools
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


def test_annotations_follow_the_nodes() -> None:
    registry = Registry()
    register_builtin_tools(registry)
    reader = Blueprint.model_validate(
        {
            "name": "r",
            "nodes": [
                {"id": "a", "type": "tool", "tool_name": "csv_reader", "tool_args": {"path": "x"}}
            ],
        }
    )
    ann = workflow_annotations(reader, registry)
    assert (ann.read_only_hint, ann.destructive_hint, ann.open_world_hint) == (True, False, False)
    writer = Blueprint.model_validate(
        {
            "name": "w",
            "nodes": [
                {"id": "a", "type": "tool", "tool_name": "csv_reader", "tool_args": {"path": "x"}},
                {
                    "id": "l",
                    "type": "loop",
                    "items": "{{ a.rows }}",
                    "body": [
                        {
                            "id": "f",
                            "type": "tool",
                            "tool_name": "http_request",
                            "tool_args": {"url": "http://x"},
                        },
                        {
                            "id": "w",
                            "type": "tool",
                            "tool_name": "file_write",
                            "tool_args": {"path": "o", "text": "t"},
                        },
                    ],
                },
            ],
        }
    )
    ann = workflow_annotations(writer, registry)
    assert (ann.read_only_hint, ann.destructive_hint, ann.open_world_hint) == (False, True, True)


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
    text = mermaid(bp)
    assert text.startswith("flowchart TD")
    assert "a --> c" in text and "c -->|true| b" in text and "a --> b" in text


def test_parse_document() -> None:
    assert parse_document('{"name": "x"}') == {"name": "x"}
    assert parse_document("name: x\nnodes: []") == {"name": "x", "nodes": []}
    for bad in ("[1, 2]", "a: [", 42, "x" * (2 * 1024 * 1024)):
        with pytest.raises(DocumentError):
            parse_document(bad)
