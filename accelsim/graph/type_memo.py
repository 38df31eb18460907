"""A memo of shape inference (op, input types, attrs -> output type), so that graphs of repeated layers and
tensor-parallel ranks infer each distinct node type once: GPT-3 175B over 8 ranks has 265K nodes of about
8,000 distinct types (mostly its named leaves), and each is inferred when built and again when verified.

Only what inference reads is in the key, each value with its type and a tuple's with its elements' types
(so 1, 1.0 and True never share an entry); a key that does not hash (a list or array attribute, a hostile
node's list shape) is not memoized. Failures are never stored: their messages name the node, so each one
is raised afresh.
"""
from __future__ import annotations

from typing import Any, Hashable, Mapping, Sequence

MAX_ENTRIES = 1 << 16
"""Distinct node types kept (some MB); the memo starts over when full (GPT-3 175B over 8 ranks has about
8,000)."""

_memo: dict[Hashable, tuple[Any, tuple[int, ...], str]] = {}


def _tagged(value: Any) -> tuple:
    """`value` with its type, and a tuple with its elements' types too (a shape's, an axes attribute's)."""
    if value.__class__ is tuple:
        return (tuple, tuple(map(type, value)), value)
    return (value.__class__, value)


def type_key(op: str, in_types: Sequence[tuple[Any, Any]], attrs: Mapping[str, Any],
             graph_dtype: str) -> Hashable | None:
    """The memo key of inferring `op` on inputs of (shape, dtype) `in_types` with `attrs` (it may not hash);
    None for attrs that are not a mapping (a hostile node: inference itself reports it)."""
    try:
        items = tuple((k, _tagged(v)) for k, v in attrs.items())
    except (AttributeError, TypeError):
        return None
    return (op, tuple((_tagged(s), d) for s, d in in_types), items, graph_dtype)


def recall(key: Hashable | None, opdef: Any) -> tuple[tuple[int, ...], str] | None:
    """The memoized (shape, dtype) of `key`, if it was inferred by this very OpDef."""
    if key is None:
        return None
    try:
        hit = _memo.get(key)
    except TypeError:  # an unhashable attribute or shape: inferred every time
        return None
    return hit[1:] if hit is not None and hit[0] is opdef else None


def remember(key: Hashable | None, opdef: Any, shape: tuple[int, ...], dtype: str) -> None:
    """Store a successful inference by `opdef` under `key` (nothing when there is no key or it does not hash)."""
    if key is None:
        return
    if len(_memo) >= MAX_ENTRIES:
        _memo.clear()
    try:
        _memo[key] = (opdef, shape, dtype)
    except TypeError:
        pass
