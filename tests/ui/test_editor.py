"""The blueprint editor (/ui/editor) in a real headless Chromium against a real server: open, add, delete, connect,
reconnect, edit in the form, validation pinned, the text pane both ways, save, versions, diff, rollback, run,
keyboard, two editors, undo/redo, and every bundled blueprint saved unchanged byte for byte."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from conftest import server_env, use_token
from live import live_server
from mcp_helpers import ADMIN

from blueprints import write_blueprints
from ice_mcp.bundled import bundled_dir

pytestmark = pytest.mark.live
DOCS = Path(__file__).resolve().parents[2] / "docs"


COMMENTED = """\
# A hand-written YAML blueprint: its comments, order and quoting stay through the editor.
name: commented
description: Says hello, slowly.
nodes:
  # the first step
  - id: first
    type: tool
    tool_name: hold   # a tool of the tests
    tool_args: {label: "first", seconds: 0.05}
  - id: second
    type: tool
    tool_name: hold
    tool_args:
      label: 'second'
      seconds: 0.05
    dependencies: [first]
"""


@pytest.fixture(scope="module")
def server(workspace: Path) -> Iterator[str]:
    """The bundled templates beside the browser tests' workflows and tools."""
    folder = write_blueprints(workspace / "ui_blueprints")
    (folder / "commented.yaml").write_text(COMMENTED, encoding="utf-8")
    with live_server(workspace, "--templates", "--blueprints", str(folder), "--tools", "ui_tools",
                     env=server_env()) as url:
        yield url


async def open_editor(page: Any, url: str, name: str = "", *, admin: bool = True) -> None:
    """The editor on `name` (a new workflow when empty), after typing the admin token as a user does."""
    if admin:
        await page.goto(f"{url}/ui/editor")
        await page.wait_for_selector("body[data-ready]")
        await use_token(page, ADMIN)
    await page.goto(f"{url}/ui/editor/{name}")
    await page.wait_for_selector("body[data-ready]")
    await settled(page)


async def settled(page: Any) -> None:
    """Every edit so far has reached the server and its answer is drawn."""
    await page.wait_for_selector('body[data-busy="no"]')


async def text(page: Any) -> str:
    return str(await page.input_value("#editor-text"))


async def data(page: Any) -> dict[str, Any]:
    """The text pane's blueprint, as the engine reads it."""
    from ice_mcp.operations.documents import parse_document

    return parse_document(await text(page))


def node(blueprint: dict[str, Any], node_id: str) -> dict[str, Any]:
    return next(n for n in blueprint["nodes"] if n["id"] == node_id)


async def centre(page: Any, selector: str) -> tuple[float, float]:
    box = await page.locator(selector).first.bounding_box()
    assert box is not None, selector
    return box["x"] + box["width"] / 2, box["y"] + min(box["height"], 46) / 2


async def drag(page: Any, source: str, target: str) -> None:
    """A mouse drag from one element to another, in steps, as a hand does it."""
    await page.locator(source).first.hover()
    x0, y0 = await centre(page, source)
    x1, y1 = await centre(page, target)
    await page.mouse.move(x0, y0)
    await page.mouse.down()
    await page.mouse.move((x0 + x1) / 2, (y0 + y1) / 2, steps=4)
    await page.mouse.move(x1, y1, steps=4)
    await page.mouse.up()
    await settled(page)


async def fill_field(page: Any, name: str, value: str) -> None:
    """Type into a field of the form (opening the folded common fields when it is there) and leave it."""
    field = page.locator(f"#field-{name}")
    if not await field.is_visible():
        await page.click(".more-fields summary")
    await field.fill(value)
    await field.press("Tab")
    await settled(page)


def changed_lines(before: str, after: str) -> list[str]:
    import difflib

    return [line for line in difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0)
            if line[:1] in "+-" and not line.startswith(("+++", "---"))]


def stored_text(url: str, name: str, version: int) -> str:
    with httpx2.Client(base_url=url, headers={"Authorization": f"Bearer {ADMIN}"}) as client:
        answer = client.get(f"/ui/api/editor/workflows/{name}", params={"version": version})
        answer.raise_for_status()
        return str(answer.json()["text"])


# -- opening and drawing --------------------------------------------------------------------------------------


async def test_edit_link_opens_the_editor_with_the_graph_and_the_text(page: Any, server: str) -> None:
    await page.goto(f"{server}/ui#/workflows")
    await page.click('[data-edit="research_fanout"]')
    await page.wait_for_selector("body[data-ready]")
    assert page.url.endswith("/ui/editor/research_fanout")
    await settled(page)
    # The loop is drawn as a container with its body inside it, laid out by dagre below... and the join after it.
    loop = await page.locator('.node.container[data-node="fan_out"]').bounding_box()
    inner = await page.locator('[data-node="fan_out[0].answer"]').bounding_box()
    after = await page.locator('[data-node="join"]').bounding_box()
    assert loop["x"] <= inner["x"] and inner["y"] + inner["height"] <= loop["y"] + loop["height"]
    assert after["y"] >= loop["y"] + loop["height"]
    assert await text(page) == (bundled_dir("blueprints") / "research_fanout.json").read_text(encoding="utf-8")
    assert await page.text_content("#validity") == "valid"
    # A viewer without the token sees, and may not save.
    assert await page.is_disabled("#save")


# -- editing on the canvas --------------------------------------------------------------------------------------


async def test_add_a_node_draws_it_writes_it_and_pins_what_it_lacks(page: Any, server: str) -> None:
    await open_editor(page, server, "csv_report")
    before = await text(page)
    await page.select_option("#add-type", "tool")
    await page.click("#add-node")
    await page.wait_for_selector('[data-node="tool_1"]')
    await settled(page)
    added = node(await data(page), "tool_1")
    assert added == {"id": "tool_1", "type": "tool", "tool_name": ""}
    assert all(line.startswith("+") for line in changed_lines(before, await text(page)))  # nothing else moved
    await page.wait_for_selector('[data-node="tool_1"].has-issue')  # no tool named ''


async def test_delete_removes_the_node_and_the_dependencies_on_it(page: Any, server: str) -> None:
    await open_editor(page, server, "progress")
    await page.click('[data-node="b"] .node-head')
    await page.click("#delete-node")
    await page.wait_for_selector('[data-node="b"]', state="detached")
    await settled(page)
    blueprint = await data(page)
    assert [n["id"] for n in blueprint["nodes"]] == ["a", "c"]
    assert "dependencies" not in node(blueprint, "c")  # c read b only: the dependency went with it


async def test_drag_from_a_port_connects_two_nodes(page: Any, server: str) -> None:
    await open_editor(page, server, "progress")
    await drag(page, '[data-port="a"]', '[data-node="c"]')
    assert node(await data(page), "c")["dependencies"] == ["b", "a"]
    assert await page.locator('.edge-end[data-from="a"][data-to="c"]').count() == 1
    # An edge's end selected and Delete pressed: the dependency goes.
    await page.click('.edge-end[data-from="a"][data-to="c"]')
    await page.keyboard.press("Delete")
    await page.wait_for_selector('.edge-end[data-from="a"][data-to="c"]', state="detached")
    await settled(page)
    assert node(await data(page), "c")["dependencies"] == ["b"]


async def test_drag_an_edge_end_reconnects_it(page: Any, server: str) -> None:
    await open_editor(page, server, "progress")
    await page.select_option("#add-type", "tool")
    await page.click("#add-node")
    await page.wait_for_selector('[data-node="tool_1"]')
    await settled(page)
    await drag(page, '.edge-end[data-from="a"][data-to="b"]', '[data-node="tool_1"]')
    blueprint = await data(page)
    assert "dependencies" not in node(blueprint, "b")
    assert node(blueprint, "tool_1")["dependencies"] == ["a"]


async def test_the_form_edits_a_node_and_offers_the_live_tools(page: Any, server: str) -> None:
    await open_editor(page, server, "progress")
    await page.click('[data-node="a"] .node-head')
    tools = await page.eval_on_selector_all("#field-tool_name option", "els => els.map(e => e.value)")
    assert {"hold", "csv_reader", "greet"} <= set(tools)
    await page.select_option("#field-tool_name", "greet")
    await settled(page)
    # The chosen tool's input schema gives the argument fields.
    await page.wait_for_selector("#arg-name")
    await page.fill("#arg-name", "{{ inputs.who }}")
    await page.press("#arg-name", "Tab")
    await fill_field(page, "description", "says hello")
    changed = node(await data(page), "a")
    assert changed["tool_name"] == "greet" and changed["description"] == "says hello"
    assert changed["tool_args"]["name"] == "{{ inputs.who }}"


async def test_a_validation_error_is_pinned_to_the_node_and_the_field(page: Any, server: str) -> None:
    await open_editor(page, server, "progress")
    await page.click('[data-node="b"] .node-head')
    await fill_field(page, "retries", "-3")
    await page.wait_for_selector('[data-node="b"].has-issue .node-issue')
    await page.wait_for_selector('.field.invalid[data-path="retries"]')
    assert "greater than or equal to 0" in await page.text_content('[data-path="retries"] .field-issue')
    assert await page.text_content("#validity") != "valid"
    issue = page.locator('#issues li[data-node="b"]')
    assert await issue.count() >= 1


async def test_the_workflow_form_edits_inputs_outputs_and_limits(page: Any, server: str) -> None:
    await open_editor(page, server, "greeting")
    await page.click("#add-inputs")
    await settled(page)
    await page.fill('tr[data-input="input_5"] .input-name', "shout")
    await page.press('tr[data-input="input_5"] .input-name', "Tab")
    await settled(page)
    await page.select_option('tr[data-input="shout"] select', "boolean")
    await settled(page)
    await page.fill('.map-row[data-key="text"] .map-value', "{{ greet.text | upper }}")
    await page.press('.map-row[data-key="text"] .map-value', "Tab")
    await settled(page)
    await fill_field(page, "limits-max_concurrent_runs", "2")
    blueprint = await data(page)
    assert blueprint["inputs"]["properties"]["shout"] == {"type": "boolean"}
    assert blueprint["inputs"]["required"] == ["name"]
    assert blueprint["outputs"] == {"text": "{{ greet.text | upper }}"}
    assert blueprint["limits"] == {"max_concurrent_runs": 2}
    assert await page.text_content("#validity") == "valid"


# -- the text pane ---------------------------------------------------------------------------------------------


async def test_the_text_pane_follows_the_graph_and_the_graph_follows_the_text(page: Any, server: str) -> None:
    await open_editor(page, server, "csv_report")
    original = await text(page)
    # Graph -> text: one field changed changes only its own line.
    await page.click('[data-node="read"] .node-head')
    await fill_field(page, "retries", "2")
    changed = changed_lines(original, await text(page))
    assert len([line for line in changed if line.startswith("+")]) <= 2 and '"retries": 2' in "".join(changed), changed
    # Text -> graph: a node typed into the text is drawn.
    blueprint = await data(page)
    blueprint["nodes"].append({"id": "typed", "type": "tool", "tool_name": "hold", "dependencies": ["read"]})
    await page.fill("#editor-text", json.dumps(blueprint, indent=2))
    await page.wait_for_selector('[data-node="typed"]')
    await settled(page)
    assert await page.locator('.edge-end[data-from="read"][data-to="typed"]').count() == 1


async def test_a_yaml_blueprint_keeps_its_comments_through_graph_edits(page: Any, server: str) -> None:
    await open_editor(page, server, "commented")
    assert await text(page) == COMMENTED
    await page.click('[data-node="second"] .node-head')
    await fill_field(page, "retries", "3")
    await page.select_option("#add-type", "tool")
    await page.click("#add-node")
    await page.wait_for_selector('[data-node="tool_1"]')
    await settled(page)
    edited = await text(page)
    assert all(line in edited.splitlines() for line in COMMENTED.splitlines())  # every line kept, comments too
    added = [line[1:] for line in changed_lines(COMMENTED, edited)]
    assert added == ["    retries: 3", "  - id: tool_1", "    type: tool", "    tool_name: ''"], added


async def test_a_new_workflow_drawn_from_nothing_is_saved_under_its_name(page: Any, server: str) -> None:
    await open_editor(page, server, "")
    await fill_field(page, "name", "drawn_here")
    await page.select_option("#add-type", "tool")
    await page.click("#add-node")
    await page.wait_for_selector('[data-node="tool_1"]')
    await page.select_option("#field-tool_name", "hold")
    await settled(page)
    await page.fill("#arg-label", "hi")
    await page.press("#arg-label", "Tab")
    await settled(page)
    assert await page.text_content("#validity") == "valid"
    await save(page)
    assert page.url.endswith("/ui/editor/drawn_here")
    version = await page.evaluate("window.__editor.state.version")
    stored = stored_text(server, "drawn_here", version)
    assert stored == await text(page) and stored.startswith('schema_version: "1"\nname: drawn_here\n')


# -- saving and versions ----------------------------------------------------------------------------------------


async def save(page: Any) -> None:
    """Click Save and wait for this save's answer (body[data-saves] counts the page's saves)."""
    before = int(await page.get_attribute("body", "data-saves") or 0)
    await page.click("#save")
    await page.wait_for_selector(f'body[data-saves="{before + 1}"]')
    assert await page.get_attribute("#editor-status", "data-dirty") == "no"
    await settled(page)


async def two_versions(page: Any, server: str, name: str, node_id: str) -> tuple[str, int]:
    """A file's workflow saved as it is, then with its node's description changed: (the file's text, the new version)."""
    await open_editor(page, server, name)
    first = await text(page)
    await save(page)
    await page.click(f'[data-node="{node_id}"] .node-head')
    await fill_field(page, "description", "changed here")
    assert await page.get_attribute("#editor-status", "data-dirty") == "yes"
    await save(page)
    return first, int(await page.evaluate("window.__editor.state.version"))


async def test_save_makes_a_version(page: Any, server: str) -> None:
    first, saved = await two_versions(page, server, "long", "wait")
    assert stored_text(server, "long", saved) == await text(page) != first
    assert stored_text(server, "long", saved - 1) == first
    assert await page.text_content("#editor-status") == f"saved · v{saved}"


async def test_the_diff_between_two_versions(page: Any, server: str) -> None:
    _, saved = await two_versions(page, server, "html_out", "render")
    await page.click("#show-versions")
    await page.wait_for_selector(f'#versions li[data-version="{saved}"]')
    assert await page.input_value("#diff-a") == str(saved - 1) and await page.input_value("#diff-b") == str(saved)
    await page.click("#show-diff")
    await page.wait_for_selector("#diff .add")
    assert "changed here" in await page.text_content("#diff .add")
    assert await page.locator("#diff .del").count() == 1  # one line of the one-line JSON file


async def test_rollback_makes_an_old_version_current_as_a_new_one(page: Any, server: str) -> None:
    first, saved = await two_versions(page, server, "fails", "prepare")
    await page.click("#show-versions")
    await page.click(f'#versions li[data-version="{saved - 1}"] .rollback')
    await page.wait_for_selector(f'#versions li[data-version="{saved + 1}"]')
    await settled(page)
    assert await text(page) == first
    assert stored_text(server, "fails", saved + 1) == first
    assert await page.is_disabled(f'#versions li[data-version="{saved + 1}"] .rollback')  # the current one


def test_a_viewer_edits_but_may_not_save_or_roll_back(server: str) -> None:
    with httpx2.Client(base_url=server) as client:
        text = client.get("/ui/api/editor/workflows/progress").json()["text"]
        for path, body in (("save", {"text": text}), ("rollback", {"version": 1})):
            answer = client.post(f"/ui/api/editor/workflows/progress/{path}", json=body,
                                 headers={"Origin": server})
            assert answer.status_code == 403 and answer.json()["error"]["code"] == "forbidden", answer.text
        # Reading, parsing and writing an edit into the text are open to viewers: nothing is kept.
        from ice_mcp.operations.documents import parse_document

        synced = client.post("/ui/api/editor/sync", json={"text": text, "blueprint": parse_document(text)},
                             headers={"Origin": server})
        assert synced.status_code == 200 and synced.json()["text"] == text


async def test_two_editors_are_told_of_each_others_save(browser: Any, server: str) -> None:
    pages = []
    for _ in range(2):
        context = await browser.new_context(viewport={"width": 1440, "height": 900})
        pages.append(await context.new_page())
    one, two = pages
    await open_editor(one, server, "inner")
    await open_editor(two, server, "inner")
    await one.click('[data-node="hi"] .node-head')
    await fill_field(one, "description", "from one")
    await save(one)
    await two.wait_for_selector("#other-save", timeout=10_000)
    # The second editor's own save, from the version it opened, is refused and says why.
    await two.click('[data-node="hi"] .node-head')
    await fill_field(two, "description", "from two")
    await two.click("#save")
    await two.wait_for_selector("#load-theirs")
    await two.wait_for_selector('#editor-note[data-kind="error"]')
    assert await two.get_attribute("#editor-status", "data-dirty") == "yes"
    for opened in pages:
        await opened.context.close()


async def test_run_from_the_editor_lands_in_the_run_view(page: Any, server: str) -> None:
    await open_editor(page, server, "greeting")
    await page.click("#run")
    await page.fill("#input-name", "Ada")
    await page.press("#input-name", "Tab")
    await page.click("#run-start")
    await page.wait_for_url("**/ui#/runs/*")
    await page.wait_for_selector('#run-status [data-status="succeeded"]', timeout=10_000)


# -- keyboard, undo ---------------------------------------------------------------------------------------------


async def test_keyboard_tab_arrows_and_delete(page: Any, server: str) -> None:
    await open_editor(page, server, "progress")
    await page.focus("#fit")
    for _ in range(20):  # Tab along the page until a node has the focus
        await page.keyboard.press("Tab")
        if await page.evaluate("document.activeElement.dataset.node || ''"):
            break
    assert await page.evaluate("document.activeElement.dataset.node") == "a"
    await page.keyboard.press("ArrowDown")
    assert await page.evaluate("document.activeElement.dataset.node") == "b"
    assert await page.get_attribute('[data-node="b"]', "class") and "selected" in await page.get_attribute('[data-node="b"]', "class")
    await page.keyboard.press("Delete")
    await page.wait_for_selector('[data-node="b"]', state="detached")
    await settled(page)
    assert [n["id"] for n in (await data(page))["nodes"]] == ["a", "c"]


async def test_undo_and_redo(page: Any, server: str) -> None:
    await open_editor(page, server, "progress")
    original = await text(page)
    await page.click('[data-node="c"] .node-head')
    await page.keyboard.press("Delete")
    await page.wait_for_selector('[data-node="c"]', state="detached")
    await settled(page)
    await page.keyboard.press("Control+z")
    await page.wait_for_selector('[data-node="c"]')
    await settled(page)
    assert await text(page) == original
    await page.keyboard.press("Control+Shift+z")
    await page.wait_for_selector('[data-node="c"]', state="detached")
    await settled(page)
    assert "c" not in [n["id"] for n in (await data(page))["nodes"]]


async def test_unsaved_changes_are_asked_about_before_leaving(page: Any, server: str) -> None:
    await open_editor(page, server, "progress")
    await page.click('[data-node="c"] .node-head')
    await page.keyboard.press("Delete")
    await settled(page)
    async with page.expect_event("dialog") as asked:
        await page.close(run_before_unload=True)
    dialog = await asked.value
    assert dialog.type == "beforeunload"
    await dialog.dismiss()


# -- byte for byte --------------------------------------------------------------------------------------------


async def test_every_bundled_blueprint_saved_unchanged_is_stored_byte_for_byte(page: Any, server: str) -> None:
    folder = bundled_dir("blueprints")
    files = sorted(p for p in folder.iterdir() if p.suffix in (".json", ".yaml", ".yml"))
    assert files
    for path in files:
        await open_editor(page, server, path.stem, admin=path is files[0])
        await save(page)
        version = await page.evaluate("window.__editor.state.version")
        assert stored_text(server, path.stem, version).encode() == path.read_bytes(), path.name


async def test_screenshot_of_the_editor_for_the_readme(page: Any, server: str, tmp_path: Path) -> None:
    """The README's picture: written to docs/editor.png with ICE_MCP_DOCS_SCREENSHOTS=1, else beside the test."""
    await open_editor(page, server, "sales_insights", admin=False)
    await page.click('[data-node="insights"] .node-head')
    await page.wait_for_selector("#side-form[data-node]")
    shot = DOCS / "editor.png" if os.environ.get("ICE_MCP_DOCS_SCREENSHOTS") == "1" else tmp_path / "editor.png"
    await page.screenshot(path=str(shot))
    assert shot.stat().st_size > 10_000
