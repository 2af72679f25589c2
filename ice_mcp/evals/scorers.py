"""The scorers an evaluation judges a run's outputs with: a small typed registry, one class per `kind`.

A scorer is given as an object, `{"kind": "exact", "field": "answer"}`. `field` is a dotted path into the run's
outputs, compared with the same path in the case's `expected`; without `field`, exact, contains, regex and number
compare every field the case expects (json_schema and llm_judge read the whole outputs). A case that expects
nothing a scorer needs is `skipped` by it (and passes it). Bad configuration raises IceError(invalid_scorer).
"""

from __future__ import annotations

import json
import math
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Literal

import re2
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ice_mcp.blueprint.schemas import SchemaInvalid, compile_pattern, schema_validator
from ice_mcp.errors import IceError
from ice_mcp.evals.dataset import Case
from ice_mcp.evals.limits import SCORER_KINDS

MISSING = object()


@dataclass(frozen=True, slots=True)
class Score:
    """One scorer's verdict on one attempt: passed, a score in [0, 1], why; what a judge's own run cost."""

    scorer: str
    passed: bool
    score: float
    reason: str
    skipped: bool = False
    cost_usd: float = 0.0
    run_id: str | None = None  # the judge's run

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"scorer": self.scorer, "passed": self.passed, "score": round(self.score, 4),
                                "reason": self.reason}
        if self.skipped:
            data["skipped"] = True
        if self.run_id is not None:
            data["run_id"], data["cost_usd"] = self.run_id, self.cost_usd
        return data


@dataclass(frozen=True, slots=True)
class Verdict:
    """What an LLM judge answered: a score in [0, 1] and its reason, with its run and cost."""

    score: float
    reason: str
    run_id: str | None
    cost_usd: float


# What the evaluation gives an llm_judge scorer: (prompt, model, provider) -> the judge's verdict.
Judge = Callable[[str, str, str | None], Awaitable[Verdict]]


def lookup(data: Any, path: str) -> Any:
    """data["a"]["b"] for "a.b" (a list index where a part is a number); MISSING where there is none."""
    for part in path.split("."):
        if isinstance(data, Mapping) and part in data:
            data = data[part]
        elif isinstance(data, list) and part.isdigit() and int(part) < len(data):
            data = data[int(part)]
        else:
            return MISSING
    return data


def as_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)


def _short(value: Any, limit: int = 120) -> str:
    text = as_text(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


# -- the configurations (the boundary: pydantic) ------------------------------------------------------


class _Config(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str | None = Field(None, description="A label for this scorer in the results (default kind:field).")
    field: str | None = Field(None, min_length=1, description="A dotted path into the outputs (and `expected`).")


class ExactConfig(_Config):
    kind: Literal["exact"]
    ignore_case: bool = False
    strip: bool = False


class ContainsConfig(_Config):
    kind: Literal["contains"]
    value: str | list[str] | None = Field(None, description="What must be in it (default: the case's expected).")
    ignore_case: bool = False


class RegexConfig(_Config):
    kind: Literal["regex"]
    pattern: str | None = Field(None, description="An RE2 pattern searched for (default: the case's expected).")


class NumberConfig(_Config):
    kind: Literal["number"]
    tolerance: Annotated[float, Field(ge=0)] = 0.0
    relative: bool = Field(False, description="tolerance is a fraction of the expected value")


class JsonSchemaConfig(_Config):
    kind: Literal["json_schema"]
    schema_: dict[str, Any] = Field(alias="schema")


class LlmJudgeConfig(_Config):
    kind: Literal["llm_judge"]
    rubric: Annotated[str, Field(min_length=1, max_length=20_000)]
    threshold: Annotated[float, Field(ge=0, le=1)] = 0.7
    model: str = "default"
    provider: str | None = None


# -- the scorers ----------------------------------------------------------------------------------------


class Scorer(ABC):
    """A scorer made from its checked configuration; `score` judges one attempt's outputs."""

    kind: ClassVar[str]
    config_model: ClassVar[type[_Config]]

    def __init__(self, config: _Config) -> None:
        self.config = config
        self.label = config.name or (f"{self.kind}:{config.field}" if config.field else self.kind)

    def describe(self) -> dict[str, Any]:
        return self.config.model_dump(mode="json", by_alias=True, exclude_none=True)

    @abstractmethod
    async def score(self, case: Case, outputs: Mapping[str, Any], judge: Judge | None) -> Score: ...

    def _verdict(self, passed: bool, reason: str, score: float | None = None) -> Score:
        return Score(self.label, passed, (1.0 if passed else 0.0) if score is None else score, reason)

    def _skipped(self, reason: str) -> Score:
        return Score(self.label, True, 1.0, reason, skipped=True)


class FieldScorer(Scorer):
    """A scorer that compares output fields with expected ones, one field or each one the case expects."""

    literal_attribute: ClassVar[str | None] = None  # a config field that stands for the expectation

    def literal(self) -> Any:
        value = getattr(self.config, self.literal_attribute) if self.literal_attribute else None
        return MISSING if value is None else value

    async def score(self, case: Case, outputs: Mapping[str, Any], judge: Judge | None) -> Score:
        field = self.config.field
        literal = self.literal()
        if field is not None:
            paths = [field]
        elif literal is not MISSING:
            return self._verdict(*self.compare(outputs, literal))  # the whole outputs against the literal
        else:
            paths = sorted(case.expected)
            if not paths:
                return self._skipped("the case expects nothing")
        failures: list[str] = []
        for path in paths:
            expected = literal if literal is not MISSING else lookup(case.expected, path)
            if expected is MISSING:
                return self._skipped(f"the case has no expected.{path}")
            actual = lookup(outputs, path)
            if actual is MISSING:
                failures.append(f"{path}: no such output")
                continue
            passed, reason = self.compare(actual, expected)
            if not passed:
                failures.append(f"{path}: {reason}")
        if failures:
            return self._verdict(False, "; ".join(failures))
        return self._verdict(True, "ok" if len(paths) == 1 else f"{len(paths)} fields ok")

    @abstractmethod
    def compare(self, actual: Any, expected: Any) -> tuple[bool, str]: ...


class ExactScorer(FieldScorer):
    kind, config_model = "exact", ExactConfig

    def _norm(self, value: Any) -> Any:
        assert isinstance(self.config, ExactConfig)
        if isinstance(value, str):
            value = value.strip() if self.config.strip else value
            value = value.casefold() if self.config.ignore_case else value
        return value

    def compare(self, actual: Any, expected: Any) -> tuple[bool, str]:
        # JSON equality: 1 == 1.0, but true is not 1.
        same = _same_type_family(actual, expected) and self._norm(actual) == self._norm(expected)
        return same, "equal" if same else f"{_short(actual)} is not {_short(expected)}"


def _same_type_family(a: Any, b: Any) -> bool:
    return isinstance(a, bool) == isinstance(b, bool)


class ContainsScorer(FieldScorer):
    kind, config_model, literal_attribute = "contains", ContainsConfig, "value"

    def compare(self, actual: Any, expected: Any) -> tuple[bool, str]:
        assert isinstance(self.config, ContainsConfig)
        text = as_text(actual)
        needles = [as_text(item) for item in expected] if isinstance(expected, list) else [as_text(expected)]
        if self.config.ignore_case:
            text, needles = text.casefold(), [n.casefold() for n in needles]
        missing = [n for n in needles if n not in text]
        return not missing, f"{_short(text)} lacks {_short(missing[0])}" if missing else "contained"


class RegexScorer(FieldScorer):
    kind, config_model, literal_attribute = "regex", RegexConfig, "pattern"

    def __init__(self, config: _Config) -> None:
        super().__init__(config)
        assert isinstance(config, RegexConfig)
        self.compiled = _compiled(config.pattern) if config.pattern is not None else None

    def compare(self, actual: Any, expected: Any) -> tuple[bool, str]:
        try:
            pattern = self.compiled if self.compiled is not None else _compiled(str(expected))
        except IceError as exc:
            return False, exc.message
        found = pattern.search(as_text(actual)) is not None
        return found, "matches" if found else f"{_short(actual)} does not match /{_short(expected, 60)}/"


def _compiled(pattern: str) -> Any:
    try:
        return compile_pattern(pattern)
    except re2.error as exc:
        reason = exc.args[0] if exc.args else exc
        raise IceError(f"regex {pattern!r} is refused (RE2 syntax): {reason}", code="invalid_scorer") from None


class NumberScorer(FieldScorer):
    kind, config_model = "number", NumberConfig

    def compare(self, actual: Any, expected: Any) -> tuple[bool, str]:
        assert isinstance(self.config, NumberConfig)
        a, b = _number(actual), _number(expected)
        if b is None:
            return False, f"the expected value {_short(expected)} is not a number"
        if a is None:
            return False, f"{_short(actual)} is not a number"
        allowed = self.config.tolerance * (abs(b) if self.config.relative else 1.0)
        ok = abs(a - b) <= allowed + 1e-12 * max(abs(a), abs(b), 1.0)  # float rounding is not a difference
        return ok, f"{a:g} within {allowed:g} of {b:g}" if ok else f"{a:g} is {abs(a - b):g} from {b:g} (allowed {allowed:g})"


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            return None
        return number if math.isfinite(number) else None
    return None


class JsonSchemaScorer(Scorer):
    kind, config_model = "json_schema", JsonSchemaConfig

    def __init__(self, config: _Config) -> None:
        super().__init__(config)
        assert isinstance(config, JsonSchemaConfig)
        try:
            self.validator = schema_validator(config.schema_)
        except SchemaInvalid as exc:
            raise IceError(f"json_schema scorer: {exc.message}", code="invalid_scorer",
                           details={"schema_code": exc.code}) from None

    async def score(self, case: Case, outputs: Mapping[str, Any], judge: Judge | None) -> Score:
        field = self.config.field
        value = dict(outputs) if field is None else lookup(outputs, field)
        if value is MISSING:
            return self._verdict(False, f"{field}: no such output")
        problems = [f"{'/'.join(str(p) for p in e.absolute_path) or '(root)'}: {e.message}"
                    for e in sorted(self.validator.iter_errors(value), key=lambda e: list(e.absolute_path))]
        return self._verdict(not problems, "valid" if not problems else "; ".join(problems[:3]))


JUDGE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"score": {"type": "number", "minimum": 0, "maximum": 1},
                   "reason": {"type": "string"}},
    "required": ["score", "reason"],
    "additionalProperties": False,
}
JUDGE_SYSTEM = ("You grade the output of an automated workflow against a rubric. Answer only JSON: "
                '{"score": a number from 0 (fails the rubric) to 1 (fully meets it), "reason": one short sentence}.')


class LlmJudgeScorer(Scorer):
    kind, config_model = "llm_judge", LlmJudgeConfig

    def prompt(self, case: Case, output: Any) -> str:
        assert isinstance(self.config, LlmJudgeConfig)
        parts = [f"Rubric:\n{self.config.rubric}", f"Inputs:\n{as_text(case.inputs)}"]
        if case.expected:
            parts.append(f"Expected:\n{as_text(case.expected)}")
        parts.append(f"Output:\n{as_text(output)}")
        return "\n\n".join(parts)

    async def score(self, case: Case, outputs: Mapping[str, Any], judge: Judge | None) -> Score:
        assert isinstance(self.config, LlmJudgeConfig)
        if judge is None:
            raise IceError("llm_judge needs an LLM judge", code="unavailable")
        field = self.config.field
        output = dict(outputs) if field is None else lookup(outputs, field)
        if output is MISSING:
            return self._verdict(False, f"{field}: no such output")
        verdict = await judge(self.prompt(case, output), self.config.model, self.config.provider)
        passed = verdict.score >= self.config.threshold
        reason = f"{verdict.score:g} {'≥' if passed else '<'} {self.config.threshold:g}: {verdict.reason}"
        return Score(self.label, passed, verdict.score, reason, cost_usd=verdict.cost_usd, run_id=verdict.run_id)


SCORERS: dict[str, type[Scorer]] = {cls.kind: cls for cls in (
    ExactScorer, ContainsScorer, RegexScorer, NumberScorer, JsonSchemaScorer, LlmJudgeScorer)}
if tuple(SCORERS) != SCORER_KINDS:  # the tool table names them from limits.py
    raise RuntimeError(f"ice_mcp.evals.limits.SCORER_KINDS {SCORER_KINDS} differs from the scorers {tuple(SCORERS)}")


def make_scorer(config: Any, index: int = 0) -> Scorer:
    """A scorer from its object; raises IceError(invalid_scorer) naming the scorer and what is wrong."""
    if not isinstance(config, Mapping):
        raise IceError(f"scorer {index + 1}: an object with `kind`, not {type(config).__name__}",
                       code="invalid_scorer", details={"index": index})
    kind = config.get("kind")
    cls = SCORERS.get(str(kind)) if kind is not None else None
    if cls is None:
        raise IceError(f"scorer {index + 1}: unknown kind {kind!r}; kinds: {', '.join(SCORERS)}",
                       code="invalid_scorer", details={"index": index, "kinds": list(SCORERS)})
    try:
        checked = cls.config_model.model_validate(dict(config))
    except ValidationError as exc:
        problems = [f"{'.'.join(str(p) for p in e['loc']) or '(scorer)'}: {e['msg']}" for e in exc.errors()]
        raise IceError(f"scorer {index + 1} ({kind}): {problems[0]}", code="invalid_scorer",
                       details={"index": index, "errors": problems}) from None
    try:
        return cls(checked)
    except IceError as exc:
        raise IceError(f"scorer {index + 1} ({kind}): {exc.message}", code="invalid_scorer",
                       details={"index": index, **exc.details}) from None


def make_scorers(configs: Sequence[Any]) -> list[Scorer]:
    scorers = [make_scorer(config, i) for i, config in enumerate(configs)]
    labels = [s.label for s in scorers]
    for i, label in enumerate(labels):
        if label in labels[:i]:
            raise IceError(f"scorer {i + 1}: a second scorer named {label!r} (give one a `name`)",
                           code="invalid_scorer", details={"index": i})
    return scorers


def scorer_from_text(text: str) -> dict[str, Any]:
    """A command line's `--scorer`: a JSON object, or `KIND[:FIELD[:ARG]]` where ARG is number's tolerance,
    regex's pattern or contains' value (`number:total:0.01`, `regex:verdict:^Within`, `exact`)."""
    text = text.strip()
    if text.startswith("{"):
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            raise IceError(f"--scorer {text!r}: not JSON: {exc.msg}", code="invalid_scorer") from None
        if not isinstance(value, dict):
            raise IceError(f"--scorer {text!r}: a JSON object", code="invalid_scorer")
        return value
    kind, _, rest = text.partition(":")
    field, _, arg = rest.partition(":")
    config: dict[str, Any] = {"kind": kind}
    if field:
        config["field"] = field
    if arg:
        if kind == "number":
            try:
                config["tolerance"] = float(arg)
            except ValueError:
                raise IceError(f"--scorer {text!r}: the tolerance {arg!r} is not a number",
                               code="invalid_scorer") from None
        elif kind in ("regex", "contains"):
            config["pattern" if kind == "regex" else "value"] = arg
        elif kind == "llm_judge":
            config["rubric"] = arg
        else:
            raise IceError(f"--scorer {text!r}: {kind} takes no third part", code="invalid_scorer")
    return config
