"""Hostile templates against a real server: each gets a clear error while /healthz keeps answering in 100 ms."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from live import healthz_watch, live_server
from mcp_helpers import http_client

from ice_mcp.core.templates import MAX_OUTPUT_CHARS, MAX_RENDER_SECONDS, MAX_WORK_CHARS

DEADLINE = f"template took longer than {int(MAX_RENDER_SECONDS * 1000)} ms"
# Building 8 MiB of centred text: the size cap stops it, or on a loaded machine the deadline comes first.
TOO_MUCH_TEXT = (f"template builds more than {MAX_WORK_CHARS} characters in all", DEADLINE)
POWER_TOWER = "{{ " + " ** ".join(["9"] * 200) + " }}"

# Each case of the issue, as a `tool_render_template` call: (template, data, the error's expected text, or its alternatives).
RENDER_CASES = {
    "power tower": (POWER_TOWER, {}, "nested too deeply"),
    "9**9**9 (too large for JSON)": ("{{ 9**9**9 }}", {}, "integer of 257 bits is too large for JSON"),
    "list of references": ("{{ [text] * 1000 }}", {"text": "a" * 100_000}, "repetition result too large"),
    "references in a literal": ("{{ [t, t, t, t, t, t, t, t, t, t, t, t] }}", {"t": "a" * 100_000},
                                f"result larger than {MAX_OUTPUT_CHARS} characters"),
    "concatenation doubling": ("{{ ((t ~ t) ~ (t ~ t)) ~ ((t ~ t) ~ (t ~ t)) }}", {"t": "a" * 300_000},
                               "concatenation would be longer than"),
    "center via map": ("{{ range(10000) | map('center', 9999) | join }}", {}, TOO_MUCH_TEXT),
    "tojson with a huge indent": ("{{ xs | tojson(indent=100000) }}", {"xs": [[1]]}, "argument larger than 10000"),
    "tojson indent past its cap": ("{{ xs | tojson(indent=9999) }}", {"xs": [[1]]}, "tojson indent must be"),
    "quadratic sum of lists": ("{{ rows | sum(start=[]) | length }}", {"rows": [[1] * 200] * 1000},
                               "sum longer than 100000 items"),
    # Refused at the call; on a loaded machine the render's deadline can come first (CI saw 52 ms).
    "100 MB center": ("{{ 'a' | center(100000000) }}", {}, ("argument larger than 10000", DEADLINE)),
    "sort of 100,000 items": ("{{ ((range(10000) | list) * 10) | sort | length }}", {}, DEADLINE),
    "text output of references": ("x{{ [text] * 100 }}", {"text": "a" * 100_000}, "repetition result too large"),
}


def write_hostile_blueprints(folder: Path) -> None:
    """Workflows whose tool_args templates are hostile given the right inputs (rendered on the event loop)."""
    folder.mkdir(parents=True, exist_ok=True)
    integer = {"type": "integer"}
    for name, template, properties in (
        ("dos_center", "{{ range(inputs.n) | map('center', inputs.width) | join }}", {"n": integer, "width": integer}),
        ("dos_sort", "{{ ((range(10000) | list) * inputs.times) | sort | length }}", {"times": integer}),
        ("dos_refs", "{{ [inputs.text] * inputs.n }}", {"text": {"type": "string"}, "n": integer}),
    ):
        blueprint = {
            "name": name,
            "description": "A tool node with a template that grows with its inputs.",
            "inputs": {"type": "object", "properties": properties, "required": sorted(properties)},
            "nodes": [{"id": "grow", "type": "tool", "tool_name": "echo", "tool_args": {"value": template}}],
        }
        (folder / f"{name}.json").write_text(json.dumps(blueprint))


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    workspace = tmp_path_factory.mktemp("template_dos")
    write_hostile_blueprints(workspace / "blueprints")
    with live_server(workspace, "--tools", "mcp_fixture_tools") as base_url:
        yield base_url


def error_text(result: Any) -> str:
    assert result.is_error is True, result
    return " ".join(getattr(block, "text", "") for block in result.content)


async def keep_in_flight(url: str, tool: str, arguments: dict[str, Any], seconds: float = 0.4) -> list[Any]:
    """The hostile call, again as soon as it ends, for `seconds`: the watcher's probes land while one runs."""
    results: list[Any] = []
    async with http_client(url) as client:
        started = time.perf_counter()
        while time.perf_counter() - started < seconds:
            results.append(await client.call_tool(tool, arguments))
    return results


@pytest.mark.parametrize(("template", "data", "expected"), RENDER_CASES.values(), ids=RENDER_CASES.keys())
async def test_render_template_tool_refuses_clearly_and_the_server_stays_responsive(
    url: str, template: str, data: dict[str, Any], expected: str | tuple[str, ...]
) -> None:
    with healthz_watch(url) as watch:
        results = await keep_in_flight(url, "tool_render_template", {"template": template, "data": data})
    for result in results:
        text = error_text(result)
        assert any(option in text for option in ((expected,) if isinstance(expected, str) else expected)), text
        assert "Traceback" not in text
    watch.assert_responsive()


WORKFLOW_CASES = {
    "center via map": ("workflow_dos_center", {"n": 10000, "width": 9999}, TOO_MUCH_TEXT),
    "sort of 100,000 items": ("workflow_dos_sort", {"times": 10}, DEADLINE),
    "list of references": ("workflow_dos_refs", {"text": "a" * 100_000, "n": 1000}, "repetition result too large"),
}


@pytest.mark.parametrize(("tool", "inputs", "expected"), WORKFLOW_CASES.values(), ids=WORKFLOW_CASES.keys())
async def test_workflow_with_a_hostile_tool_args_template_fails_clearly_and_the_server_stays_responsive(
    url: str, tool: str, inputs: dict[str, Any], expected: str | tuple[str, ...]
) -> None:
    with healthz_watch(url) as watch:
        results = await keep_in_flight(url, tool, inputs)
    for result in results:
        text = error_text(result)
        assert "template_error" in text
        assert any(option in text for option in ((expected,) if isinstance(expected, str) else expected)), text
        assert "Traceback" not in text
    watch.assert_responsive()


async def test_a_legitimate_template_still_renders(url: str) -> None:
    async with http_client(url) as client:
        result = await client.call_tool(
            "tool_render_template", {"template": "{{ rows | map(attribute='n') | sum }} rows", "data": {
                "rows": [{"n": 1}, {"n": 2}]}})
    assert result.is_error is False
    assert "3 rows" in result.content[0].text
