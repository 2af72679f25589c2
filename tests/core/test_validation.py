"""Validation: every problem at once, with codes, node ids and suggestions; it never raises."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from ice_mcp import (
    BlueprintInvalid,
    InputsInvalid,
    Orchestrator,
    Registry,
    Settings,
    UnknownName,
    ValidationReport,
)
from ice_mcp.blueprint.models import NODE_TYPES

from .helpers import blueprint, tool


def echo(value: str = "") -> dict[str, Any]:
    return {"value": value}


@pytest.fixture
def vorc(registry: Registry, settings: Settings) -> Orchestrator:
    """A synchronous orchestrator for validation only (no store)."""
    registry.add_tool(echo)
    settings.persist_runs = False
    return Orchestrator(registry=registry, settings=settings)


MANY_MISTAKES = blueprint(
    tool("a", "echo", {"value": "x"}),
    tool("a", "echo"),                                                   # duplicate_id
    tool("b", "ecko", dependencies=["zz"]),                              # unknown_tool + unknown_dependency
    tool("c", "echo", {"value": "{{ d.value }}"}),                        # cycle c → d → c
    tool("d", "echo", {"value": "{{ c.value }}"}),
    {"id": "e", "type": "workflow", "workflow_ref": "sub_flow"},         # unknown_workflow (suggests sub_flows)
    tool("f", "echo", {"value": "{{ inputz.x }}"}),                       # unknown_reference (suggests inputs)
    tool("g", "echo", {"value": "{{ oops "}),                             # template_syntax
    {"id": "h", "type": "condition", "expression": "a.value >", "true_path": ["i"]},  # expression_syntax
    {"id": "i", "type": "tool_call"},                                    # unknown_node_type (suggests tool)
    tool("j", "echo", retries=-1),                                       # schema
    tool("k", "echo", {"valu": "1"}),                                    # invalid_tool_args (suggests value)
    tool("l", "echo", {"value": "{% for x in y %}{% endfor %}"}),         # template_syntax (statement block)
)


def test_one_blueprint_with_many_mistakes_reports_them_all(vorc: Orchestrator) -> None:
    vorc.register_blueprint(blueprint(tool("s", "echo"), name="sub_flows"))
    report = vorc.validate(MANY_MISTAKES)
    assert isinstance(report, ValidationReport)
    assert not report.ok
    found = {(e.code, e.node_id, e.field, e.suggestion) for e in report.errors}
    assert found == {
        ("unknown_node_type", "i", "type", "tool"),
        ("schema", "j", "retries", None),
        ("duplicate_id", "a", "id", None),
        ("unknown_dependency", "b", "dependencies", None),
        ("unknown_tool", "b", "tool_name", "echo"),
        ("unknown_workflow", "e", "workflow_ref", "sub_flows"),
        ("unknown_reference", "f", "tool_args", "inputs"),
        ("template_syntax", "g", "tool_args", None),
        ("expression_syntax", "h", "expression", None),
        ("invalid_tool_args", "k", "tool_args.valu", "value"),
        ("template_syntax", "l", "tool_args", None),
        ("cycle", "c", "dependencies", None),
    }
    assert len(report.errors) == len(found)
    assert len({e.code for e in report.errors}) == 11
    by_node = {(e.code, e.node_id): e.message for e in report.errors}
    assert by_node[("cycle", "c")] == "dependency cycle: c → d → c"
    assert by_node[("schema", "j")] == "retries: Input should be greater than or equal to 0"
    assert "statement blocks" in by_node[("template_syntax", "l")]
    assert by_node[("unknown_reference", "f")] == \
        "tool_args reads 'inputz', which is no node, input or variable here"


def test_issue_shape_matches_spec(vorc: Orchestrator) -> None:
    report = vorc.validate(blueprint(tool("x", "ech")))
    assert [e.model_dump() for e in report.errors] == [
        {"code": "unknown_tool", "message": "no tool named 'ech'", "node_id": "x", "field": "tool_name",
         "suggestion": "echo", "path": "/nodes/0/tool_name", "line": None, "column": None}]  # line: given as text


def test_compile_raises_blueprint_invalid_with_the_report(vorc: Orchestrator) -> None:
    with pytest.raises(BlueprintInvalid) as info:
        vorc.compile(MANY_MISTAKES)
    assert info.value.code == "invalid_blueprint"
    assert len(info.value.report.errors) == 12
    assert "(and 11 more problems)" in info.value.message


@pytest.mark.parametrize(("spec", "code", "field"), [
    ({"id": "x", "type": "tool", "tool_name": "echo", "dependencies": ["x"]}, "cycle", "dependencies"),
    ({"id": "x", "type": "tool", "tool_name": "echo", "tool_args": {"value": "{{ x.value }}"}}, "cycle", None),
    ({"id": "x", "type": "condition", "expression": "true", "true_path": ["x"]}, "cycle", "true_path"),
    ({"id": "x", "type": "condition", "expression": "true", "false_path": ["nowhere"]}, "unknown_dependency",
     "false_path"),
    ({"id": "inputs", "type": "tool", "tool_name": "echo"}, "reserved_id", "id"),
    ({"id": "x", "type": "tool"}, "schema", "tool_name"),
    ({"id": "x", "type": "loop", "body": [{"id": "y", "type": "tool", "tool_name": "echo"}]}, "schema", None),
    ({"id": "x", "type": "recursive", "convergence_condition": "true", "max_iterations": 2}, "schema", None),
    ({"id": "x", "type": "tool", "tool_name": "echo", "bogus": 1}, "schema", "bogus"),
    ({"id": "x", "type": "tool", "tool_name": "echo", "tool_args": {}}, None, None),
    ({"id": "x", "type": "tool", "tool_name": "echo", "on_error": "explode"}, "schema", "on_error"),
    ({"id": "x", "type": "workflow", "workflow_ref": "nope"}, "unknown_workflow", "workflow_ref"),
    ({"id": "1x", "type": "tool", "tool_name": "echo"}, "schema", "id"),
    ({"type": "tool", "tool_name": "echo"}, "schema", "nodes.0.tool.id"),
    ({"id": "x"}, "schema", "type"),
])
def test_single_mistakes(vorc: Orchestrator, spec: dict[str, Any], code: str | None, field: str | None) -> None:
    report = vorc.validate(blueprint(spec))
    if code is None:
        assert report.ok and report.errors == []
        return
    assert not report.ok
    assert (report.errors[0].code, report.errors[0].field) == (code, field)


def test_unknown_reference_inside_a_loop_body_and_variables_in_scope(vorc: Orchestrator) -> None:
    ok = blueprint({"id": "l", "type": "loop", "items": [1], "item_var": "row",
                    "body": [tool("e", "echo", {"value": "{{ row }} {{ index }} {{ inputs }}"})]})
    assert vorc.validate(ok).ok
    bad = blueprint({"id": "l", "type": "loop", "items": [1],
                     "body": [tool("e", "echo", {"value": "{{ itme }}"})]})
    [issue] = vorc.validate(bad).errors
    assert (issue.code, issue.node_id, issue.suggestion) == ("unknown_reference", "e", "item")
    # `previous`/`iteration` exist only in recursive bodies
    [issue] = vorc.validate(blueprint(tool("e", "echo", {"value": "{{ previous }}"}))).errors
    assert issue.code == "unknown_reference"


def test_unknown_reference_in_outputs(vorc: Orchestrator) -> None:
    [issue] = vorc.validate(blueprint(tool("e", "echo"), outputs={"x": "{{ ee.value }}"})).errors
    assert (issue.code, issue.node_id, issue.field, issue.suggestion) == ("unknown_reference", None, "outputs", "e")


def test_parse_errors_and_bad_top_level(vorc: Orchestrator, tmp_path: Path) -> None:
    [issue] = vorc.validate("{not json").errors
    assert issue.code == "parse_error"
    [issue] = vorc.validate("- just\n- a list\n").errors
    assert issue.code == "parse_error"
    [issue] = vorc.validate(tmp_path / "missing.yaml").errors
    assert issue.code == "parse_error"
    report = vorc.validate({"name": "Bad Name", "nodes": []})
    assert sorted(e.field or "" for e in report.errors) == ["name", "nodes"]
    [issue] = vorc.validate(blueprint(tool("e", "echo"), inputs={"type": "string"})).errors
    assert issue.code == "invalid_schema"


def test_yaml_and_json_text_and_files(vorc: Orchestrator, tmp_path: Path) -> None:
    data = blueprint(tool("e", "echo", {"value": "{{ inputs.v }}"}))
    path = tmp_path / "bp.json"
    path.write_text(json.dumps(data))
    assert vorc.validate(path).ok
    assert vorc.validate(str(path)).ok
    assert vorc.validate(json.dumps(data)).ok
    assert vorc.validate("name: t\nnodes:\n  - {id: e, type: tool, tool_name: echo}\n").ok


def test_run_by_unknown_workflow_name_suggests(vorc: Orchestrator) -> None:
    vorc.register_blueprint(blueprint(tool("e", "echo"), name="report"))
    with pytest.raises(UnknownName) as info:
        vorc._plan("reprot")
    assert info.value.code == "unknown_workflow"
    assert info.value.details == {"name": "reprot", "suggestion": "report"}


def test_cost_estimate_for_tool_only_blueprint_is_free(vorc: Orchestrator) -> None:
    report = vorc.validate(blueprint(tool("e", "echo"), budget_usd=0.01))
    assert report.ok
    assert report.estimate.model_dump() == {"llm_calls_min": 0, "llm_calls_max": 0, "usd_min": 0.0, "usd_max": 0.0}


# -- property: validate never raises, whatever it is fed ---------------------

VALID = blueprint(
    tool("read", "echo", {"value": "{{ inputs.path }}"}),
    {"id": "big", "type": "condition", "expression": "read.value != ''", "true_path": ["each"]},
    {"id": "each", "type": "loop", "items": "{{ [1, 2] }}", "concurrency": 2,
     "body": [tool("inner", "echo", {"value": "{{ item }}"})]},
    {"id": "fan", "type": "parallel", "branches": [[tool("p1", "echo")], [tool("p2", "echo")]]},
    {"id": "rec", "type": "recursive", "max_iterations": 3, "convergence_condition": "previous.value == '1'",
     "body": [tool("r", "echo", {"value": "{{ iteration }}"})]},
    {"id": "sub", "type": "workflow", "workflow_ref": "child", "inputs": {"x": "{{ read.value }}"}},
    name="prop",
    inputs={"type": "object", "properties": {"path": {"type": "string"}}},
    outputs={"out": "{{ read.value }}"},
)

junk = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=30)
    | st.sampled_from(["{{", "}}", "{{ x }}", "{% for %}", "{{ inputs.path }}", "{{ read.value", "{# c #}",
                       "{{ ''.__class__ }}", "{{ 'a' * 10**10 }}", "read", "each", "tool", *NODE_TYPES]),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4),
    max_leaves=8,
)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            found += _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _paths(item, (*prefix, index))
    return found


@st.composite
def mutated_blueprints(draw: st.DrawFn) -> Any:
    doc: Any = copy.deepcopy(VALID)
    for _ in range(draw(st.integers(1, 4))):
        paths = _paths(doc)
        path = draw(st.sampled_from(paths))
        if not path:
            if draw(st.booleans()):
                doc = draw(junk)
            continue
        parent = doc
        for part in path[:-1]:
            parent = parent[part]
        key = path[-1]
        action = draw(st.sampled_from(["drop", "rename", "retype", "template", "shuffle", "node_type", "dup"]))
        if action == "drop":
            del parent[key]
        elif action == "rename" and isinstance(parent, dict):
            parent[draw(st.text(max_size=8))] = parent.pop(key)
        elif action == "retype":
            parent[key] = draw(junk)
        elif action == "template":
            parent[key] = "{{ " + draw(st.text(max_size=20)) + " }}" + draw(st.sampled_from(["", " x", "}}"]))
        elif action == "shuffle" and isinstance(parent[key], list):
            parent[key] = draw(st.permutations(parent[key]))
        elif action == "node_type" and isinstance(parent, dict) and "type" in parent:
            parent["type"] = draw(st.sampled_from([*NODE_TYPES, "magic", "", "Tool"]) | st.text(max_size=6))
        elif action == "dup" and isinstance(parent, list):
            parent.append(copy.deepcopy(parent[key]))
        if isinstance(doc, dict) and isinstance(doc.get("nodes"), list) and draw(st.booleans()):
            nodes = doc["nodes"]
            ids = [n.get("id") for n in nodes if isinstance(n, dict)]
            for node in nodes:
                if isinstance(node, dict) and ids:
                    node["dependencies"] = draw(st.lists(st.sampled_from([*ids, "ghost"]), max_size=3))
    return doc


_prop_registry = Registry()
_prop_registry.add_tool(echo)
_PROP_ORC = Orchestrator(registry=_prop_registry, settings=Settings(persist_runs=False), builtin_tools=False)
_PROP_ORC.register_blueprint(blueprint(tool("c", "echo"), name="child"))


def test_the_property_seed_is_valid() -> None:
    assert _PROP_ORC.validate(VALID).ok


@hsettings(max_examples=500, deadline=None, suppress_health_check=list(HealthCheck))
@given(doc=mutated_blueprints())
def test_validate_never_raises_on_mutated_blueprints(doc: Any) -> None:
    report = _PROP_ORC.validate(doc)
    assert isinstance(report, ValidationReport)
    assert report.ok == (not report.errors)
    # "never raises" must not be bought by swallowing engine crashes
    assert [e.message for e in report.errors if e.code == "internal_error"] == []
    for issue in report.errors:
        assert issue.code and issue.message


@hsettings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))
@given(doc=junk)
def test_validate_never_raises_on_arbitrary_values(doc: Any) -> None:
    report = _PROP_ORC.validate(doc if isinstance(doc, dict | str) else {"name": "x", "nodes": doc})
    assert isinstance(report, ValidationReport)
    assert [e.message for e in report.errors if e.code == "internal_error"] == []


# -- inputs the blueprint does not declare, and tool arguments of the wrong type ------------------

THRESHOLD = {"type": "object", "properties": {"threshold": {"type": "number", "default": 10}}}


def count(n: int, label: str = "") -> dict[str, Any]:
    return {"n": n, "label": label}


def test_reading_an_undeclared_input_is_refused_with_the_nearest(vorc: Orchestrator) -> None:
    report = vorc.validate(blueprint(
        tool("a", "echo", {"value": "{{ inputs.treshold }}"}),
        tool("b", "echo", {"value": "at {{ inputs['threshhold'] }} and {{ inputs.threshold | string }}"}),
        {"id": "c", "type": "condition", "expression": "inputs.get('threshold') and inputs.limit > 1"},
        inputs=THRESHOLD, outputs={"t": "{{ inputs.tresh }}"}))
    found = [(e.code, e.node_id, e.field, e.suggestion) for e in report.errors]
    assert found == [("unknown_input", "a", "tool_args", "threshold"), ("unknown_input", "b", "tool_args", "threshold"),
                     ("unknown_input", "c", "expression", None), ("unknown_input", None, "outputs", "threshold")]
    assert "inputs.treshold" in report.errors[0].message


def test_inputs_are_not_checked_when_the_blueprint_does_not_list_them(vorc: Orchestrator) -> None:
    assert vorc.validate(blueprint(tool("a", "echo", {"value": "{{ inputs.anything }}"}))).ok
    open_schema = {"type": "object", "properties": {"x": {}}, "additionalProperties": True}
    assert vorc.validate(blueprint(tool("a", "echo", {"value": "{{ inputs.y }}"}), inputs=open_schema)).ok


def test_constant_tool_arguments_are_checked_against_the_tool(vorc: Orchestrator, registry: Registry) -> None:
    registry.add_tool(count)
    report = vorc.validate(blueprint(
        tool("bad", "count", {"n": "many", "label": 3}),
        tool("templated", "count", {"n": "{{ inputs.threshold }}"}),  # known only at run time: not checked
        tool("fine", "count", {"n": "7", "label": "x"}),  # the tool accepts what it can convert
        inputs=THRESHOLD))
    found = [(e.code, e.node_id, e.field) for e in report.errors]
    assert found == [("invalid_tool_args", "bad", "tool_args.n"), ("invalid_tool_args", "bad", "tool_args.label")]
    assert "valid integer" in report.errors[0].message and "valid string" in report.errors[1].message


async def test_a_run_refuses_inputs_the_blueprint_does_not_declare(vorc: Orchestrator) -> None:
    bp = blueprint(tool("a", "echo", {"value": "{{ inputs.threshold | string }}"}), inputs=THRESHOLD)
    with pytest.raises(InputsInvalid) as refused:
        await vorc.run(bp, {"treshold": 5})
    assert refused.value.details["errors"] == [{"path": "treshold",
                                                "message": "unknown input; did you mean 'threshold'?"}]
    record = await vorc.run(bp, {"threshold": 5})
    assert record.status == "succeeded" and record.outputs == {"a": {"value": "5"}}
