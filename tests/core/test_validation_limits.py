"""Validation that cannot stall: RE2 patterns, bounded YAML aliases, size caps."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from ice_mcp import BlueprintInvalid, InputsInvalid, Orchestrator, Registry, Settings
from ice_mcp.blueprint import loading
from ice_mcp.blueprint.loading import MAX_NESTING_DEPTH, load_network, parse_text
from ice_mcp.blueprint.schemas import SchemaInvalid, quick_check, schema_validator
from ice_mcp.errors import ArgumentsInvalid, IceError
from ice_mcp.llm.structured import InvalidOutput
from ice_mcp.llm.structured import validate as validate_output
from ice_mcp.operations.arguments import check_arguments

from .helpers import blueprint, tool

FAST_S = 0.1  # what the issue allows one call to hold the event loop
CATASTROPHIC = "^(a+)+$"  # exponential on a backtracking engine for "aaaa…!"
HOSTILE_INPUT = "a" * 50_000 + "!"


def echo(value: Any = None) -> dict[str, Any]:
    return {"value": value}


@pytest.fixture
def vorc(registry: Registry, settings: Settings) -> Orchestrator:
    registry.add_tool(echo)
    settings.persist_runs = False
    return Orchestrator(registry=registry, settings=settings)


def timed(fn: Any, *args: Any) -> tuple[Any, float]:
    started = time.perf_counter()
    result = fn(*args)
    return result, time.perf_counter() - started


def regex_blueprint(pattern: str) -> dict[str, Any]:
    inputs = {"type": "object", "properties": {"s": {"type": "string", "pattern": pattern}}}
    return blueprint(tool("e", "echo", {"value": "{{ inputs.s }}"}), inputs=inputs)


def alias_bomb(levels: int) -> str:
    """Each anchor lists the previous one twice: 2**levels strings once expanded."""
    lines = ["defs:", "  - &v0 ['lol', 'lol']"]
    lines += [f"  - &v{i} [*v{i - 1}, *v{i - 1}]" for i in range(1, levels)]
    lines += ["name: bomb", "nodes:", f"  - {{id: e, type: tool, tool_name: echo, tool_args: {{value: *v{levels - 1}}}}}"]
    return "\n".join(lines) + "\n"


def many_nodes(count: int) -> dict[str, Any]:
    return blueprint(*(tool(f"n{i}", "echo", {"value": i}) for i in range(count)))


# -- regexes ------------------------------------------------------------------------------


async def test_catastrophic_pattern_is_matched_in_linear_time(vorc: Orchestrator) -> None:
    plan = vorc.compile(regex_blueprint(CATASTROPHIC))
    (_, problems), elapsed = timed(plan.prepare_inputs, {"s": HOSTILE_INPUT})
    assert elapsed < FAST_S
    assert [p["path"] for p in problems] == ["s"] and "does not match" in problems[0]["message"]
    assert plan.prepare_inputs({"s": "aaaa"})[1] == []
    with pytest.raises(InputsInvalid):
        await vorc.start(plan, {"s": HOSTILE_INPUT})


def test_pattern_properties_and_additional_properties_use_re2() -> None:
    validator = schema_validator({"type": "object", "patternProperties": {"^x(y+)+$": {"type": "integer"}},
                                  "additionalProperties": False})
    hostile_key = "x" + "y" * 50_000 + "!"
    errors, elapsed = timed(lambda: [e.message for e in validator.iter_errors({hostile_key: 1, "xyy": "q"})])
    assert elapsed < FAST_S
    assert "'q' is not of type 'integer'" in errors
    assert any("additional properties are not allowed" in e for e in errors)


@pytest.mark.parametrize("pattern", [r"(a)\1", "(?=a)b", "(?<!a)b", "a" * 600])
def test_a_pattern_re2_cannot_run_is_a_clear_issue(vorc: Orchestrator, pattern: str) -> None:
    [issue] = vorc.validate(regex_blueprint(pattern)).errors
    assert issue.code == "unsupported_pattern"
    assert issue.field == "inputs.properties.s"
    assert "RE2" in issue.message


def test_schema_limits_and_references() -> None:
    cases = {
        "unsupported_schema": {"properties": {"a": {"$ref": "http://127.0.0.1:9/schema.json"}}},
        "schema_too_large": {"properties": {f"p{i}": {"pattern": "a"} for i in range(17)}},
        "invalid_schema": {"type": 5},
    }
    for code, schema in cases.items():
        with pytest.raises(SchemaInvalid) as caught:
            schema_validator(schema)
        assert caught.value.code == code
    deep: dict[str, Any] = {"type": "string"}
    for _ in range(40):
        deep = {"items": deep}
    with pytest.raises(SchemaInvalid, match="nested deeper"):
        schema_validator(deep)
    dangling = schema_validator({"properties": {"a": {"$ref": "#/$defs/missing"}}})
    assert [e.message for e in dangling.iter_errors({"a": 1})] == ["$ref '#/$defs/missing' cannot be resolved"]


def test_llm_output_and_tool_arguments_use_the_same_factory() -> None:
    schema = {"type": "object", "properties": {"s": {"type": "string", "pattern": CATASTROPHIC}}}
    started = time.perf_counter()
    with pytest.raises(InvalidOutput, match="does not match"):
        validate_output({"s": HOSTILE_INPUT}, schema)
    with pytest.raises(ArgumentsInvalid, match="does not match"):
        check_arguments(schema, {"s": HOSTILE_INPUT})
    assert time.perf_counter() - started < FAST_S
    with pytest.raises(InvalidOutput, match="not supported"):
        validate_output({"s": "x"}, {"properties": {"s": {"pattern": r"(x)\1"}}})


# -- YAML ---------------------------------------------------------------------------------


def test_alias_bomb_is_refused_before_expansion(vorc: Orchestrator) -> None:
    text = alias_bomb(30)  # 2**30 strings once expanded
    report, elapsed = timed(vorc.validate, text)
    assert elapsed < FAST_S
    [issue] = report.errors
    assert issue.code == "yaml_too_complex" and "aliases" in issue.message


def test_recursive_alias_and_deep_text_are_refused() -> None:
    with pytest.raises(IceError) as caught:
        parse_text("a: &a [*a]\n")
    assert caught.value.code == "yaml_too_complex"
    # libyaml's own composer recursed in C on these and crashed the process; libyaml 0.2.6 refuses the first itself
    for text in ("[" * 60_000, "- " * 30_000 + "x", "x: " + "{a: " * 12_000, '{"a": ' * 60_000):
        with pytest.raises(IceError) as caught:
            parse_text(text)
        assert caught.value.code == "yaml_too_complex"
        assert f"nested deeper than {MAX_NESTING_DEPTH} levels" in caught.value.message
    with pytest.raises(IceError) as caught:
        parse_text("x: " + "y" * 70_000)
    assert caught.value.code == "document_too_large"


@pytest.mark.parametrize("opening, closing", [("[", "]"), ("{a: ", "}"), ("- ", "")])
def test_nesting_up_to_the_limit_is_read_and_one_more_level_is_refused(opening: str, closing: str) -> None:
    def nested(levels: int) -> str:
        if opening == "- ":  # block style: one more indentation per level
            return "".join("  " * level + "-\n" for level in range(levels - 1)) + "  " * (levels - 1) + "- x\n"
        return opening * levels + "x" + closing * levels

    value = parse_text(nested(MAX_NESTING_DEPTH))
    for _ in range(MAX_NESTING_DEPTH - 1):
        value = value[0] if isinstance(value, list) else value["a"]
    assert value in (["x"], {"a": "x"})
    with pytest.raises(IceError) as caught:
        parse_text(nested(MAX_NESTING_DEPTH + 1))
    assert caught.value.code == "yaml_too_complex"


def test_json_nesting_has_the_same_limit() -> None:
    def nested(levels: int) -> str:
        return '{"a": ' * levels + "1" + "}" * levels

    assert parse_text(nested(MAX_NESTING_DEPTH))
    with pytest.raises(IceError) as caught:
        parse_text(nested(MAX_NESTING_DEPTH + 1))
    assert caught.value.code == "yaml_too_complex"
    assert f"nested deeper than {MAX_NESTING_DEPTH} levels" in caught.value.message


# What the parsers we allow (PyYAML 6.0.x, with or without libyaml) raise on deep nesting before our own limit.
PARSER_NESTING_ERRORS = {
    "libyaml 0.2.6 scanner (PyYAML 6.0.4)": lambda: yaml.scanner.ScannerError(
        "while increasing flow level", None, "exceeded maximum nesting depth", None),
    "libyaml 0.2.6 parser (PyYAML 6.0.4)": lambda: yaml.parser.ParserError(
        "while parsing a block collection", None, "exceeded maximum nesting depth", None),
    "Python composer (PyYAML 6.0.2, 6.0.3 or no libyaml)": lambda: RecursionError(
        "maximum recursion depth exceeded"),
}


@pytest.mark.parametrize("error", PARSER_NESTING_ERRORS.values(), ids=PARSER_NESTING_ERRORS.keys())
def test_a_parsers_nesting_limit_answers_as_ours(monkeypatch: pytest.MonkeyPatch, error: Any) -> None:
    class Refusing:
        def __init__(self, text: str) -> None:
            pass

        def get_single_node(self) -> None:
            raise error()

        def dispose(self) -> None:
            pass

    monkeypatch.setattr(loading, "_YAML_LOADER", Refusing)
    with pytest.raises(IceError) as caught:
        parse_text("a: [[[1]]]", "manifest")
    assert caught.value.code == "yaml_too_complex"
    assert caught.value.message == f"the manifest is nested deeper than {MAX_NESTING_DEPTH} levels of lists and mappings"


def test_without_libyaml_the_same_limit_holds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(yaml, "__with_libyaml__", False)
    monkeypatch.setattr(loading, "_YAML_LOADER", loading._yaml_loader())
    assert parse_text("a: [1, {b: 2}]") == {"a": [1, {"b": 2}]}
    with pytest.raises(IceError) as caught:
        parse_text("[" * (MAX_NESTING_DEPTH + 1) + "]" * (MAX_NESTING_DEPTH + 1))
    assert caught.value.code == "yaml_too_complex"


def test_one_long_line_of_json_is_a_document_not_a_path(vorc: Orchestrator) -> None:
    text = json.dumps(many_nodes(20))  # one line, longer than a file name may be
    assert "\n" not in text and len(text) > 1000
    assert vorc.validate(text).errors == []
    assert [issue.code for issue in vorc.validate("x" * 5000).errors] == ["parse_error"]


def test_other_parser_errors_stay_parse_errors() -> None:
    with pytest.raises(IceError) as caught:
        parse_text("a: [1, 2\nb: }")
    assert caught.value.code == "parse_error"


def test_modest_aliases_still_work(vorc: Orchestrator) -> None:
    text = "name: shared\nx: &args {value: 1}\nnodes:\n  - {id: a, type: tool, tool_name: echo, tool_args: *args}\n"
    [issue] = vorc.validate(text).errors  # `x` is not a blueprint field, but the aliases were read
    assert issue.field == "x"


# -- size ---------------------------------------------------------------------------------


def test_fifty_thousand_nodes_are_refused_up_front(vorc: Orchestrator) -> None:
    huge = many_nodes(50_000)
    report, elapsed = timed(vorc.validate, huge)
    assert elapsed < FAST_S
    [issue] = report.errors
    assert issue.code == "blueprint_too_large" and "max_blueprint_nodes" in issue.message
    with pytest.raises(BlueprintInvalid) as caught:
        vorc.compile(huge)
    assert caught.value.details["errors"][0]["code"] == "blueprint_too_large"


def test_the_largest_accepted_blueprint_validates(vorc: Orchestrator) -> None:
    # Its validation takes longer than one event-loop turn should: the server runs it in a thread.
    assert vorc.validate(many_nodes(10_000)).ok
    [issue] = vorc.validate(many_nodes(10_001)).errors
    assert issue.code == "blueprint_too_large" and "more than 10000 (max_blueprint_nodes)" in issue.message


def test_deep_nesting_is_refused(vorc: Orchestrator) -> None:
    node: dict[str, Any] = tool("leaf", "echo")
    for i in range(1_000):
        node = {"id": f"l{i}", "type": "loop", "items": "{{ [1] }}", "body": [node]}
    report, elapsed = timed(vorc.validate, blueprint(node))
    assert elapsed < FAST_S
    [issue] = report.errors
    assert issue.code == "blueprint_too_large" and "max_blueprint_depth" in issue.message


def test_limits_are_settings(registry: Registry, settings: Settings) -> None:
    registry.add_tool(echo)
    settings.persist_runs = False
    settings.max_blueprint_nodes = 3
    settings.max_blueprint_templates = 1
    small = Orchestrator(registry=registry, settings=settings)
    assert small.validate(many_nodes(3)).ok
    assert small.validate(many_nodes(4)).errors[0].code == "blueprint_too_large"
    templated = blueprint(tool("a", "echo", {"value": "{{ inputs.x }}"}), tool("b", "echo", {"value": "{{ a }}"}))
    assert "max_blueprint_templates" in small.validate(templated).errors[0].message


def test_network_manifest_size_is_capped() -> None:
    manifest = {"name": "net", "workflows": [{"id": f"w{i}", "ref": "steps"} for i in range(10_001)]}
    with pytest.raises(BlueprintInvalid) as caught:
        load_network(manifest)
    assert caught.value.report.errors[0].code == "blueprint_too_large"


def test_many_problems_are_capped_with_a_count(vorc: Orchestrator) -> None:
    nodes = [tool(f"n{i}", "echo", dependencies=[f"missing_{i}_{j}" for j in range(40)]) for i in range(20)]
    report, elapsed = timed(vorc.validate, blueprint(*nodes))
    assert elapsed < FAST_S
    assert len(report.errors) == 201
    assert report.errors[-1].code == "too_many_issues" and report.errors[-1].message.startswith("600 more")


# -- the shortcut for simple input schemas agrees with the validator ------------------------------

_SIMPLE_TYPES = st.sampled_from(["string", "number", "integer", "boolean", "null", "object", "array"])
_SUBSCHEMA = st.one_of(st.just({}), st.builds(lambda t: {"type": t}, _SIMPLE_TYPES),
                       st.builds(lambda ts: {"type": ts, "description": "d"}, st.lists(_SIMPLE_TYPES, min_size=1,
                                                                                      max_size=3, unique=True)))
_NAMES = st.sampled_from(["a", "b", "c"])
_JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=3),
                     lambda inner: st.lists(inner, max_size=2) | st.dictionaries(st.text(max_size=2), inner, max_size=2),
                     max_leaves=4)


@given(properties=st.dictionaries(_NAMES, _SUBSCHEMA, max_size=3), required=st.lists(_NAMES, max_size=2, unique=True),
       closed=st.booleans(), instance=st.dictionaries(_NAMES, _JSON, max_size=3))
def test_the_quick_check_accepts_exactly_what_the_validator_accepts(
        properties: dict[str, Any], required: list[str], closed: bool, instance: dict[str, Any]) -> None:
    schema = {"type": "object", "properties": properties, "required": required, "additionalProperties": not closed}
    quick = quick_check(schema)
    assert quick is not None
    assert quick(instance) == schema_validator(schema).is_valid(instance)


def test_other_schemas_get_no_quick_check() -> None:
    for schema in ({"type": "object", "properties": {"a": {"type": "string", "minLength": 2}}},
                   {"type": "object", "patternProperties": {"^a": {}}}, {"type": "object", "anyOf": [{}]},
                   {"type": "object", "additionalProperties": {"type": "string"}}):
        assert quick_check(schema) is None
