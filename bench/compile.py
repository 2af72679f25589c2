"""Compile cost per node of fresh 1,000-node chains, and `run(blueprint)` of a blueprint already compiled.

Shapes: constant tool arguments, plain paths inside text (`{{ inputs.x }}-{{ n0.value }}`), a plain
path with a constant suffix (`{{ inputs.x }}-7`), and expressions with filters (`{{ n0.value | default('x1') | upper }}`);
every template text is new to the process, so no compile cache helps.
Run: `PYTHONPATH=. .venv/bin/python bench/compile.py [--repeat N]`.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Callable
from typing import Any

from ice_mcp import Orchestrator, Registry, Settings
from ice_mcp.blueprint.models import Blueprint

N = 1_000


def echo(value: Any = None) -> dict[str, Any]:
    return {"value": value}


def chain(args: Callable[[int, str], Any], sample: int = 0) -> dict[str, Any]:
    """A chain whose templates read input `x<sample>`: no two samples share a template text."""
    x = f"x{sample}"
    nodes = [{"id": f"n{i}", "type": "tool", "tool_name": "echo", "tool_args": {"value": args(i, x)},
              **({"dependencies": [f"n{i - 1}"]} if i else {})} for i in range(N)]
    return {"name": "chain", "inputs": {"type": "object", "properties": {x: {"type": "string", "default": "x"}}},
            "nodes": nodes, "max_parallel": 64}


SHAPES: dict[str, Callable[[int, str], Any]] = {
    "constant arguments": lambda i, x: {"a": 1, "b": [1, 2, x]},
    "paths inside text": lambda i, x: f"{{{{ inputs.{x} }}}}-{{{{ n{i - 1}.value }}}}" if i else f"{{{{ inputs.{x} }}}}",
    "path + constant text": lambda i, x: f"{{{{ inputs.{x} }}}}-{i}",
    "filters": lambda i, x: (f"{{{{ n{i - 1}.value | default('{x}') | upper }}}}" if i
                             else f"{{{{ inputs.{x} | upper }}}}"),
}


def median_seconds(action: Callable[[Any], Any], subjects: list[Any]) -> float:
    """The median time of `action(subject)` over the subjects."""
    samples = []
    for subject in subjects:
        started = time.perf_counter()
        action(subject)
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


async def main(repeat: int) -> None:
    registry = Registry()
    registry.add_tool(echo)
    orc = Orchestrator(registry=registry, settings=Settings(persist_runs=False))
    print(f"{'1,000-node chain':<24} {'compile µs/node':>16} {'parse+compile µs/node':>22}")
    for label, args in SHAPES.items():
        # A fresh blueprint each time (a parsed model, unseen template texts): nothing reused between samples.
        models = [Blueprint.model_validate(chain(args, sample)) for sample in range(repeat + 1)]
        orc.compile(models[-1])
        cost = median_seconds(orc.compile, models[:-1])
        from_dict = median_seconds(orc.compile, [chain(args, 1000 + sample) for sample in range(repeat)])
        print(f"{label:<24} {cost / N * 1e6:>16.1f} {from_dict / N * 1e6:>22.1f}")
    blueprint = Blueprint.model_validate(chain(SHAPES["paths inside text"], 9999))
    record = await orc.run(blueprint, {"x9999": "a"})
    assert record.status == "succeeded", record.error
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        record = await orc.run(blueprint, {"x9999": "a"})
        samples.append(time.perf_counter() - started)
    print(f"run(blueprint) again, paths inside text: {statistics.median(samples) / N * 1e6:.1f} µs/node")
    await orc.aclose()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    asyncio.run(main(parser.parse_args().repeat))
