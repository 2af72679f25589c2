"""The file is the truth: opening and saving a blueprint's text unchanged changes no byte, an edit changes only the
lines of what it changed, comments and anchors stay, and the text always reads back as the edited data."""

from __future__ import annotations

import collections
import copy
import difflib
import json
import random
from pathlib import Path
from typing import Any

import pytest
import yaml

from ice_mcp.blueprint.loading import parse_text
from ice_mcp.blueprint.roundtrip import apply_edit, parse_document
from ice_mcp.errors import IceError
from tests.core.blueprint_texts import blueprint, json_text, yaml_text

ROOT = Path(__file__).resolve().parents[2]
BUNDLED = sorted({p.resolve() for folder in ("blueprints", "examples", "ice_mcp/_data/blueprints",
                                            "ice_mcp/_data/examples")
                  for p in (ROOT / folder).rglob("*") if p.suffix in (".json", ".yaml", ".yml")})
GENERATED = 300

COMMENTED = """\
# The weekly report.
schema_version: "1"
name: weekly  # shown in tools/list

description: 'Totals, then a report'
defaults: &defaults {retries: 2, timeout_seconds: 30}
nodes:
  # reads the file
  - id: read
    type: tool
    tool_name: csv_reader   # built in
    tool_args: {path: "{{ inputs.path }}"}
  - id: total
    type: code
    <<: *defaults
    code: |
      return sum(r["amount"] for r in inputs["rows"])
    inputs:
      rows: "{{ read.rows }}"

  # writes it
  - id: write
    type: tool
    tool_name: file_write
    tool_args:
      path: reports/weekly.md
      content: "{{ total.result }}"
    dependencies: [total]
outputs:
  total: "{{ total.result }}"
"""


def changed_lines(before: str, after: str) -> tuple[int, int]:
    """(lines removed, lines added) between two texts."""
    diff = [line for line in difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0)
            if line[:1] in "+-" and not line.startswith(("+++", "---"))]
    return sum(line[0] == "-" for line in diff), sum(line[0] == "+" for line in diff)


def comments(text: str) -> collections.Counter[str]:
    return collections.Counter(line.strip() for line in text.splitlines() if line.strip().startswith("#"))


@pytest.mark.parametrize("path", BUNDLED, ids=lambda p: p.name)
def test_bundled_documents_save_unchanged_byte_for_byte(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    document = parse_document(text)
    assert document.format == ("json" if path.suffix == ".json" else "yaml")
    assert document.blueprint == parse_text(text)  # read as the engine reads it
    assert apply_edit(text, document.blueprint) == text


def test_every_bundled_folder_is_covered() -> None:
    assert len(BUNDLED) >= 11 and any(p.suffix == ".yaml" for p in BUNDLED)


@pytest.mark.parametrize("path", [p for p in BUNDLED if "networks" not in p.parts], ids=lambda p: p.name)
def test_one_field_of_one_node_changes_one_line(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    data = copy.deepcopy(parse_document(text).blueprint)
    data["nodes"][-1]["id"] = "renamed"
    out = apply_edit(text, data)
    assert changed_lines(text, out) == (1, 1)
    assert parse_document(out).blueprint == data


def test_comments_anchors_quoting_and_blank_lines_stay() -> None:
    data = copy.deepcopy(parse_document(COMMENTED).blueprint)
    data["nodes"][2]["tool_args"]["path"] = "reports/monthly.md"
    data["name"] = "monthly"
    data["description"] = "Totals, then a new report"
    out = apply_edit(COMMENTED, data)
    assert changed_lines(COMMENTED, out) == (3, 3)
    assert "name: monthly  # shown in tools/list\n" in out  # the end-of-line comment stays
    assert "description: 'Totals, then a new report'\n" in out  # single quotes stay single
    assert comments(out) == comments(COMMENTED)
    assert "<<: *defaults" in out and "&defaults" in out
    assert parse_document(out).blueprint == data


def test_removing_a_node_removes_its_lines_and_its_comment() -> None:
    data = copy.deepcopy(parse_document(COMMENTED).blueprint)
    del data["nodes"][2]
    out = apply_edit(COMMENTED, data)
    removed, added = changed_lines(COMMENTED, out)
    assert added == 0 and removed == 8  # the comment above it, six lines of it
    assert "# writes it" not in out and "# reads the file" in out
    assert parse_document(out).blueprint == data


def test_moving_a_node_moves_its_own_text() -> None:
    data = copy.deepcopy(parse_document(COMMENTED).blueprint)
    data["nodes"].insert(0, data["nodes"].pop(2))
    out = apply_edit(COMMENTED, data)
    assert comments(out) == comments(COMMENTED)
    assert out.index("# writes it") < out.index("# reads the file")
    assert parse_document(out).blueprint == data


def test_new_keys_go_last_and_removed_keys_go_with_their_comment() -> None:
    data = copy.deepcopy(parse_document(COMMENTED).blueprint)
    data["nodes"][0]["retries"] = 3
    data["nodes"][0]["tool_args"]["delimiter"] = ";"
    del data["nodes"][0]["tool_name"]
    data["inputs"] = {"type": "object", "properties": {"path": {"type": "string"}}}
    out = apply_edit(COMMENTED, data)
    assert "# built in" not in out
    assert '    tool_args: {path: "{{ inputs.path }}", delimiter: ;}\n    retries: 3\n' in out
    assert out.rstrip().endswith("inputs:\n  type: object\n  properties:\n    path:\n      type: string")
    assert list(parse_document(out).blueprint) == [*parse_document(COMMENTED).blueprint, "inputs"]
    assert parse_document(out).blueprint == data


def test_an_anchor_changed_where_an_alias_should_not_follow_writes_the_alias_out() -> None:
    text = "a: &x {k: 1}\nb: *x\nc: *x  # same\n"
    out = apply_edit(text, {"a": {"k": 2}, "b": {"k": 1}, "c": {"k": 2}})
    assert out == "a: &x {k: 2}\nb: {k: 1}\nc: *x  # same\n"


def test_a_merged_key_changed_is_written_over_the_merge() -> None:
    data = copy.deepcopy(parse_document(COMMENTED).blueprint)
    data["nodes"][1]["retries"] = 5
    out = apply_edit(COMMENTED, data)
    assert "    <<: *defaults\n" in out and "    retries: 5\n" in out
    assert parse_document(out).blueprint == data


def test_json_stays_json_with_its_indentation() -> None:
    text = json.dumps({"name": "w", "nodes": [{"id": "a", "type": "code", "code": "return 1"}]}, indent=4) + "\n"
    data = parse_document(text).blueprint
    data["nodes"].append({"id": "b", "type": "code", "code": "return 2", "dependencies": ["a"]})
    data["description"] = "két"
    out = apply_edit(text, data)
    assert json.loads(out) == data
    assert out.startswith('{\n    "name": "w",\n    "nodes": [\n        {\n            "id": "a",')
    assert '\n        {\n            "id": "b",\n' in out and '"description": "két"\n}\n' in out


def test_a_change_that_would_lose_comments_unnoticed_is_read_back() -> None:
    # the kind of a value changes: its inner comments go with the data they described, and the text reads back
    text = "name: w\nnodes:\n  - id: a\n    tool_args:\n      # the path\n      path: x\n"
    out = apply_edit(text, {"name": "w", "nodes": [{"id": "a", "tool_args": "{{ inputs.args }}"}]})
    assert out == "name: w\nnodes:\n  - id: a\n    tool_args: '{{ inputs.args }}'\n"


def test_text_that_is_not_yaml_is_a_parse_error() -> None:
    with pytest.raises(IceError) as caught:
        parse_document("name: [unclosed\n")
    assert caught.value.code == "parse_error"


def test_locate_names_line_and_column() -> None:
    document = parse_document(COMMENTED)
    assert document.locate(["nodes", 2, "tool_args", "path"]) == (26, 7)
    assert document.locate(["nodes", 1]) == (13, 5)
    assert document.locate(["nodes", 1, "nope"]) == (13, 5)  # the deepest place the path reaches
    assert document.tree["nodes"][1]["id"] == "total"  # ruamel's round-trip tree


def _edits(data: dict[str, Any], rng: random.Random) -> list[tuple[str, dict[str, Any]]]:
    nodes = data["nodes"]
    n = rng.randrange(len(nodes))
    made: list[tuple[str, dict[str, Any]]] = []
    fields = [k for k, v in nodes[n].items()
              if (isinstance(v, (str, int)) and not isinstance(v, bool)) and not (isinstance(v, str) and "\n" in v)]
    new = copy.deepcopy(data)
    key = rng.choice(fields)
    new["nodes"][n][key] = "changed value" if isinstance(new["nodes"][n][key], str) else 77
    made.append(("field", new))
    if len(nodes) > 1:
        new = copy.deepcopy(data)
        del new["nodes"][n]
        made.append(("remove node", new))
    new = copy.deepcopy(data)
    new["nodes"].insert(rng.randrange(len(nodes)), new["nodes"].pop(n))
    made.append(("move node", new))
    new = copy.deepcopy(data)
    new["nodes"][n]["added_key"] = {"a": [1, "x y"], "b": "l1\nl2\n"}
    made.append(("add key", new))
    new = copy.deepcopy(data)
    del new["nodes"][n][rng.choice([k for k in new["nodes"][n] if k != "id"])]
    made.append(("remove key", new))
    new = copy.deepcopy(data)
    new["nodes"].insert(rng.randrange(len(nodes) + 1), {"id": "fresh", "type": "code", "code": "return 1"})
    made.append(("add node", new))
    new = copy.deepcopy(data)
    new["nodes"][n]["id"] = "renamed"
    made.append(("rename", new))
    tools = [x for x in new["nodes"] if x.get("tool_args")]
    if tools:
        new = copy.deepcopy(data)
        args = next(x for x in new["nodes"] if x.get("tool_args"))["tool_args"]
        scalar = [k for k, v in args.items() if not isinstance(v, (dict, list))]
        if scalar:
            args[scalar[0]] = "poked"
            made.append(("anchored args", new))
    return made


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["yaml", "json"])
def test_generated_blueprints_round_trip_and_edit(kind: str) -> None:
    """300 blueprints, each as hand-style YAML (comments, quoting, flow, anchors, aliases, merge keys) or JSON."""
    counts: collections.Counter[str] = collections.Counter()
    for seed in range(GENERATED):
        rng = random.Random(seed)
        data = blueprint(rng)
        text = yaml_text(data, rng) if kind == "yaml" else json_text(data, rng)
        document = parse_document(text)
        assert document.blueprint == (yaml.safe_load(text) if kind == "yaml" else json.loads(text))
        assert apply_edit(text, document.blueprint) == text, seed
        multiline = "\n" in text.strip()
        has_aliases = "*args" in text
        for name, new in _edits(document.blueprint, random.Random(seed * 7 + 1)):
            out = apply_edit(text, new)
            assert parse_document(out).blueprint == new, (seed, name)
            removed, added = changed_lines(text, out)
            if name in ("field", "rename") and multiline:
                assert (removed, added) == (1, 1), (seed, name)
            if kind == "yaml" and name != "remove node" and name != "remove key":
                assert comments(out) == comments(text), (seed, name)
            if kind == "yaml" and name in ("remove node", "remove key"):
                assert not comments(out) - comments(text), (seed, name)
                if not has_aliases:
                    assert added == 0, (seed, name)
            counts[name] += 1
    assert counts["field"] == GENERATED
