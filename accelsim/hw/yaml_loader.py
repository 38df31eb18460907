"""YAML text -> plain Python data, with yaml.safe_load's semantics and bounds on everything else.

A safe loader (libyaml's parser where available, PyYAML's composer and SafeConstructor, so no python/*
tags) that also refuses what safe_load lets through: a key given twice in one mapping
(safe_load keeps the last, silently), more than MAX_NODES nodes once aliases are expanded (a
"billion laughs" bomb is a few hundred bytes that expand to gigabytes when anything walks the result),
nesting deeper than MAX_DEPTH (the composer recurses and dies with RecursionError), recursive aliases,
scalars longer than MAX_SCALAR_CHARS, and scalars whose conversion fails outside YAML's own errors
(`2001-13-45` as a date, a 5000-digit integer). Every refusal is a yaml.MarkedYAMLError naming the line.
"""
from __future__ import annotations

from typing import Any

import yaml
from yaml.composer import Composer, ComposerError
from yaml.constructor import ConstructorError, SafeConstructor
from yaml.events import AliasEvent
from yaml.nodes import MappingNode, Node, ScalarNode
from yaml.resolver import Resolver
from yaml.scanner import ScannerError

try:
    from yaml._yaml import CParser  # libyaml's scanner and parser
except ImportError:  # PyYAML built without libyaml
    CParser = None

# A hardware description has a few hundred nodes (the largest shipped one, bespoke_superres, 395).
# 20k is 50x that, refuses an alias bomb after at most 20k steps, and bounds the time spent on a
# 1 MiB file of small values (about 0.2 s with libyaml, 1 s with pure-Python PyYAML on an idle core).
MAX_NODES = 20_000
# Real descriptions nest about 8 levels (chips[0].units[3].when.kernel[0]); 64 is ample and keeps the
# recursive composer and every later recursive walk far from Python's recursion limit.
MAX_DEPTH = 64
# The longest shipped scalar is a description of ~400 characters.
MAX_SCALAR_CHARS = 10_000
_MERGE_TAG = "tag:yaml.org,2002:merge"


class _Bounds:
    """The bounds, as overrides of the composer, constructor and (pure-Python) scanner of a loader."""

    def _init_bounds(self) -> None:
        self._nodes = 0  # nodes composed so far, counting every alias as the whole subtree it stands for
        self._depth = 0
        self._deepest = 0  # deepest level reached inside the node being composed, aliases expanded
        self._subtree: dict[str, tuple[int, int]] = {}  # anchor -> (expanded nodes, height)

    # ---- scanning: nesting is refused before the scanner's look-ahead makes it slow -------------------
    # The scanner looks up to 1024 characters ahead for a possible key at every open bracket, at a cost
    # that grows with the number of open brackets; 300k `[` would take seconds to reach the composer's
    # depth check, so the scanner counts them itself.

    def fetch_flow_collection_start(self, TokenClass: type) -> None:
        if self.flow_level >= MAX_DEPTH:
            raise ScannerError(None, None, f"brackets nested more than {MAX_DEPTH} levels deep; a hardware "
                               f"description needs about 8", self.get_mark())
        super().fetch_flow_collection_start(TokenClass)

    def add_indent(self, column: int) -> bool:
        if len(self.indents) >= MAX_DEPTH:
            raise ScannerError(None, None, f"indented blocks nested more than {MAX_DEPTH} levels deep; a "
                               f"hardware description needs about 8", self.get_mark())
        return super().add_indent(column)

    # ---- composing: size and depth -----------------------------------------------------------------

    def _count(self, n: int, mark: yaml.Mark) -> None:
        self._nodes += n
        if self._nodes > MAX_NODES:
            raise ComposerError(None, None, f"more than {MAX_NODES} values once aliases (*name) are expanded; "
                                f"a hardware description needs a few hundred (an alias bomb?)", mark)

    def _reach(self, depth: int, mark: yaml.Mark) -> None:
        if depth > MAX_DEPTH:
            raise ComposerError(None, None, f"nested more than {MAX_DEPTH} levels deep (counting what aliases "
                                f"stand for); a hardware description needs about 8", mark)
        self._deepest = max(self._deepest, depth)

    def compose_node(self, parent: Node | None, index: Any) -> Node:
        event = self.peek_event()
        if isinstance(event, AliasEvent):
            if event.anchor in self.anchors and event.anchor not in self._subtree:
                raise ComposerError(None, None, f"alias *{event.anchor} refers to a value that contains it "
                                    f"(a recursive structure)", event.start_mark)
            node = super().compose_node(parent, index)  # raises on an undefined alias
            size, height = self._subtree[event.anchor]
            self._count(size, event.start_mark)
            self._reach(self._depth + 1 + height, event.start_mark)
            return node
        self._depth += 1
        self._reach(self._depth, event.start_mark)
        before, outer_deepest = self._nodes, self._deepest
        self._deepest = self._depth
        self._count(1, event.start_mark)
        node = super().compose_node(parent, index)
        if event.anchor is not None:
            self._subtree[event.anchor] = (self._nodes - before, self._deepest - self._depth)
        self._deepest = max(outer_deepest, self._deepest)
        self._depth -= 1
        return node

    def compose_scalar_node(self, anchor: str | None) -> ScalarNode:
        event = self.peek_event()
        if len(event.value) > MAX_SCALAR_CHARS:
            raise ComposerError(None, None, f"a value of {len(event.value)} characters (at most "
                                f"{MAX_SCALAR_CHARS})", event.start_mark)
        return super().compose_scalar_node(anchor)

    def compose_document(self) -> Node:
        node = super().compose_document()
        self._subtree = {}  # anchors are per document, as in the base composer
        return node

    # ---- constructing: duplicate keys and conversion failures ---------------------------------------

    def construct_mapping(self, node: Node, deep: bool = False) -> dict[Any, Any]:
        if isinstance(node, MappingNode):
            first_line: dict[Any, int] = {}
            for key_node, _ in node.value:
                if key_node.tag == _MERGE_TAG:
                    continue  # `<<: *defaults` merges; its keys may be overridden, as YAML intends
                if not isinstance(key_node, ScalarNode):
                    raise ConstructorError("while reading a mapping", node.start_mark,
                                           "a key must be a plain name, not a list or mapping",
                                           key_node.start_mark)
                key = self.construct_object(key_node)
                line = key_node.start_mark.line + 1
                if key in first_line:
                    raise ConstructorError(None, None, f"duplicate key {_short(key)} (first at line "
                                           f"{first_line[key]}, again at line {line}); a key may appear "
                                           f"once per mapping", key_node.start_mark)
                first_line[key] = line
        return super().construct_mapping(node, deep=deep)

    def construct_object(self, node: Node, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep=deep)
        except (ValueError, OverflowError, TypeError) as e:
            value = node.value if isinstance(node, ScalarNode) else node.id
            raise ConstructorError(None, None, f"cannot read {_short(value)} as {node.tag.rsplit(':', 1)[-1]}: "
                                   f"{_short(str(e))}", node.start_mark) from None


class PyBoundedSafeLoader(_Bounds, yaml.SafeLoader):
    """The bounded loader on PyYAML's pure-Python scanner and parser (used where libyaml is missing)."""

    def __init__(self, stream: str) -> None:
        yaml.SafeLoader.__init__(self, stream)
        self._init_bounds()


if CParser is not None:
    class CBoundedSafeLoader(_Bounds, Composer, CParser, SafeConstructor, Resolver):
        """The bounded loader on libyaml's event stream (about 5x faster than pure Python): composing stays
        in Python, where the bounds are, so only the scanner and parser are libyaml's."""

        def __init__(self, stream: str) -> None:
            CParser.__init__(self, stream)
            SafeConstructor.__init__(self)
            Resolver.__init__(self)
            Composer.__init__(self)
            self._init_bounds()

    BoundedSafeLoader: type = CBoundedSafeLoader
else:
    BoundedSafeLoader = PyBoundedSafeLoader


def reader_error_line(e: yaml.reader.ReaderError, text: str, loader_class: type | None = None) -> int:
    """The 1-based line of a ReaderError (a forbidden character), which carries only an offset: in UTF-8
    bytes from libyaml, in characters from the pure-Python reader."""
    offset = max(e.position, 0)
    if (loader_class or BoundedSafeLoader) is not PyBoundedSafeLoader:
        return text.encode()[:offset].count(b"\n") + 1
    return text.count("\n", 0, offset) + 1


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def load_yaml(text: str, loader_class: type | None = None) -> Any:
    """Parse one YAML document with BoundedSafeLoader (or `loader_class`); raises yaml.YAMLError marked
    with the line."""
    loader = (loader_class or BoundedSafeLoader)(text)
    try:
        return loader.get_single_data()
    except yaml.MarkedYAMLError as e:
        if e.problem and "nesting depth" in e.problem:
            # libyaml 0.2.5's scanner (PyYAML >= 6.0.4 bundles it) looks ahead over a whole flow collection
            # and stops at its own limit of 1000 levels before our composer sees a single event: the same
            # refusal, worded as ours so that the message does not depend on the library's version.
            raise ScannerError(None, None, f"nested more than {MAX_DEPTH} levels deep; a hardware description "
                               f"needs about 8", e.problem_mark) from None
        raise
    finally:
        loader.dispose()
