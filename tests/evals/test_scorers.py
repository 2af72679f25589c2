"""Each scorer kind on passing, failing and edge cases, and bad configurations refused as invalid_scorer."""

from __future__ import annotations

from typing import Any

import pytest

from ice_mcp.errors import IceError
from ice_mcp.evals.dataset import Case
from ice_mcp.evals.scorers import Score, Verdict, make_scorer, make_scorers, scorer_from_text


async def score(config: dict[str, Any], outputs: dict[str, Any], expected: dict[str, Any] | None = None,
                judge: Any = None) -> Score:
    return await make_scorer(config).score(Case("c", {"q": "x"}, expected or {}), outputs, judge)


async def test_exact() -> None:
    assert (await score({"kind": "exact", "field": "a"}, {"a": 1}, {"a": 1.0})).passed  # JSON numbers
    failed = await score({"kind": "exact", "field": "a"}, {"a": True}, {"a": 1})
    assert not failed.passed and failed.reason == "a: true is not 1" and failed.score == 0.0  # true is not 1
    assert (await score({"kind": "exact", "field": "a", "ignore_case": True, "strip": True},
                        {"a": " Yes "}, {"a": "yes"})).passed
    assert (await score({"kind": "exact", "field": "r.0.k"}, {"r": [{"k": [1, 2]}]}, {"r": {"0": {"k": [1, 2]}}})).passed


async def test_exact_without_field_checks_every_expected_field() -> None:
    both = await score({"kind": "exact"}, {"a": 1, "b": "x", "c": 9}, {"a": 1, "b": "x"})
    assert both.passed and both.reason == "2 fields ok" and both.scorer == "exact"
    one_off = await score({"kind": "exact"}, {"a": 2}, {"a": 1, "b": "x"})
    assert not one_off.passed and one_off.reason == "a: 2 is not 1; b: no such output"
    nothing = await score({"kind": "exact"}, {"a": 2})
    assert nothing.passed and nothing.skipped and nothing.reason == "the case expects nothing"


async def test_a_case_without_the_expectation_is_skipped() -> None:
    skipped = await score({"kind": "exact", "field": "a"}, {"a": 1}, {"b": 1})
    assert skipped.passed and skipped.skipped and skipped.to_dict()["skipped"] is True


async def test_contains() -> None:
    assert (await score({"kind": "contains", "field": "t"}, {"t": "**Above threshold**: 3"}, {"t": "Above"})).passed
    both = await score({"kind": "contains", "field": "t", "value": ["north", "SOUTH"], "ignore_case": True},
                       {"t": "North and south"})
    assert both.passed
    lacks = await score({"kind": "contains", "field": "t", "value": ["north", "east"]}, {"t": "north"})
    assert not lacks.passed and lacks.reason == "t: north lacks east"
    assert (await score({"kind": "contains", "value": "\"k\": 3"}, {"k": 3})).passed  # the whole outputs as JSON


async def test_regex() -> None:
    assert (await score({"kind": "regex", "field": "t", "pattern": r"^\d{4}-W\d\d$"}, {"t": "2026-W46"})).passed
    assert not (await score({"kind": "regex", "field": "t", "pattern": "^x"}, {"t": "yx"})).passed
    assert (await score({"kind": "regex", "field": "t"}, {"t": "abc"}, {"t": "b+"})).passed  # the case's pattern
    bad = await score({"kind": "regex", "field": "t"}, {"t": "abc"}, {"t": "(a"})  # a case's bad pattern: a failure
    assert not bad.passed and "refused" in bad.reason


async def test_number() -> None:
    assert (await score({"kind": "number", "field": "n", "tolerance": 0.01}, {"n": "3108.004"}, {"n": 3108})).passed
    off = await score({"kind": "number", "field": "n", "tolerance": 0.01}, {"n": 3108.5}, {"n": 3108})
    assert not off.passed and off.reason == "n: 3108.5 is 0.5 from 3108 (allowed 0.01)"
    assert (await score({"kind": "number", "field": "n", "tolerance": 0.1, "relative": True}, {"n": 105}, {"n": 100})).passed
    assert (await score({"kind": "number", "field": "n"}, {"n": 0.1 + 0.2}, {"n": 0.3})).passed  # rounding only
    assert "is not a number" in (await score({"kind": "number", "field": "n"}, {"n": "many"}, {"n": 1})).reason
    assert "is not a number" in (await score({"kind": "number", "field": "n"}, {"n": True}, {"n": 1})).reason
    assert "expected value" in (await score({"kind": "number", "field": "n"}, {"n": 1}, {"n": "x"})).reason


async def test_json_schema() -> None:
    schema = {"type": "object", "properties": {"rows": {"type": "array", "minItems": 1}}, "required": ["rows"]}
    assert (await score({"kind": "json_schema", "schema": schema}, {"rows": [1]})).passed
    bad = await score({"kind": "json_schema", "schema": schema}, {"rows": []})
    assert not bad.passed and bad.reason.startswith("rows: [] should be non-empty")
    field = await score({"kind": "json_schema", "field": "rows", "schema": {"type": "array", "maxItems": 1}},
                        {"rows": [1, 2]})
    assert not field.passed and field.scorer == "json_schema:rows"


async def test_llm_judge_passes_at_its_threshold_and_records_the_judge_run() -> None:
    prompts: list[str] = []

    async def judge(prompt: str, model: str, provider: str | None) -> Verdict:
        prompts.append(prompt)
        return Verdict(0.7, "close enough", "run123", 0.0004)

    config = {"kind": "llm_judge", "rubric": "Names the best week.", "field": "answer", "threshold": 0.7}
    verdict = await score(config, {"answer": "W46"}, {"answer": "2026-W46"}, judge)
    assert verdict.passed and verdict.score == 0.7 and verdict.reason == "0.7 ≥ 0.7: close enough"
    assert verdict.to_dict() == {"scorer": "llm_judge:answer", "passed": True, "score": 0.7,
                                 "reason": "0.7 ≥ 0.7: close enough", "run_id": "run123", "cost_usd": 0.0004}
    assert prompts == ['Rubric:\nNames the best week.\n\nInputs:\n{"q": "x"}\n\nExpected:\n{"answer": "2026-W46"}'
                       '\n\nOutput:\nW46']
    strict = await score({**config, "threshold": 0.9}, {"answer": "W46"}, {}, judge)
    assert not strict.passed and strict.reason.startswith("0.7 < 0.9")


@pytest.mark.parametrize(("config", "found"), [
    ("exact", "an object with `kind`"),
    ({"field": "a"}, "unknown kind None"),
    ({"kind": "fuzzy"}, "unknown kind 'fuzzy'; kinds: exact, contains, regex, number, json_schema, llm_judge"),
    ({"kind": "exact", "feild": "a"}, "feild: Extra inputs are not permitted"),
    ({"kind": "number", "tolerance": -1}, "tolerance: Input should be greater than or equal to 0"),
    ({"kind": "regex", "pattern": "(?<=a)b"}, "regex '(?<=a)b' is refused (RE2 syntax)"),
    ({"kind": "json_schema", "schema": {"type": "thing"}}, "json_schema scorer:"),
    ({"kind": "json_schema"}, "schema: Field required"),
    ({"kind": "llm_judge", "rubric": ""}, "rubric: String should have at least 1 character"),
    ({"kind": "llm_judge", "rubric": "r", "threshold": 2}, "threshold: Input should be less than or equal to 1"),
])
def test_bad_scorers_are_invalid_scorer(config: Any, found: str) -> None:
    with pytest.raises(IceError) as caught:
        make_scorers([{"kind": "exact"}, config])
    assert caught.value.code == "invalid_scorer" and caught.value.details["index"] == 1
    assert caught.value.message.startswith("scorer 2") and found in caught.value.message, caught.value.message


def test_two_scorers_of_one_name_and_the_command_line_form() -> None:
    with pytest.raises(IceError, match="a second scorer named 'exact:a'"):
        make_scorers([{"kind": "exact", "field": "a"}, {"kind": "exact", "field": "a", "strip": True}])
    assert scorer_from_text("number:total:0.01") == {"kind": "number", "field": "total", "tolerance": 0.01}
    assert scorer_from_text("regex:verdict:^A:b") == {"kind": "regex", "field": "verdict", "pattern": "^A:b"}
    assert scorer_from_text("exact") == {"kind": "exact"}
    assert scorer_from_text('{"kind": "json_schema", "schema": {}}') == {"kind": "json_schema", "schema": {}}
    for bad in ("number:t:x", "exact:a:b", "{nope", "{}x"):
        with pytest.raises(IceError) as caught:
            scorer_from_text(bad)
        assert caught.value.code == "invalid_scorer"
