"""What the editor's routes hand the page, in process: node types' form schemas, the live tools, text parsed and
edits written back through the round-trip, issues with their node and field."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

from ice_mcp import Orchestrator
from ice_mcp.blueprint.models import NODE_MODELS
from ice_mcp.bundled import bundled_dir
from ice_mcp.server.web.ui.editor import catalogue, checked_text, node_type_info, synced_text


def test_a_container_type_lists_its_sub_graph_fields_and_its_form_leaves_them_out() -> None:
    loop, parallel, tool = (node_type_info(NODE_MODELS[name]) for name in ("loop", "parallel", "tool"))
    assert loop["subgraphs"] == [{"field": "body", "nested": False}] and loop["container"]
    assert parallel["subgraphs"] == [{"field": "branches", "nested": True}]
    assert tool["subgraphs"] == [] and tool["label"] == ["tool_name"] and not tool["container"]
    assert "body" not in loop["schema"]["properties"] and "items" in loop["schema"]["properties"]
    # The node models the sub-graphs held are gone from the definitions: the form is small.
    assert not any(name.endswith("Node") for name in loop["schema"].get("$defs", {}))
    assert len(json.dumps(loop["schema"])) < 4_000
    assert "prompt" in node_type_info(NODE_MODELS["llm"])["multiline"]


def test_the_catalogue_has_every_node_type_the_live_tools_and_the_workflow_fields() -> None:
    orc = Orchestrator()
    data = catalogue(orc)
    assert set(data["node_types"]) == set(orc.node_models.models)
    tools = {tool["name"]: tool for tool in data["tools"]}
    assert "path" in tools["csv_reader"]["input_schema"]["properties"]
    assert {"limits", "inputs", "outputs", "schedules"} <= set(data["workflow_schema"]["properties"])
    assert "nodes" not in data["workflow_schema"]["properties"]
    assert "retries" in data["common_fields"]


def test_text_is_read_and_checked_and_an_edit_changes_only_its_lines() -> None:
    orc = Orchestrator()
    text = (bundled_dir("blueprints") / "csv_report.json").read_text(encoding="utf-8")
    checked = checked_text(orc, text)
    assert checked["ok"] and checked["issues"] == [] and checked["blueprint"]["name"] == "csv_report"
    blueprint = checked["blueprint"]
    blueprint["nodes"][0]["tool_name"] = "no_such_tool"
    synced = synced_text(orc, text, blueprint)
    changed = [pair for pair in zip(text.splitlines(), synced["text"].splitlines(), strict=True) if pair[0] != pair[1]]
    assert len(changed) == 1 and "no_such_tool" in changed[0][1]
    issue = next(i for i in synced["issues"] if i["code"] == "unknown_tool")
    assert issue["node"] == "read" and issue["field"] == "tool_name" and issue["severity"] == "error"
    # Pinned in the text too: the line of the field's value, as the text pane shows it.
    line = synced["text"].splitlines()[issue["line"] - 1]
    assert issue["path"] == "/nodes/0/tool_name" and "no_such_tool" in line


def test_text_that_does_not_parse_is_one_issue_and_no_blueprint() -> None:
    checked = checked_text(Orchestrator(), "name: x\nnodes: [1,\n")
    assert checked["blueprint"] is None and not checked["ok"]
    assert checked["issues"][0]["code"] == "parse_error"


# The editor's modules as an MCP App inlines them (app_view.py's inliner: one module, the imports between them gone).
INLINED = ("dagre.min.js", "dom.js", "dag.js", "layout.js", "editor-model.js", "schema-form.js", "editor-canvas.js",
           "editor.js")


def test_the_editor_modules_make_one_valid_module_when_inlined(tmp_path: Path) -> None:
    from ice_mcp.server.protocol.app_view import _MODULE_IMPORT, STATIC

    texts = [(STATIC / name).read_text(encoding="utf-8") for name in INLINED]
    joined = "\n".join(_MODULE_IMPORT.sub("", text) for text in texts)
    assert "import " not in "".join(line for line in joined.splitlines() if line.startswith("import "))
    declared: dict[str, str] = {}
    for name, text in zip(INLINED[1:], texts[1:], strict=True):  # dagre's own names are minified, one `var dagre`
        for match in re.finditer(r"^(?:export )?(?:async )?(?:function|class|const|let|var) (\w+)", text, re.MULTILINE):
            assert match.group(1) not in declared, f"{match.group(1)} in {name} and {declared.get(match.group(1))}"
            declared[match.group(1)] = name
    module = tmp_path / "editor.mjs"
    module.write_text(joined, encoding="utf-8")
    node = shutil.which("node")
    assert node, "node is part of the test set-up (make test)"
    checked = subprocess.run([node, "--check", str(module)], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stderr
