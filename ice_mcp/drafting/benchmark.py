"""The drafting benchmark: each case's goal drafted by a model at an OpenAI-compatible endpoint (blueprint_draft's
loop), the draft run offline on the case's fixture and held to its checks; validity rate, pass rate, attempts and
prompt tokens per success. `run_drafting_benchmark` does it; `drafting_parser` is `ice-mcp eval drafting`."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ice_mcp.drafting.cases import Case, load_cases
from ice_mcp.drafting.grading import Effects, check, pinned_registry, run_graded, write_files
from ice_mcp.drafting.loop import DEFAULT_MAX_ATTEMPTS, DEFAULT_MAX_TOKENS, draft_blueprint
from ice_mcp.errors import IceError
from ice_mcp.llm.config import LLMConfig
from ice_mcp.llm.service import LLMService
from ice_mcp.orchestrator import Orchestrator
from ice_mcp.settings import Settings


@dataclass(slots=True)
class CaseResult:
    id: str
    kind: str
    valid: bool = False
    passed: bool = False
    attempts: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    seconds: float = 0.0
    failures: list[str] = field(default_factory=list)
    blueprint: dict[str, Any] | None = None


@dataclass(slots=True)
class BenchmarkReport:
    model: str
    base_url: str
    results: list[CaseResult]

    @property
    def summary(self) -> dict[str, Any]:
        total = len(self.results)
        valid = [r for r in self.results if r.valid]
        passed = [r for r in self.results if r.passed]
        prompt = sum(r.prompt_tokens for r in self.results)
        return {
            "model": self.model, "base_url": self.base_url, "cases": total,
            "valid": len(valid), "passed": len(passed),
            "validity_rate": round(len(valid) / total, 4) if total else 0.0,
            "pass_rate": round(len(passed) / total, 4) if total else 0.0,
            "attempts_per_valid_draft": round(sum(r.attempts for r in valid) / len(valid), 2) if valid else None,
            # Every case's prompt tokens (failures' too) over the cases that pass: what one success costs.
            "prompt_tokens_per_success": round(prompt / len(passed)) if passed else None,
            "prompt_tokens": prompt, "completion_tokens": sum(r.completion_tokens for r in self.results),
            "cost_usd": round(sum(r.cost_usd for r in self.results), 6),
        }

    def as_dict(self) -> dict[str, Any]:
        return {"summary": self.summary, "cases": [asdict(r) for r in self.results]}


def endpoint_service(base_url: str, model: str, api_key: str | None = None) -> LLMService:
    """An LLM service whose `default` (and `model`) is `model` at an OpenAI-compatible endpoint."""
    config = LLMConfig.load(env={"OPENAI_BASE_URL": base_url, "OPENAI_API_KEY": api_key or "none",
                                 "ICE_MCP_DEFAULT_MODEL": model})
    config.model_providers[model] = "openai"
    return LLMService(config)


async def run_case(case: Case, draft_llm: LLMService, grader_llm: LLMService, model: str, workdir: Path,
                   max_attempts: int = DEFAULT_MAX_ATTEMPTS, max_tokens: int = DEFAULT_MAX_TOKENS) -> CaseResult:
    """Draft one case's goal, run the draft on its fixture, check it."""
    result = CaseResult(case.id, case.kind)
    started = time.perf_counter()
    workspace = workdir / case.id
    write_files(case, workspace)
    effects = Effects()
    orc = Orchestrator(registry=pinned_registry(case, effects), llm=grader_llm,
                       settings=Settings(workspace=workspace, data_dir=workdir / ".data" / case.id,
                                         persist_runs=False, name_workspace=False))
    try:
        try:
            drafted = await draft_blueprint(orc, case.goal, {"max_attempts": max_attempts, "model": model,
                                                          "max_tokens": max_tokens},
                                            llm=draft_llm)
        except IceError as exc:
            attempts = exc.details.get("attempts") or []
            result.attempts = len(attempts)
            result.prompt_tokens = sum(a["input_tokens"] for a in attempts)
            result.completion_tokens = sum(a["output_tokens"] for a in attempts)
            result.cost_usd = sum(a["cost_usd"] for a in attempts)
            result.failures = [f"{exc.code}: {exc.message}"]
            return result
        result.valid, result.blueprint = True, drafted.blueprint
        result.attempts = len(drafted.attempts)
        result.prompt_tokens = sum(a.input_tokens for a in drafted.attempts)
        result.completion_tokens = sum(a.output_tokens for a in drafted.attempts)
        result.cost_usd = sum(a.cost_usd for a in drafted.attempts)
        try:
            record = await run_graded(orc, drafted.blueprint, case, effects)
        except IceError as exc:
            result.failures = [f"run refused: {exc.code}: {exc.message}"]
            return result
        result.failures = check(record, effects, case.checks, workspace)
        result.passed = not result.failures
        return result
    finally:
        result.seconds = round(time.perf_counter() - started, 3)
        await orc.aclose()


async def run_drafting_benchmark(
    base_url: str, model: str, *, api_key: str | None = None, cases: list[Case] | None = None,
    grader_base_url: str | None = None, grader_model: str | None = None, grader_api_key: str | None = None,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS, max_tokens: int = DEFAULT_MAX_TOKENS, workdir: Path | None = None,
    on_case: Callable[[CaseResult], None] | None = None,
) -> BenchmarkReport:
    """Measure `model` at `base_url` on `cases` (default: the shipped ones). The drafted workflows' `llm` nodes
    call the grader (default: the same endpoint and model), their tools answer from each case's fixture."""
    cases = load_cases() if cases is None else cases
    draft_llm = endpoint_service(base_url, model, api_key)
    grader = endpoint_service(grader_base_url or base_url, grader_model or model,
                              grader_api_key if grader_base_url else api_key)
    results: list[CaseResult] = []
    with tempfile.TemporaryDirectory(prefix="ice-mcp-drafting-") as scratch:
        folder = workdir or Path(scratch)
        try:
            for case in cases:
                result = await run_case(case, draft_llm, grader, model, folder, max_attempts, max_tokens)
                results.append(result)
                if on_case is not None:
                    on_case(result)
        finally:
            await draft_llm.aclose()
            await grader.aclose()
    return BenchmarkReport(model, base_url, results)


# -- the command line ----------------------------------------------------------------------------------------


def add_drafting_arguments(parser: argparse.ArgumentParser) -> None:
    """`eval drafting`'s options (the `eval` command that holds them may hold other targets too)."""
    parser.add_argument("--base-url", default=os.environ.get("OPENAI_BASE_URL"),
                        help="the OpenAI-compatible endpoint of the model to measure (default $OPENAI_BASE_URL)")
    parser.add_argument("--model", help="the model's name at that endpoint")
    parser.add_argument("--api-key", default=os.environ.get("OPENAI_API_KEY"),
                        help="its key (default $OPENAI_API_KEY; a local server needs none)")
    parser.add_argument("--cases", type=Path, help="a folder of case files (default: the shipped evals/drafting/cases)")
    parser.add_argument("--only", action="append", default=[], metavar="ID_OR_KIND",
                        help="only these cases, by id or kind (repeatable)")
    parser.add_argument("--max-attempts", type=int, default=DEFAULT_MAX_ATTEMPTS,
                        help=f"drafts per case at most (default {DEFAULT_MAX_ATTEMPTS})")
    parser.add_argument("--max-tokens", type=int, default=DEFAULT_MAX_TOKENS,
                        help=f"most tokens of one draft (default {DEFAULT_MAX_TOKENS})")
    parser.add_argument("--grader-base-url", help="where the drafted workflows' llm nodes go (default: --base-url)")
    parser.add_argument("--grader-model", help="their model (default: --model)")
    parser.add_argument("--workdir", type=Path, help="keep each case's workspace here (default: a temporary folder)")
    parser.add_argument("--json", action="store_true", help="print the whole report as JSON")


def run_drafting_cli(args: argparse.Namespace) -> int:
    """`ice-mcp eval drafting ...`: a line per case as it ends, then the figures. Exit 0 when it ran."""
    if not args.base_url or not args.model:
        print("error: give --base-url (or OPENAI_BASE_URL) and --model", file=sys.stderr)
        return 2
    cases = load_cases(args.cases, args.only or None)
    show = not args.json
    if show:
        print(f"drafting benchmark: {args.model} at {args.base_url}, {len(cases)} case(s)")

    def line(result: CaseResult) -> None:
        if show:
            mark = "PASS" if result.passed else ("valid" if result.valid else "INVALID")
            why = f"  {result.failures[0][:100]}" if result.failures else ""
            print(f"  {result.id:<28} {result.kind:<16} {mark:<7} attempts {result.attempts} "
                  f"prompt {result.prompt_tokens:>6} tok {result.seconds:>6.1f} s{why}", flush=True)

    report = asyncio.run(run_drafting_benchmark(
        args.base_url, args.model, api_key=args.api_key, cases=cases, grader_base_url=args.grader_base_url,
        grader_model=args.grader_model, max_attempts=args.max_attempts, max_tokens=args.max_tokens, workdir=args.workdir, on_case=line))
    summary = report.summary
    if args.json:
        print(json.dumps(report.as_dict(), indent=2, default=str))
    else:
        print(f"validity {summary['valid']}/{summary['cases']} ({summary['validity_rate']:.0%}), "
              f"pass {summary['passed']}/{summary['cases']} ({summary['pass_rate']:.0%}), "
              f"attempts per valid draft {summary['attempts_per_valid_draft']}, "
              f"prompt tokens per success {summary['prompt_tokens_per_success']}")
    return 0


def drafting_parser() -> argparse.ArgumentParser:
    """`ice-mcp eval drafting`'s own parser (`ice-mcp eval TARGET` evaluates a workflow on a dataset)."""
    parser = argparse.ArgumentParser(
        prog="ice-mcp eval drafting",
        description="The drafting benchmark: each shipped goal in words drafted into a workflow by the model at "
                    "an OpenAI-compatible endpoint, run offline on its fixture and graded.")
    add_drafting_arguments(parser)
    parser.set_defaults(handler=run_drafting_cli)
    return parser
