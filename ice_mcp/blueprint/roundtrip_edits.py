"""Writing a changed blueprint into its document text: the differences between the text's nodes and the new data,
each made a splice of the text (a scalar's characters, a key's lines, a list item's lines), the rest left as it was.

What is kept: key order (new keys go last in their mapping), comments and blank lines outside what changed, quoting
of a changed string ('single' and "double" stay so when they can), flow or block style of each collection, anchors
and aliases whose data did not change (an alias whose place now holds other data is written out in full there; an
anchor whose data changes changes in place, so its aliases follow where the new data says they should).
What is not kept exactly (each read back to the new data, so nothing is lost unnoticed):
- a value whose kind changes (a list becomes a mapping, a mapping a string) or whose mapping or list becomes
  empty is written afresh, in the document's indentation, without the comments that were inside it;
- a removed key or list item takes with it the comment lines just above it at its own indentation, its end-of-line
  comment and comment lines below it indented deeper (inside it); other comments stay where they were;
- a mapping with a merge key (`<<: *base`) whose merged keys would have to be removed, or a mapping with repeated
  keys, is written afresh;
- new text follows PyYAML's layout (two-space indentation, `- ` items indented under their key when the document
  does so; multi-line strings as `|` blocks); JSON is written by `json` with the document's indentation.
When the spliced text does not read back as the new data, a document without comments is written afresh and one
with comments is refused with IceError(code="edit_not_representable").
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from difflib import SequenceMatcher
from typing import Any

import yaml

from ice_mcp.blueprint.document_tree import Format, Node, build_tree, same
from ice_mcp.errors import IceError

_WIDE = 1 << 30  # no folding of long lines


class _Dumper(yaml.SafeDumper):
    """PyYAML's safe dumper writing multi-line strings as literal blocks."""


class _IndentedDumper(_Dumper):
    """... with list items indented under their key (`key:\\n  - a`), as most hand-written YAML does."""

    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        return super().increase_indent(flow, False)


def _represent_str(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    style = "|" if "\n" in data else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


_Dumper.add_representer(str, _represent_str)


@dataclass(slots=True)
class _Style:
    fmt: Format
    step: int  # YAML: a nested block mapping's indentation
    indented_seqs: bool  # YAML: `key:\n  - a` rather than `key:\n- a`
    json_indent: int | None
    ascii: bool  # JSON: non-ASCII written as \u escapes


@dataclass(slots=True)
class _Edit:
    start: int
    end: int
    text: str
    order: int


@dataclass(slots=True)
class _Where:
    """Where a node sits: the document's root, a mapping's value (with its key) or a list's item."""

    parent: Node | None = None
    key: Node | None = None


def splice(text: str, fmt: Format, root: Node | None, blueprint: Any) -> str:
    """`text` (read as `root`) with `blueprint` written into it; see the module's docstring."""
    if root is None or same(root.value, blueprint):
        return text
    splicer = _Splicer(text, _detect_style(text, fmt, root))
    try:
        splicer.node(root, blueprint, _Where())
        out = _apply(text, splicer.edits)
        back = build_tree(out, fmt)
        if back is not None and same(back.value, blueprint):
            return out
    except (IceError, _Overlap):
        pass
    if fmt == "json":
        return _json(blueprint, splicer.style) + ("\n" if text.endswith("\n") else "")
    if "#" not in text:  # no comments to lose
        return yaml.dump(blueprint, Dumper=_dumper(splicer.style), default_flow_style=False, sort_keys=False,
                         allow_unicode=True, width=_WIDE, indent=splicer.style.step)
    raise IceError("this change cannot be written into the document without losing its comments; "
                   "edit the text itself", code="edit_not_representable")


class _Overlap(IceError):
    """Two splices of the same characters: the edit is written afresh or refused (caught here, never raised on)."""

    def __init__(self) -> None:
        super().__init__("two splices of the same characters", code="edit_overlap")


def _apply(text: str, edits: list[_Edit]) -> str:
    out: list[str] = []
    pos = 0
    for edit in sorted(edits, key=lambda e: (e.start, e.end > e.start, e.order)):
        if edit.start < pos:
            raise _Overlap
        out.append(text[pos:edit.start])
        out.append(edit.text)
        pos = edit.end
    out.append(text[pos:])
    return "".join(out)


def _detect_style(text: str, fmt: Format, root: Node) -> _Style:
    step, indented = 2, True
    found_step = found_seq = False
    stack = [root]
    while stack and not (found_step and found_seq):
        node = stack.pop()
        if node.kind == "map" and not node.flow:
            for key, value in node.pairs():
                if value.alias_of is None and not value.flow and value.kind == "map" and value.keys and not found_step:
                    if value.keys[0].column > key.column:
                        step, found_step = value.keys[0].column - key.column, True
                if value.alias_of is None and not value.flow and value.kind == "seq" and value.items and not found_seq:
                    indented, found_seq = _line_indent(text, value.start) > key.column, True
        stack.extend(c for c in (*node.values, *node.items) if c.alias_of is None)
    json_indent = None
    if fmt == "json" and root.kind in ("map", "seq"):
        children = root.keys or root.items
        if children and children[0].line > root.line:
            json_indent = max(1, _line_indent(text, children[0].start) - _line_indent(text, root.start))
    ascii_only = fmt == "json" and "\\u" in text and text.isascii()
    return _Style(fmt, step if step in (2, 3, 4) else 2, indented, json_indent, ascii_only)


def _dumper(style: _Style) -> type[yaml.SafeDumper]:
    return _IndentedDumper if style.indented_seqs else _Dumper


def _json(value: Any, style: _Style, indent: int | None = None, compact: bool = False) -> str:
    if compact:
        return json.dumps(value, ensure_ascii=style.ascii, separators=(", ", ": "))
    return json.dumps(value, ensure_ascii=style.ascii, indent=style.json_indent if indent is None else indent)


def _line_start(text: str, pos: int) -> int:
    return text.rfind("\n", 0, pos) + 1


def _line_indent(text: str, pos: int) -> int:
    start = _line_start(text, pos)
    line = text[start:pos]
    return len(line) - len(line.lstrip(" "))


def _starts_line(text: str, pos: int) -> bool:
    return not text[_line_start(text, pos):pos].strip()


def _is_comment_line(line: str) -> bool:
    return line.lstrip(" \t").startswith("#")


class _Splicer:
    """Collects the splices that turn the text's data into the new data, walking both together."""

    def __init__(self, text: str, style: _Style) -> None:
        self.text = text
        self.style = style
        self.edits: list[_Edit] = []
        self.final: dict[int, Any] = {}  # an anchored node's data after the edit
        self.gone: set[int] = set()  # anchored nodes written over or removed: their aliases are written out
        self.targets: dict[int, set[int]] = {}  # a node's id -> the anchored nodes its aliases (and merges) name
        self.anchors: dict[int, int] = {}  # an anchored node's id -> where it starts
        self.changed: set[int] = set()  # anchored nodes gone or with other data: what names them is looked at

    def anchored_at(self, target: int) -> int:
        return self.anchors.get(target, -1)

    def add(self, start: int, end: int, text: str) -> None:
        self.edits.append(_Edit(start, end, text, len(self.edits)))

    def flow(self, where: _Where) -> bool:
        return self.style.fmt == "json" or (where.parent is not None and where.parent.flow)

    # -- one node --------------------------------------------------------------------------------------------

    def node(self, node: Node, new: Any, where: _Where) -> None:
        target = node.alias_of
        if target is not None:
            if id(target) not in self.gone and same(self.final.get(id(target), target.value), new):
                return
            self.replace(node, new, where)
            return
        if node.anchor:
            self.final[id(node)] = new
            if not same(node.value, new):
                self.changed.add(id(node))
        if same(node.value, new) and not (self.changed and self.aliases_in(node) & self.changed):
            return
        if node.kind == "map" and isinstance(new, dict) and new:
            self.mapping(node, new, where)
        elif node.kind == "seq" and isinstance(new, list) and new:
            self.sequence(node, new, where)
        elif node.kind == "scalar" and not isinstance(new, (dict, list)):
            self.scalar(node, new, where)
        else:
            self.replace(node, new, where)

    def aliases_in(self, node: Node) -> set[int]:
        found = self.targets.get(id(node))
        if found is None:
            found = {id(node.alias_of)} if node.alias_of is not None else set()
            if node.alias_of is not None:
                self.anchors[id(node.alias_of)] = node.alias_of.start
            if node.alias_of is None:
                for child in (*node.values, *node.items):
                    found |= self.aliases_in(child)
            self.targets[id(node)] = found
        return found

    def forget(self, node: Node) -> None:
        """Anchors inside a node that is written over or removed are gone."""
        stack = [node]
        while stack:
            current = stack.pop()
            if current.alias_of is not None:
                continue
            if current.anchor:
                self.gone.add(id(current))
                self.changed.add(id(current))
            stack.extend((*current.keys, *current.values, *current.items))

    def scalar(self, node: Node, new: Any, where: _Where) -> None:
        if self.style.fmt == "json":
            self.add(node.start, node.end, json.dumps(new, ensure_ascii=self.style.ascii))
        elif isinstance(new, str) and node.style == '"':
            self.add(node.start, node.end, _double_quoted(new))
        elif isinstance(new, str) and node.style == "'" and "\n" not in new and new.isprintable():
            self.add(node.start, node.end, "'" + new.replace("'", "''") + "'")
        else:
            self.replace(node, new, where)

    def replace(self, node: Node, new: Any, where: _Where) -> None:
        """Write `new` afresh where `node` is."""
        self.forget(node)
        text = self.text
        if self.style.fmt == "json":
            multiline = "\n" in text[node.start:node.end] or where.parent is None or "\n" in text[
                where.parent.start:where.parent.end]
            rendered = _json(new, self.style, compact=not multiline)
            self.add(node.start, node.end, _indent_after_first(rendered, _line_indent(text, node.start)))
        elif where.parent is None:
            rendered = yaml.dump(new, Dumper=_dumper(self.style), default_flow_style=False, sort_keys=False,
                                 allow_unicode=True, width=_WIDE, indent=self.style.step)
            self.add(node.start, node.end, rendered.rstrip("\n"))
        elif where.parent.flow or (node.alias_of is not None and node.alias_of.flow):
            self.add(node.start, node.end, _flow(new))  # an alias written out takes its anchor's flow style
        elif where.key is not None:
            suffix = self.block(new, where.key.column, pair=True)
            if node.line == where.key.line or not suffix.startswith("\n"):
                colon = text.index(":", where.key.end)
                if node.line == where.key.line and suffix.startswith(" "):
                    self.add(node.start, node.end, suffix[1:])
                else:
                    self.add(colon + 1, node.end, suffix)
            else:  # a block value on the lines under its key: what is between them (a comment) stays
                self.add(node.start, node.end, suffix.lstrip("\n").lstrip(" "))
        else:
            dash = text.rindex("-", 0, node.start)
            suffix = self.block(new, dash - _line_start(text, dash), pair=False)
            self.add(dash + 1, node.end, suffix)

    def block(self, value: Any, column: int, pair: bool) -> str:
        """`value` as YAML block text after `k:` (pair) or `-`, lines after the first indented from `column`."""
        rendered = self.lines({"k": value} if pair else [value], column)
        return rendered[column + (2 if pair else 1):]

    def lines(self, value: Any, column: int) -> str:
        dumped = yaml.dump(value, Dumper=_dumper(self.style), default_flow_style=False, sort_keys=False,
                           allow_unicode=True, width=_WIDE, indent=self.style.step)
        pad = " " * column
        return "\n".join(pad + line if line else line for line in dumped.rstrip("\n").split("\n"))

    # -- mappings --------------------------------------------------------------------------------------------

    def mapping(self, node: Node, new: dict[Any, Any], where: _Where) -> None:
        pairs = node.pairs()
        keys = [key.value for key, _ in pairs]
        merges = [value for key, value in pairs if _is_merge(key)]
        explicit = [k for (key, _), k in zip(pairs, keys, strict=True) if not _is_merge(key)]
        if any(isinstance(k, (dict, list)) for k in keys):
            self.replace(node, new, where)
            return
        live = {key.value: i for i, (key, _) in enumerate(pairs) if not _is_merge(key)}  # a repeated key: the last
        inherited = self.merged(merges)
        if inherited is None:
            self.replace(node, new, where)
            return
        kept: list[int] = []
        removed: list[int] = []
        for i, (key, _) in enumerate(pairs):
            if _is_merge(key) or (key.value in new and live[key.value] != i):
                kept.append(i)  # a merge, or a repeated key's earlier pair (read over by the last): as it was
            elif key.value in new:
                kept.append(i)
            elif key.value in inherited:
                self.replace(node, new, where)  # removing it would uncover the merged value
                return
            else:
                removed.append(i)
        if any(k not in new and k not in explicit for k in inherited) or not kept:
            self.replace(node, new, where)
            return
        added = [k for k in new if k not in explicit and not (k in inherited and same(inherited[k], new[k]))]
        for i in removed:
            self.forget(pairs[i][1])
        for i in kept:
            key, value = pairs[i]
            if not _is_merge(key) and live[key.value] == i:
                self.node(value, new[key.value], _Where(node, key))
        if node.flow or self.style.fmt == "json":
            starts = [key.start for key, _ in pairs]
            ends = [value.end for _, value in pairs]
            self.flow_remove(starts, ends, removed)
            self.flow_add(node, starts, ends, kept[-1], [self.flow_pair(node, k, new[k]) for k in added])
        else:
            self.block_remove_pairs(pairs, kept, removed)
            if added:
                last = pairs[kept[-1]][1]
                column = pairs[0][0].column
                self.block_insert(self.line_after(last.end, column), [self.lines({k: new[k]}, column) for k in added])

    def merged(self, merges: list[Node]) -> dict[Any, Any] | None:
        """What a mapping's merge keys give after the edit, or None when an anchor they name is gone."""
        result: dict[Any, Any] = {}
        for value in merges:
            sources = value.items if value.kind == "seq" and value.alias_of is None else [value]
            for source in reversed(sources):
                target = source.alias_of or source
                if id(target) in self.gone:
                    return None
                data = self.final.get(id(target), target.value)
                if isinstance(data, dict):
                    result.update(data)
        return result

    def flow_pair(self, node: Node, key: Any, value: Any) -> str:
        if self.style.fmt == "json":
            colon = ": "
            if node.keys:
                colon = self.text[node.keys[0].end:node.values[0].start]
            multiline = "\n" in self.text[node.start:node.end]
            rendered = _json(value, self.style, compact=not multiline)
            column = _line_indent(self.text, node.keys[0].start) if node.keys else 0
            return json.dumps(str(key), ensure_ascii=self.style.ascii) + colon + _indent_after_first(rendered, column)
        pair = _flow({key: value})
        return pair[1:-1]

    def block_remove_pairs(self, pairs: list[tuple[Node, Node]], kept: list[int], removed: list[int]) -> None:
        text = self.text
        covered: set[int] = set()
        first_key = pairs[0][0]
        if removed and removed[0] == 0 and not _starts_line(text, first_key.start):
            # the first key shares its line with a `- `: the next kept key moves up to its place
            nxt = kept[0]
            self.add(first_key.start, pairs[nxt][0].start, "")
            covered.update(i for i in removed if i < nxt)
        for i in removed:
            if i in covered:
                continue
            key, value = pairs[i]
            start = self.leading_comments(_line_start(text, key.start), key.column)
            self.add(start, self.line_after(value.end, key.column), "")

    # -- lists -----------------------------------------------------------------------------------------------

    def sequence(self, node: Node, new: list[Any], where: _Where) -> None:
        old = node.items
        old_keys, new_keys = [_ident(i.value) for i in old], [_ident(v) for v in new]
        matcher = SequenceMatcher(a=old_keys, b=new_keys, autojunk=False)
        # a replaced item is edited in place (a node renamed) unless its id is found on the other side (moved)
        stays = set(old_keys) ^ set(new_keys)
        kept: list[int] = []
        removed: list[int] = []
        inserts: list[tuple[int, int]] = []  # (the kept old item it follows, -1 before the first; new index)
        pairs: list[tuple[int, int]] = []
        for tag, i1, i2, j1, j2 in matcher.get_opcodes():
            if tag == "equal":
                pairs.extend(zip(range(i1, i2), range(j1, j2), strict=True))
            elif tag == "replace":
                same_kind = [(i, j) for i, j in zip(range(i1, i2), range(j1, j2), strict=False)
                             if old_keys[i] in stays and new_keys[j] in stays]
                pairs.extend(same_kind)
                removed.extend(i for i in range(i1, i2) if i not in {p[0] for p in same_kind})
                inserts.extend((i1, j) for j in range(j1, j2) if j not in {p[1] for p in same_kind})
            elif tag == "delete":
                removed.extend(range(i1, i2))
            else:
                inserts.extend((i1, j) for j in range(j1, j2))
        kept = sorted(i for i, _ in pairs)
        if not kept:
            self.replace(node, new, where)
            return
        moved = {_ident(old[i].value): i for i in removed if _ident(old[i].value)[0] == "id"}
        for i in removed:  # a moved item's anchors too: aliases elsewhere may now come before them
            self.forget(old[i])
        for i, j in pairs:
            self.node(old[i], new[j], _Where(node))
        chunks: list[tuple[int, str]] = []
        for before, j in inserts:
            after = max((k for k in kept if k < before), default=-1)
            source = moved.pop(_ident(new[j]), None)
            destination = old[after].end if after >= 0 else old[kept[0]].start
            chunks.append((after, self.moved_item(node, old[source], new[j], destination) if source is not None
                           else self.new_item(node, new[j])))
        if node.flow or self.style.fmt == "json":
            starts = [item.start for item in old]
            ends = [item.end for item in old]
            self.flow_remove(starts, ends, removed)
            for after, chunk in chunks:
                self.flow_add(node, starts, ends, after, [chunk])
        else:
            for i in removed:
                start, end = self.item_lines(old[i])
                self.add(start, end, "")
            for after, chunk in chunks:
                if after < 0:
                    self.block_insert(self.item_lines(old[kept[0]])[0], [chunk], before=True)
                else:
                    self.block_insert(self.item_lines(old[after])[1], [chunk])

    def new_item(self, node: Node, value: Any) -> str:
        if self.style.fmt == "json" or node.flow:
            multiline = "\n" in self.text[node.start:node.end]
            if self.style.fmt == "json":
                column = _line_indent(self.text, node.items[0].start)
                return _indent_after_first(_json(value, self.style, compact=not multiline), column)
            return _flow(value)
        dash = self.text.rindex("-", 0, node.items[0].start)
        return self.lines([value], dash - _line_start(self.text, dash))

    def moved_item(self, node: Node, item: Node, value: Any, destination: int) -> str:
        """A list item moved elsewhere: its own text (comments and all), with its changes written in; an alias in it
        naming an anchor that would come after it is written out."""
        later = {t for t in self.aliases_in(item)
                 if t not in self.gone and t not in self.changed and self.anchored_at(t) >= destination}
        outer, self.edits = self.edits, []
        self.gone |= later
        self.changed |= later
        try:
            self.node(item, value, _Where(node))
            inner = self.edits
        finally:
            self.edits = outer
            self.gone -= later
            self.changed -= later
        if node.flow or self.style.fmt == "json":
            start, end = item.start, item.end
        else:
            start, end = self.item_lines(item)
        shifted = [_Edit(e.start - start, e.end - start, e.text, e.order) for e in inner]
        chunk = _apply(self.text[start:end], shifted)
        return chunk if node.flow or self.style.fmt == "json" else chunk.removesuffix("\n")

    def item_lines(self, item: Node) -> tuple[int, int]:
        """A block list item's lines: its leading comment lines through its last line (and comments inside)."""
        dash = self.text.rindex("-", 0, item.start)
        if not _starts_line(self.text, dash):
            raise _Overlap  # `- - a`: items sharing a line are written afresh
        column = dash - _line_start(self.text, dash)
        return self.leading_comments(_line_start(self.text, dash), column), self.line_after(item.end, column)

    # -- shared by mappings and lists ------------------------------------------------------------------------

    def flow_remove(self, starts: list[int], ends: list[int], removed: list[int]) -> None:
        gone = set(removed)
        for i in removed:
            if any(k > i and k not in gone for k in range(len(starts))):
                self.add(starts[i], starts[i + 1], "")
            else:
                previous = max(k for k in range(i) if k not in gone) if i > 0 and any(
                    k not in gone for k in range(i)) else None
                self.add(ends[i - 1] if previous is not None else starts[i], ends[i], "")

    def flow_add(self, node: Node, starts: list[int], ends: list[int], after: int, chunks: list[str]) -> None:
        if not chunks:
            return
        sep = self.flow_separator(node, starts, ends)
        if after < 0:
            self.add(starts[0], starts[0], "".join(chunk + "," + sep for chunk in chunks))
        else:
            self.add(ends[after], ends[after], "".join("," + sep + chunk for chunk in chunks))

    def flow_separator(self, node: Node, starts: list[int], ends: list[int]) -> str:
        if len(starts) >= 2:
            between = self.text[ends[0]:starts[1]]
            return between[between.find(",") + 1:] if "," in between else " "
        opening = self.text.find("{" if node.kind == "map" else "[", node.start)
        between = self.text[opening + 1:starts[0]]
        return between if between.strip() == "" and between else " "

    def block_insert(self, position: int, chunks: list[str], before: bool = False) -> None:
        body = "\n".join(chunks) + "\n"
        if not before and position == len(self.text) and not self.text.endswith("\n"):
            body = "\n" + body  # the last line had no line break: it gets one, and so does the new last line
        self.add(position, position, body)

    def line_after(self, end: int, column: int) -> int:
        """Just past the line holding `end`, and past the comment lines below it indented deeper than `column`."""
        text = self.text
        newline = text.find("\n", end)
        pos = len(text) if newline < 0 else newline + 1
        while pos < len(text):
            newline = text.find("\n", pos)
            line = text[pos:len(text) if newline < 0 else newline]
            if not (_is_comment_line(line) and len(line) - len(line.lstrip(" ")) > column):
                break
            pos = len(text) if newline < 0 else newline + 1
        return pos

    def leading_comments(self, line_start: int, column: int) -> int:
        """The start of the comment lines just above a line, at its own indentation: they go with it."""
        text = self.text
        while line_start > 0:
            previous = _line_start(text, line_start - 1)
            line = text[previous:line_start - 1]
            if not (_is_comment_line(line) and len(line) - len(line.lstrip(" ")) == column):
                break
            line_start = previous
        return line_start


def _is_merge(key: Node) -> bool:
    return key.kind == "scalar" and key.style is None and key.value == "<<"


def _ident(value: Any) -> tuple[str, str]:
    """How list items are matched: a mapping by its `id`, anything else by its data."""
    if isinstance(value, dict) and isinstance(value.get("id"), str):
        return "id", value["id"]
    return "v", json.dumps(value, sort_keys=True, default=str)


def _flow(value: Any) -> str:
    """`value` in YAML flow style, on one line."""
    dumped = yaml.dump([value], Dumper=yaml.SafeDumper, default_flow_style=True, allow_unicode=True, width=_WIDE)
    return dumped.strip()[1:-1]


def _double_quoted(value: str) -> str:
    """A YAML double-quoted scalar (JSON's escapes are YAML's), non-printable characters escaped."""
    out = json.dumps(value, ensure_ascii=False)
    return "".join(c if c.isprintable() else f"\\u{ord(c):04x}" if ord(c) <= 0xFFFF else f"\\U{ord(c):08x}"
                   for c in out)


def _indent_after_first(rendered: str, column: int) -> str:
    pad = " " * column
    return rendered.replace("\n", "\n" + pad)
