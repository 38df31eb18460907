"""A unit's `when:` condition: node attributes it matches, as small plain values.

`when` is compared against node features (`kernel: [3, 3]`, `out_channels: 64`) and printed in mapping
errors, so its values are bounded here: scalars or short lists of them, two levels at most. Anything
else (a nested structure, a megabyte string) could only be a mistake or an attack.
"""
from __future__ import annotations

import math
import re
from typing import Any

from accelsim.hw.ranges import MAX_NAME_CHARS, NAME_PATTERN

MAX_WHEN_KEYS = 16
MAX_WHEN_ITEMS = 16  # per list
MAX_WHEN_DEPTH = 2  # [[1, 1], [2, 2]] but no deeper
MAX_WHEN_STRING = 64
MAX_WHEN_INT = 2**63


def _value(value: Any, key: str, depth: int) -> Any:
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        if abs(value) > MAX_WHEN_INT:
            raise ValueError(f"when.{key}: an integer beyond +-2^63 cannot match a node attribute")
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"when.{key}: {value!r} cannot match a node attribute (expected a finite number)")
        return value
    if isinstance(value, str):
        if len(value) > MAX_WHEN_STRING:
            raise ValueError(f"when.{key}: a string of {len(value)} characters (at most {MAX_WHEN_STRING})")
        return value
    if isinstance(value, (list, tuple)):
        if depth >= MAX_WHEN_DEPTH:
            raise ValueError(f"when.{key}: lists nest at most {MAX_WHEN_DEPTH} levels (e.g. [[1, 1], [0, 0]])")
        if len(value) > MAX_WHEN_ITEMS:
            raise ValueError(f"when.{key}: a list of {len(value)} items (at most {MAX_WHEN_ITEMS})")
        return [_value(v, key, depth + 1) for v in value]
    raise ValueError(f"when.{key}: expected a number, string, boolean or a list of them, "
                     f"got a {type(value).__name__}")


def check_when(value: Any) -> dict[str, Any]:
    """Validate a `when:` mapping of node attribute names to the values they must equal."""
    if not isinstance(value, dict):
        raise ValueError(f"expected a mapping of node attributes to values (e.g. {{kernel: [3, 3]}}), "
                         f"got a {type(value).__name__}")
    if len(value) > MAX_WHEN_KEYS:
        raise ValueError(f"{len(value)} conditions (at most {MAX_WHEN_KEYS})")
    out = {}
    for key, v in value.items():
        if not isinstance(key, str) or len(key) > MAX_NAME_CHARS or not re.fullmatch(NAME_PATTERN, key):
            shown = repr(key) if len(repr(key)) <= 40 else repr(key)[:37] + "..."
            raise ValueError(f"when: key {shown} is not a node attribute name (a plain identifier)")
        out[key] = _value(v, key, 0)
    return out
