"""Compile cost per node of fresh 1,000-node chains against LangGraph building and compiling the same chain,
and `run(blueprint)` of a blueprint already compiled.

Shapes: constant tool arguments, plain paths inside text (`{{ inputs.x }}-{{ n0.value }}`), a plain
path with a constant suffix (`{{ inputs.x }}-7`), and expressions with filters (`{{ n0.value | default('x1') | upper }}`);
every template text, and every path inside one, is new to the process (the sample is in the input's name and
in the node ids), so no compile cache helps. Columns: compiling a parsed `Blueprint`, parsing and compiling
the document (a dict), LangGraph's `StateGraph` built and compiled for the same 1,000-node chain (bench/engine.py's),
and the ratios (LangGraph ÷ ours). Samples alternate between ours and LangGraph's; medians.
Run: `PYTHONPATH=. .venv/bin/python bench/compile.py [--repeat N]`.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import statistics
import time
from collections.abc import Callable
from typing import Any

from engine import langgraph_chain  # bench/engine.py: the same LangGraph chain

from ice_mcp import Orchestrator, Registry, Settings
from ice_mcp.blueprint.models import Blueprint

N = 1_000


def echo(value: Any = None) -> dict[str, Any]:
    return {"value": value}


Arguments = Callable[[str | None, str, int], Any]  # (the previous node's id, the input's name, the index)


def chain(args: Arguments, sample: int = 0) -> dict[str, Any]:
    """A chain whose input `x<sample>` and node ids `s<sample>n<i>` carry the sample: no two samples share a
    template text, nor a path inside one."""
    x = f"x{sample}"
    ids = [f"s{sample}n{i}" for i in range(N)]
    nodes = [{"id": node_id, "type": "tool", "tool_name": "echo",
              "tool_args": {"value": args(ids[i - 1] if i else None, x, i)},
              **({"dependencies": [ids[i - 1]]} if i else {})} for i, node_id in enumerate(ids)]
    return {"name": "chain", "inputs": {"type": "object", "properties": {x: {"type": "string", "default": "x"}}},
            "nodes": nodes, "max_parallel": 64}


SHAPES: dict[str, Arguments] = {
    "constant arguments": lambda previous, x, i: {"a": 1, "b": [1, 2, x]},
    "paths inside text": lambda previous, x, i: (f"{{{{ inputs.{x} }}}}-{{{{ {previous}.value }}}}" if previous
                                                 else f"{{{{ inputs.{x} }}}}"),
    "path + constant text": lambda previous, x, i: f"{{{{ inputs.{x} }}}}-{i}",
    "filters": lambda previous, x, i: (f"{{{{ {previous}.value | default('{x}') | upper }}}}" if previous
                                       else f"{{{{ inputs.{x} | upper }}}}"),
}


def seconds(action: Callable[[], Any]) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


async def main(repeat: int) -> None:
    registry = Registry()
    registry.add_tool(echo)
    orc = Orchestrator(registry=registry, settings=Settings(persist_runs=False))
    langgraph_chain(N)  # its imports, outside the time
    print(f"{'1,000-node chain':<22} {'compile':>8} {'parse+compile':>14} {'LangGraph build+compile':>24} "
          f"{'ratio, compile':>15} {'ratio, parse+compile':>21}   (µs/node)")
    sample = 0
    for label, args in SHAPES.items():
        orc.compile(chain(args, sample := sample + 1))  # warm-up
        times: dict[str, list[float]] = {"model": [], "dict": [], "langgraph": []}
        for _ in range(repeat):
            # A fresh blueprint each time (a parsed model, or a document; unseen template texts): nothing reused.
            model = Blueprint.model_validate(chain(args, sample := sample + 1))
            document = chain(args, sample := sample + 1)
            times["model"].append(seconds(functools.partial(orc.compile, model)))
            times["dict"].append(seconds(functools.partial(orc.compile, document)))
            times["langgraph"].append(seconds(functools.partial(langgraph_chain, N)))
        model_us, dict_us, lang_us = (statistics.median(times[k]) / N * 1e6 for k in ("model", "dict", "langgraph"))
        print(f"{label:<22} {model_us:>8.1f} {dict_us:>14.1f} {lang_us:>24.1f} {lang_us / model_us:>14.1f}x "
              f"{lang_us / dict_us:>20.1f}x")
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
