"""Datasets from JSONL, CSV and lists: the cases read, and every bad line named in one invalid_dataset error."""

from __future__ import annotations

import pytest

from ice_mcp.errors import IceError
from ice_mcp.evals.dataset import load_dataset


def test_jsonl_cases_with_ids_or_their_position() -> None:
    text = ('{"inputs": {"n": 1}, "expected": {"label": "small"}}\n\n'
            '{"id": "big", "inputs": {"n": 20}, "expected": {"label": "big"}, "metadata": {"tag": "x"}}\n')
    data = load_dataset(text, name="d.jsonl")
    assert [c.id for c in data.cases] == ["1", "big"]
    assert data.cases[1].inputs == {"n": 20} and data.cases[1].metadata == {"tag": "x"} and data.cases[1].line == 3
    assert data.describe() == {"name": "d.jsonl", "cases": 2, "sha256": data.sha256} and len(data.sha256) == 64
    assert load_dataset(text).sha256 == data.sha256  # the digest is of the cases, not of the name


def test_every_bad_jsonl_line_is_named() -> None:
    text = "\n".join(['{"inputs": {"n": 1}}', "{nope", '{"input": {"n": 2}}', '[1]', '{"inputs": 3}',
                      '{"inputs": {}, "id": "1"}'])
    with pytest.raises(IceError) as caught:
        load_dataset(text, format="jsonl", name="bad.jsonl")
    assert caught.value.code == "invalid_dataset"
    assert caught.value.message.startswith("dataset bad.jsonl: line 2: not JSON")
    lines = [(e["line"], e["message"]) for e in caught.value.details["errors"]]
    assert [n for n, _ in lines] == [2, 3, 4, 5, 6]
    assert "unknown key 'input'" in lines[1][1] and "not list" in lines[2][1]
    assert "`inputs` must be a JSON object (a int)" in lines[3][1] and "id '1' again (first on line 1)" in lines[4][1]


def test_csv_columns_cells_as_json_or_text() -> None:
    text = ("id,inputs.n,inputs.opts.deep,label,expected.label,expected.score\n"
            'a,1,true,x,small,0.5\n'
            'b,"""007""",,y,big,\n')
    data = load_dataset(text, name="d.csv")
    first, second = data.cases
    assert first.id == "a" and first.inputs == {"n": 1, "opts": {"deep": True}, "label": "x"}
    assert first.expected == {"label": "small", "score": 0.5}
    assert second.inputs == {"n": "007", "label": "y"} and second.expected == {"label": "big"}  # empty: left out


def test_csv_problems() -> None:
    with pytest.raises(IceError) as caught:
        load_dataset("id,input.n\n1,2\n", format="csv")
    assert "column 'input.n'" in caught.value.message
    with pytest.raises(IceError) as caught:
        load_dataset("inputs.n\n1,2\n3\n", format="csv")
    assert caught.value.details["errors"] == [{"line": 2, "message": "2 cells for 1 columns"}]
    with pytest.raises(IceError, match="no cases"):
        load_dataset("inputs.n\n", format="csv")


def test_a_list_of_cases_and_the_format_guess() -> None:
    assert [c.id for c in load_dataset([{"inputs": {}}, {"inputs": {"a": 1}, "id": 7}]).cases] == ["1", "7"]
    with pytest.raises(IceError) as caught:
        load_dataset([{"inputs": {}}, "x"])
    assert caught.value.details["errors"][0]["line"] == 2
    assert load_dataset("inputs.a\n1\n").cases[0].inputs == {"a": 1}  # no `{`: CSV
