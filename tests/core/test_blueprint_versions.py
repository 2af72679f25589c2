"""A workflow's versions through the orchestrator's API: texts kept, history with runs, diffs, rollback as a new
version, saves refused when another came first, and issues pinned to their node, field, line and column."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from ice_mcp import Orchestrator
from ice_mcp.errors import BlueprintInvalid, IceError
from ice_mcp.settings import Settings
from ice_mcp.store.sqlite import RunStore

V1 = """\
# Doubles a number.
name: doubler
inputs:
  type: object
  properties:
    x: {type: number}
nodes:
  - id: twice
    type: code
    code: return inputs["x"] * 2   # the whole job
    inputs: {x: "{{ inputs.x }}"}
outputs:
  y: "{{ twice.result }}"
"""
V2 = V1.replace('inputs["x"] * 2', 'inputs["x"] * 2 + 0')


async def test_texts_history_diff_and_rollback(orc: Orchestrator) -> None:
    first = orc.save_blueprint_text("doubler", V1)
    assert (first.version, first.previous_version, first.created) == (1, None, True)
    run = await orc.run("doubler", {"x": 2})
    assert run.outputs == {"y": 4} and run.workflow_version == 1
    second = orc.save_blueprint_text("doubler", V2, base_version=1)
    assert (second.version, second.previous_version) == (2, 1)
    await orc.run("doubler", {"x": 3})
    await orc.run("doubler", {"x": 4})
    history = orc.blueprint_history("doubler")
    assert [(h.version, h.current, h.runs, h.has_text) for h in history] == [(2, True, 2, True), (1, False, 1, True)]
    assert orc.blueprint_version("doubler", 1).text == V1  # comments and all
    diff = orc.blueprint_diff("doubler", 1, 2)
    assert diff["compared"] == "text" and diff["changed_lines"] == 2
    assert '-    code: return inputs["x"] * 2   # the whole job\n' in diff["diff"]

    back = orc.rollback_blueprint("doubler", 1)
    assert (back.version, back.previous_version, back.created) == (3, 2, True)
    assert orc.blueprint_version("doubler", 3).text == V1
    assert [h.version for h in orc.blueprint_history("doubler") if h.current] == [3]
    assert (await orc.run("doubler", {"x": 5})).workflow_version == 3
    stored = orc.store.run((await orc.run("doubler", {"x": 1})).run_id) if orc.store else None
    assert stored is not None and stored.version == 3
    # the runs of version 2 still name it
    assert orc.blueprint_history("doubler")[1].runs == 2


async def test_a_save_on_an_old_base_is_a_version_conflict(orc: Orchestrator) -> None:
    orc.save_blueprint_text("doubler", V1)
    orc.save_blueprint_text("doubler", V2, base_version=1)  # the other editor saved first
    with pytest.raises(IceError) as caught:
        orc.save_blueprint_text("doubler", V1.replace("# Doubles", "# Twice"), base_version=1)
    assert caught.value.code == "version_conflict"
    assert caught.value.details == {"name": "doubler", "base_version": 1, "current_version": 2}
    with pytest.raises(IceError) as named:
        orc.save_blueprint_text("other", V1)
    assert named.value.code == "name_mismatch"


async def test_an_invalid_save_pins_each_issue(orc: Orchestrator) -> None:
    broken = V1.replace("    code: return", "    cod: return")
    with pytest.raises(BlueprintInvalid) as caught:
        orc.save_blueprint_text("doubler", broken)
    issue = next(i for i in caught.value.report.errors if i.suggestion == "code")
    assert (issue.node_id, issue.path, issue.line, issue.column) == ("twice", "/nodes/0/cod", 10, 5)
    assert "doubler" not in orc.registry.workflows


async def test_validation_pins_nested_nodes_and_top_level_fields(orc: Orchestrator) -> None:
    text = V1.replace("    inputs: {x: \"{{ inputs.x }}\"}\n", "    inputs: {x: \"{{ inputs.x }}\"}\n"
                      "  - id: each\n    type: loop\n    items: [1, 2]\n    body:\n"
                      "      - id: inner\n        type: code\n        code: return 1\n        retries: many\n")
    report = orc.validate(text)
    inner = next(i for i in report.errors if i.node_id == "inner")
    assert (inner.path, inner.line, inner.column) == ("/nodes/1/body/0/retries", 19, 9)
    from_dict = orc.validate({"name": "w", "nodes": [{"id": "a", "type": "code", "code": "return 1", "bad": 1}]})
    assert from_dict.errors[0].path == "/nodes/0/bad" and from_dict.errors[0].line is None


async def test_unknown_names_and_versions(orc: Orchestrator) -> None:
    with pytest.raises(IceError) as caught:
        orc.blueprint_history("nobody")
    assert caught.value.code == "unknown_workflow"
    orc.save_blueprint_text("doubler", V1)
    with pytest.raises(IceError) as missing:
        orc.blueprint_version("doubler", 9)
    assert missing.value.code == "unknown_version"


async def test_a_version_without_text_is_diffed_as_canonical_yaml(orc: Orchestrator) -> None:
    orc.register_blueprint({"name": "w", "nodes": [{"id": "a", "type": "code", "code": "return 1"}]})
    orc.save_blueprint_text("w", "name: w\nnodes:\n  - {id: a, type: code, code: return 2}\n", base_version=1)
    diff = orc.blueprint_diff("w", 1, 2)
    assert diff["compared"] == "canonical"
    assert "-  code: return 1\n+  code: return 2\n" in diff["diff"]


def test_an_older_data_folder_gains_the_text_column(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE blueprints (name TEXT NOT NULL, version INTEGER NOT NULL, source TEXT NOT NULL,"
               " created_at REAL NOT NULL, deleted INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (name, version))")
    db.execute("INSERT INTO blueprints VALUES ('w', 1, '{\"name\": \"w\"}', 1.0, 0)")
    db.commit()
    db.close()
    store = RunStore(path)
    try:
        assert [(v.version, v.text) for v in store.blueprint_versions("w")] == [(1, None)]
        assert store.save_blueprint("w", {"name": "w"}, "name: w\n") == 2
        assert store.blueprint_versions("w")[1].text == "name: w\n"
    finally:
        store.close()


async def test_versions_survive_a_restart(settings: Settings) -> None:
    first = Orchestrator(settings=settings)
    first.save_blueprint_text("doubler", V1)
    await first.aclose()
    second = Orchestrator(settings=settings)
    try:
        second.restore_blueprints()
        assert [(h.version, h.current) for h in second.blueprint_history("doubler")] == [(1, True)]
        assert second.save_blueprint_text("doubler", V2, base_version=1).version == 2
    finally:
        await second.aclose()
