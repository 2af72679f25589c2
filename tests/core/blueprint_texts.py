"""Blueprint documents made from a seed: plain data, and YAML text written by hand-style rules (comments, blank
lines, quoting, flow and block collections, anchors, aliases and merge keys) or JSON text, for the round-trip tests."""

from __future__ import annotations

import json
import random
import string
from typing import Any

import yaml

WORDS = ["read", "total", "flag", "report", "fetch", "pick", "rows", "sum", "city", "week", "yes", "no", "null",
         "on", "1.5", "10", "a: b", "x # y", "{{ inputs.path }}", "[?a > `1`]", "it's", 'say "hi"', "café", "- dash",
         "@at", "tab\there", "", " padded ", "*star", "&amp", "%pct", "true", "~", "2024-01-01", "0x1F", "1e5"]
KEYS = ["path", "limit", "query", "mode", "title", "retries", "note", "when", "items", "deep", "on", "yes"]


def words(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 3))).strip() or "w"


def value(rng: random.Random, depth: int = 0) -> Any:
    pick = rng.random()
    if depth < 2 and pick < 0.15:
        return {rng.choice(KEYS) + str(i): value(rng, depth + 1) for i in range(rng.randint(0, 3))}
    if depth < 2 and pick < 0.27:
        return [value(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    if pick < 0.37:
        return rng.choice([True, False, None, rng.randint(-5, 10_000), round(rng.uniform(-100, 100), 3)])
    if pick < 0.45:
        return "\n".join(words(rng) for _ in range(rng.randint(2, 3))) + rng.choice(["", "\n"])
    return rng.choice(WORDS) if rng.random() < 0.5 else words(rng)


def blueprint(rng: random.Random, nodes: int | None = None) -> dict[str, Any]:
    count = rng.randint(1, 8) if nodes is None else nodes
    ids = [f"n{i}_{''.join(rng.choices(string.ascii_lowercase, k=3))}" for i in range(count)]
    made: list[dict[str, Any]] = []
    for i, node_id in enumerate(ids):
        node: dict[str, Any] = {"id": node_id, "type": rng.choice(["tool", "code", "llm"])}
        if node["type"] == "tool":
            node["tool_name"] = rng.choice(["csv_reader", "json_query", "render_template"])
            node["tool_args"] = {k: value(rng, 1) for k in rng.sample(KEYS, rng.randint(0, 3))}
        elif node["type"] == "code":
            node["code"] = "return " + str(rng.randint(0, 9))
        else:
            node["prompt"] = words(rng)
        if i and rng.random() < 0.5:
            node["dependencies"] = rng.sample(ids[:i], rng.randint(1, min(2, i)))
        for key in rng.sample(["retries", "timeout_seconds", "description"], rng.randint(0, 2)):
            node[key] = rng.randint(0, 5) if key != "description" else words(rng)
        made.append(node)
    doc: dict[str, Any] = {"schema_version": "1", "name": f"gen_{rng.randint(0, 10**6)}"}
    if rng.random() < 0.6:
        doc["description"] = words(rng)
    if rng.random() < 0.5:
        doc["inputs"] = {"type": "object", "properties": {k: {"type": "string"} for k in rng.sample(KEYS, 2)}}
    doc["nodes"] = made
    if rng.random() < 0.5:
        doc["outputs"] = {"result": "{{ " + ids[-1] + ".result }}"}
    return doc


def json_text(data: Any, rng: random.Random) -> str:
    indent = rng.choice([2, 4, None])
    return json.dumps(data, indent=indent, ensure_ascii=rng.random() < 0.3) + ("\n" if indent else "")


class YamlWriter:
    """Hand-style YAML: a comment above some keys and after some values, blank lines, each string in a quoting it
    may have, small mappings and lists in flow style, list items indented under their key or not."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.indented = rng.random() < 0.7
        self.lines: list[str] = []

    def text(self, data: dict[str, Any]) -> str:
        if self.rng.random() < 0.5:
            self.lines.append("# " + words(self.rng))
        self.mapping(data, 0, first_prefix=None)
        return "\n".join(self.lines) + "\n"

    def scalar(self, v: Any) -> str:
        if not isinstance(v, str):
            return json.dumps(v)  # true, false, null and numbers read the same in YAML
        choice = self.rng.random()
        if choice < 0.5 and v and "\n" not in v and _plain_ok(v):
            return v
        if choice < 0.75 and "\n" not in v and v.isprintable():
            return "'" + v.replace("'", "''") + "'"
        return json.dumps(v, ensure_ascii=False)

    def flowable(self, v: Any) -> bool:
        return (isinstance(v, (dict, list)) and not any(isinstance(x, (dict, list)) or (isinstance(x, str) and "\n" in x)
                                                        for x in (v.values() if isinstance(v, dict) else v)))

    def flow(self, v: Any) -> str:
        if isinstance(v, dict):
            return "{" + ", ".join(f"{k}: {self.flow_scalar(x)}" for k, x in v.items()) + "}"
        return "[" + ", ".join(self.flow_scalar(x) for x in v) + "]"

    def flow_scalar(self, v: Any) -> str:
        text = self.scalar(v)
        if isinstance(v, str) and text == v and any(c in v for c in ",[]{}"):
            return json.dumps(v, ensure_ascii=False)
        return text

    def mapping(self, data: dict[str, Any], indent: int, first_prefix: str | None) -> None:
        pad = " " * indent
        for i, (key, v) in enumerate(data.items()):
            lead = first_prefix if (i == 0 and first_prefix is not None) else pad
            if not (i == 0 and first_prefix is not None):
                if self.rng.random() < 0.1:
                    self.lines.append("")
                if self.rng.random() < 0.15:
                    self.lines.append(pad + "# about " + str(key))
            head = f"{lead}{key}:"
            self.value(head, v, indent)

    def value(self, head: str, v: Any, indent: int) -> None:
        comment = "  # " + words(self.rng).replace("\n", " ") if self.rng.random() < 0.12 else ""
        if isinstance(v, str) and "\n" in v and self.rng.random() < 0.7 and _literal_ok(v):
            chomp = "" if v.endswith("\n") else "-"
            self.lines.append(f"{head} |{chomp}{comment}")
            self.lines.extend(" " * (indent + 2) + line if line else "" for line in v.rstrip("\n").split("\n"))
        elif isinstance(v, (dict, list)) and (not v or (self.flowable(v) and self.rng.random() < 0.5)):
            self.lines.append(f"{head} {self.flow(v)}{comment}")
        elif isinstance(v, dict):
            self.lines.append(head + comment)
            self.mapping(v, indent + 2, None)
        elif isinstance(v, list):
            self.lines.append(head + comment)
            self.sequence(v, indent + 2 if self.indented else indent)
        else:
            self.lines.append(f"{head} {self.scalar(v)}{comment}")

    def sequence(self, items: list[Any], indent: int) -> None:
        pad = " " * indent
        for item in items:
            if self.rng.random() < 0.1:
                self.lines.append(pad + "# item")
            if isinstance(item, dict) and item and not (isinstance(next(iter(item.values())), str)
                                                        and "\n" in next(iter(item.values()))):
                self.mapping(item, indent + 2, first_prefix=pad + "- ")
            else:
                self.value(pad + "-", item, indent)


def _plain_ok(v: str) -> bool:
    try:
        return yaml.safe_load(f"k: {v}\n") == {"k": v} and yaml.safe_load(f"[{v}]") == [v]
    except yaml.YAMLError:
        return False


def _literal_ok(v: str) -> bool:
    lines = v.rstrip("\n").split("\n")
    return (not v.endswith("\n\n") and all(line == line.rstrip() and line.isprintable() for line in lines)
            and not lines[0].startswith(" ") and all(lines))


def yaml_text(data: dict[str, Any], rng: random.Random) -> str:
    """Hand-style YAML for `data`, with an anchor on one node's tool_args aliased (or merged) by a later node."""
    tools = [n for n in data["nodes"] if n.get("tool_args")]
    text = YamlWriter(rng).text(data)
    if len(tools) >= 2 and rng.random() < 0.6:
        first, later = tools[0], tools[-1]
        # anchor the first tool node's arguments; the later one repeats them (alias) or merges them and adds one key
        lines = text.split("\n")
        start = next(i for i, line in enumerate(lines) if "id:" in line and first["id"] in line)
        for i in range(start, len(lines)):
            if lines[i].lstrip().startswith("tool_args:"):
                lines[i] = lines[i].replace("tool_args:", "tool_args: &args", 1)
                break
        later_start = next(i for i, line in enumerate(lines) if "id:" in line and later["id"] in line)
        for i in range(later_start, len(lines)):
            if lines[i].lstrip().startswith("tool_args:"):
                column = len(lines[i]) - len(lines[i].lstrip())
                end = i + 1
                while end < len(lines) and (not lines[end].strip() or len(lines[end]) - len(lines[end].lstrip()) > column):
                    end += 1
                if rng.random() < 0.5:
                    lines[i:end] = [" " * column + "tool_args: *args"]
                else:
                    lines[i:end] = [" " * column + "tool_args:", " " * (column + 2) + "<<: *args",
                                    " " * (column + 2) + "merged_extra: 1"]
                break
        text = "\n".join(lines)
    return text
