"""Reading blueprints and manifests from paths, JSON/YAML text or dicts, with every schema problem kept."""

from __future__ import annotations

import json
import types
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Union, get_args, get_origin

import yaml
from pydantic import BaseModel, ValidationError
from yaml.composer import Composer
from yaml.constructor import SafeConstructor
from yaml.resolver import Resolver

from ice_mcp.blueprint.issues import ValidationIssue, ValidationReport, nearest
from ice_mcp.blueprint.limits import BlueprintLimits, size_issue
from ice_mcp.blueprint.models import NODE_TYPES, Blueprint, NetworkManifest
from ice_mcp.blueprint.node_sets import BUILTIN_NODES, NodeSet
from ice_mcp.errors import BlueprintInvalid, IceError

MAX_TEXT_BYTES = 1024 * 1024
MAX_YAML_BYTES = 64 * 1024  # YAML costs ~1 ms per KiB to load, even with libyaml
MAX_YAML_VALUES = 20_000  # what a YAML document may hold once its aliases are expanded
# Lists and mappings inside each other: under libyaml's own cap (1000 since PyYAML 6.0.4) and Python's recursion.
MAX_NESTING_DEPTH = 200
LIBRARY_NESTING_ERROR = "nesting depth"  # libyaml >= 0.2.6: "exceeded maximum nesting depth"


class _TooDeep(IceError):
    """A document nested deeper than MAX_NESTING_DEPTH; parse_text names the document in the error it raises."""

    code = "yaml_too_complex"


class _BoundedComposer(Composer):
    """PyYAML's composer (it recurses once per level), refusing documents nested deeper than MAX_NESTING_DEPTH."""

    _depth = 0

    @contextmanager
    def _level(self) -> Iterator[None]:
        self._depth += 1
        if self._depth > MAX_NESTING_DEPTH:
            raise _TooDeep(f"nested deeper than {MAX_NESTING_DEPTH} levels")
        try:
            yield
        finally:
            self._depth -= 1

    def compose_sequence_node(self, anchor: Any) -> yaml.SequenceNode:
        with self._level():
            return super().compose_sequence_node(anchor)

    def compose_mapping_node(self, anchor: Any) -> yaml.MappingNode:
        with self._level():
            return super().compose_mapping_node(anchor)


def _yaml_loader() -> Any:
    """libyaml's parser with PyYAML's composer: libyaml's own composer recurses in C and crashes on deep nesting."""
    if not yaml.__with_libyaml__:
        return type("Loader", (_BoundedComposer, yaml.SafeLoader), {})

    from yaml.cyaml import CParser  # type: ignore[attr-defined]

    class Loader(_BoundedComposer, CParser, SafeConstructor, Resolver):
        def __init__(self, stream: str) -> None:
            CParser.__init__(self, stream)
            _BoundedComposer.__init__(self)
            SafeConstructor.__init__(self)
            Resolver.__init__(self)

    return Loader


_YAML_LOADER = _yaml_loader()


@dataclass(slots=True)
class Unparsed:
    """A node whose spec failed schema validation: known by id so references to it still resolve."""

    id: str
    type: str
    dependencies: list[str]


@dataclass(slots=True)
class Parsed:
    """A blueprint parsed as far as it goes: the model if valid, else what could be read."""

    blueprint: Blueprint | None
    raw: dict[str, Any]
    nodes: list[Any] = field(default_factory=list)
    issues: list[ValidationIssue] = field(default_factory=list)


def read_document(source: str | Path | Mapping[str, Any]) -> dict[str, Any]:
    """A path, JSON or YAML text, or a mapping → a dict. Raises IceError(code="parse_error")."""
    if isinstance(source, Mapping):
        return dict(source)
    text: str
    if isinstance(source, Path) or (isinstance(source, str) and "\n" not in source and _looks_like_path(source)):
        path = Path(source)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise IceError(f"cannot read {path}: {exc.strerror}", code="parse_error") from None
    else:
        text = str(source)
    data = parse_text(text)
    if not isinstance(data, dict):
        raise IceError("a blueprint must be a JSON/YAML object", code="parse_error")
    return data


def parse_text(text: str, what: str = "blueprint", max_bytes: int = MAX_TEXT_BYTES) -> Any:
    """JSON or YAML text → a value, with bounded work: a size cap, a nesting cap, YAML aliases that cannot explode.

    Raises IceError with code `parse_error`, `document_too_large` or `yaml_too_complex`.
    """
    if len(text) > max_bytes or len(text.encode(errors="replace")) > max_bytes:
        raise IceError(f"the {what} is larger than {max_bytes} bytes", code="document_too_large")
    try:
        if text.lstrip().startswith("{"):
            try:
                value = json.loads(text)
            except json.JSONDecodeError:
                pass  # YAML flow style also starts with "{"
            else:
                _check_json_depth(value, text)
                return value
        if len(text) > MAX_YAML_BYTES or len(text.encode(errors="replace")) > MAX_YAML_BYTES:
            raise IceError(f"the {what} is larger than {MAX_YAML_BYTES} bytes of YAML (JSON may be larger)",
                           code="document_too_large")
        return _load_yaml(text, what)
    except yaml.YAMLError as exc:
        if LIBRARY_NESTING_ERROR in str(exc):
            raise _too_deep(what) from None
        raise IceError(f"the {what} is not valid JSON or YAML: {exc}", code="parse_error") from None
    except (_TooDeep, RecursionError):
        raise _too_deep(what) from None


def _too_deep(what: str) -> IceError:
    """Every nesting limit, ours or a parser's, as one error: ours is the lowest, so it is the one crossed."""
    return IceError(f"the {what} is nested deeper than {MAX_NESTING_DEPTH} levels of lists and mappings",
                    code="yaml_too_complex")


def _check_json_depth(value: Any, text: str) -> None:
    """Raise _TooDeep past MAX_NESTING_DEPTH; skips the walk when the text has too few brackets to get there."""
    if text.count("[") + text.count("{") <= MAX_NESTING_DEPTH:
        return
    level, depth = [value], 1
    while level:  # a level at a time: ~1 ms for a 1,000-node blueprint, a fifth of a walk with a stack
        if depth > MAX_NESTING_DEPTH:
            raise _TooDeep(f"nested deeper than {MAX_NESTING_DEPTH} levels")
        inner = []
        for container in level:
            for member in container.values() if type(container) is dict else container:
                if type(member) is dict or type(member) is list:
                    inner.append(member)
        level, depth = inner, depth + 1


def _load_yaml(text: str, what: str) -> Any:
    loader = _YAML_LOADER(text)
    try:
        root = loader.get_single_node()
        if root is None:
            return None
        _check_expansion(root, what)
        return loader.construct_document(root)
    finally:
        loader.dispose()


def _check_expansion(root: yaml.Node, what: str) -> None:
    """Refuse a node graph whose aliases expand past MAX_YAML_VALUES values, or refer to themselves."""
    sizes: dict[int, int] = {}
    expanding: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        children = _children(node)
        if children_done:
            expanding.discard(key)
            sizes[key] = 1 + sum(sizes[id(child)] for child in children)
            if sizes[key] > MAX_YAML_VALUES:
                raise IceError(f"the {what} expands to more than {MAX_YAML_VALUES} values "
                               "(YAML aliases repeat what they refer to)", code="yaml_too_complex")
        elif key in expanding:
            raise IceError(f"the {what} has a YAML alias inside what it refers to", code="yaml_too_complex")
        elif key not in sizes:
            expanding.add(key)
            stack.append((node, True))
            stack.extend((child, False) for child in children if id(child) not in sizes)


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def _looks_like_path(text: str) -> bool:
    if text.lstrip().startswith(("{", "[")):
        return False  # one line of JSON, however long, is a document: no file name starts so
    try:
        return text.endswith((".json", ".yaml", ".yml")) or Path(text).is_file()
    except (OSError, ValueError):  # longer than a file name may be, or a NUL inside
        return False


def parse_blueprint(source: Blueprint | str | Path | Mapping[str, Any],
                    limits: BlueprintLimits | None = None, nodes: NodeSet = BUILTIN_NODES) -> Parsed:
    """Parse without raising: every schema problem becomes an issue, valid nodes are kept. `nodes`: the node
    models a node may be (an orchestrator's: `core.executor.node_models` of its node types).

    A document over `limits` is refused with one `blueprint_too_large` issue before any model is built.
    """
    if isinstance(source, Blueprint):
        return Parsed(source, {}, list(source.nodes))  # a model is valid already: no raw document needed
    try:
        raw = read_document(source)
    except IceError as exc:
        return Parsed(None, {}, issues=[ValidationIssue(code=exc.code, message=exc.message)])
    too_large = size_issue(raw, limits or BlueprintLimits())
    if too_large is not None:
        return Parsed(None, {}, issues=[too_large])
    try:
        blueprint = nodes.blueprint.model_validate(raw)
        return Parsed(blueprint, raw, list(blueprint.nodes))
    except ValidationError as exc:
        parsed = Parsed(None, raw)
        parsed.issues = schema_issues(exc, raw, nodes.blueprint, nodes.names)
    raw_nodes = raw.get("nodes")
    if isinstance(raw_nodes, list):
        parsed.nodes = [_parse_node(node, nodes) for node in raw_nodes if isinstance(node, dict)]
    return parsed


def _parse_node(raw: dict[str, Any], nodes: NodeSet) -> Any:
    try:
        return nodes.node.validate_python(raw)
    except ValidationError:
        deps = raw.get("dependencies", [])
        deps = [deps] if isinstance(deps, str) else [d for d in deps if isinstance(d, str)] if isinstance(deps, list) else []
        return Unparsed(str(raw.get("id", "")), str(raw.get("type", "")), deps)


def schema_issues(exc: ValidationError, raw: Mapping[str, Any], model: type[BaseModel] = Blueprint,
                  node_types: tuple[str, ...] = NODE_TYPES) -> list[ValidationIssue]:
    """Pydantic errors as issues, each naming the node it is in (the innermost, for sub-graphs); an unknown field
    comes with the nearest known one of its place in `model`, an unknown node type with the nearest of `node_types`."""
    issues: list[ValidationIssue] = []
    seen: set[tuple[str | None, str | None, str]] = set()
    for error in exc.errors(include_url=False):
        loc = list(error["loc"])
        node_id, field = _locate(raw, loc, node_types)
        if error["type"] == "extra_forbidden" and loc:
            issue = _unknown_field(str(loc[-1]), _fields_at(model, loc[:-1]), node_id, field)
        elif error["type"] == "union_tag_invalid":
            tag = str(error.get("ctx", {}).get("tag", ""))
            issue = ValidationIssue(code="unknown_node_type", message=f"unknown node type {tag!r}",
                                    node_id=node_id, field="type", suggestion=nearest(tag, node_types))
        elif error["type"] == "union_tag_not_found":
            issue = ValidationIssue(code="schema", message="a node needs a `type`", node_id=node_id, field="type")
        else:
            where = field or ".".join(str(p) for p in loc) or "(root)"
            message = error["msg"].removeprefix("Value error, ")
            issue = ValidationIssue(code="schema", message=f"{where}: {message}", node_id=node_id, field=field)
        key = (issue.node_id, issue.field, issue.message)
        if key not in seen:
            seen.add(key)
            issues.append(issue)
    return issues


# Other tools' words for a field of ours (GitHub Actions' `needs`, network manifests' `after`, ...).
_DEPENDS = ("dependencies", "after")  # a node's, a network workflow's
FIELD_SYNONYMS: dict[str, tuple[str, ...]] = {
    "depends_on": _DEPENDS, "needs": _DEPENDS, "after": _DEPENDS, "deps": _DEPENDS, "requires": _DEPENDS,
    "dependencies": _DEPENDS, "args": ("tool_args",), "arguments": ("tool_args",), "tool": ("tool_name",),
    "timeout": ("timeout_seconds",), "retry": ("retries",)}


def _unknown_field(name: str, known: list[str], node_id: str | None, field: str | None) -> ValidationIssue:
    synonyms = [s for s in FIELD_SYNONYMS.get(name, ()) if s in known]
    suggestion = synonyms[0] if synonyms else nearest(name, known)
    message = f"unknown field {name!r}"
    if suggestion is None and known:
        message += f"; known fields here: {', '.join(known)}"
    return ValidationIssue(code="schema", message=message, node_id=node_id, field=field, suggestion=suggestion)


def _fields_at(model: type[BaseModel], loc: list[Any]) -> list[str]:
    """The field names (aliases where they have one) of the model found at `loc` inside `model`, or []."""
    annotation: Any = model
    for part in loc:
        annotation = _step(annotation, part)
        if annotation is None:
            return []
    found = _model_in(annotation)
    if found is None:
        return []
    return [info.alias or name for name, info in found.model_fields.items()]


def _step(annotation: Any, part: Any) -> Any:
    """One step of a pydantic error location through a type: a field, a list item, a dict value, a union's tag."""
    annotation = _plain(annotation)
    if get_origin(annotation) in (Union, types.UnionType):
        members = [_plain(m) for m in get_args(annotation) if m is not type(None)]
        for member in members:  # pydantic names a member by its tag (nodes.0.tool.x) or its class (InlineAgent)
            tag = member.model_fields.get("type") if _is_model(member) else None
            if (tag is not None and tag.default == part) or (_is_model(member) and member.__name__ == part):
                return member
        for member in members:
            found = _step(member, part)
            if found is not None:
                return found
        return None
    if _is_model(annotation) and isinstance(part, str):
        for name, info in annotation.model_fields.items():
            if part in (name, info.alias):
                return info.annotation
        return None
    if get_origin(annotation) in (list, tuple, set) and isinstance(part, int):
        return get_args(annotation)[0]
    if get_origin(annotation) is dict and isinstance(part, str):
        return get_args(annotation)[1]
    return None


def _model_in(annotation: Any) -> type[BaseModel] | None:
    annotation = _plain(annotation)
    if _is_model(annotation):
        return annotation
    if get_origin(annotation) in (Union, types.UnionType):
        models = [m for m in map(_plain, get_args(annotation)) if _is_model(m)]
        return models[0] if len(models) == 1 else None
    return None


def _plain(annotation: Any) -> Any:
    while get_origin(annotation) is Annotated:
        annotation = get_args(annotation)[0]
    return annotation


def _is_model(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def _locate(raw: Any, loc: list[Any], node_types: tuple[str, ...]) -> tuple[str | None, str | None]:
    """Walk a pydantic error location through the raw document: (innermost node id, field path)."""
    node_id: str | None = None
    field_start = 0
    current = raw
    i = 0
    while i < len(loc):
        part = loc[i]
        if isinstance(current, dict) and part in current:
            current = current[part]
        elif isinstance(current, list) and isinstance(part, int) and part < len(current):
            current = current[part]
            if isinstance(current, dict) and "id" in current and isinstance(current.get("type", ""), str):
                node_id, field_start = str(current["id"]), i + 1
                # pydantic puts the union tag after the index (nodes.0.tool.field): skip it
                if i + 1 < len(loc) and loc[i + 1] == current.get("type"):
                    i += 1
                    field_start = i + 1
        else:
            break
        i += 1
    rest = [str(p) for p in loc[field_start:] if not (node_id and p in node_types)]
    return node_id, ".".join(rest) or None


def load_blueprint(source: Blueprint | str | Path | Mapping[str, Any]) -> Blueprint:
    """A Blueprint model from a path, JSON/YAML text or a dict; raises BlueprintInvalid on schema errors."""
    parsed = parse_blueprint(source)
    if parsed.blueprint is None:
        raise BlueprintInvalid(ValidationReport(ok=False, errors=parsed.issues))
    return parsed.blueprint


def load_network(source: NetworkManifest | str | Path | Mapping[str, Any],
                 limits: BlueprintLimits | None = None) -> NetworkManifest:
    """A network manifest from a path, YAML/JSON text or a dict; raises BlueprintInvalid on schema errors."""
    if isinstance(source, NetworkManifest):
        return source
    try:
        raw = read_document(source)
    except IceError as exc:
        raise BlueprintInvalid(ValidationReport(ok=False, errors=[ValidationIssue(code=exc.code, message=exc.message)])) from None
    too_large = size_issue(raw, limits or BlueprintLimits(), "manifest")
    if too_large is not None:
        raise BlueprintInvalid(ValidationReport(ok=False, errors=[too_large]))
    try:
        return NetworkManifest.model_validate(raw)
    except ValidationError as exc:
        raise BlueprintInvalid(ValidationReport(ok=False, errors=schema_issues(exc, raw, NetworkManifest))) from None
