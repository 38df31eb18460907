"""Hardware overrides: change values of a hardware description by key path before it is validated
(`load_hw(x, overrides={"chips.0.units.mxu.array.rows": 128})`, `--hw-set KEY=VALUE`), so a sweep
varies a design without copying and editing YAML by hand.

A key path is dot-separated: mapping keys by name, list items by index or by their `name` (units,
memories and chips have one): "chips.tpu.units.mxu.array.rows" and "chips.0.units.0.array.rows" are the
same value. The result is validated exactly like a file, so a bad value is reported at its key path;
a path that leads nowhere is refused naming the override, the step that failed and what is there.
"""
from __future__ import annotations

import copy
import difflib
from collections.abc import Mapping
from typing import Any

import yaml

from accelsim.errors import HwConfigError
from accelsim.hw.yaml_loader import load_yaml

MAX_OVERRIDES = 256
MAX_VALUE_CHARS = 10_000
MAX_KEY_CHARS = 500


def parse_assignment(text: str) -> tuple[str, Any]:
    """'KEY=VALUE' from the command line: the value is read as YAML (safe), so `128` is a number, `true`
    a bool, `[tensor]` a list and `"64 KiB"` or 64 KiB a string the schema parses."""
    if not isinstance(text, str) or "=" not in text:
        raise HwConfigError(f"--hw-set {text!r}: expected KEY=VALUE, e.g. chips.0.units.mxu.array.rows=128")
    key, _, raw = text.partition("=")
    key = key.strip()
    if len(raw) > MAX_VALUE_CHARS:
        raise HwConfigError(f"--hw-set {key}: a value of {len(raw)} characters is too long "
                            f"(limit {MAX_VALUE_CHARS})")
    try:
        value = load_yaml(raw) if raw.strip() else None
    except (yaml.YAMLError, RecursionError) as e:
        raise HwConfigError(f"--hw-set {key}: the value {raw!r:.80} is not valid YAML ({str(e).splitlines()[0]})")
    if value is None:
        raise HwConfigError(f"--hw-set {key}: no value after '='; expected KEY=VALUE")
    return key, value


def parse_assignments(texts: list[str] | None) -> dict[str, Any]:
    """Every --hw-set, in order (a key given twice keeps its last value)."""
    out: dict[str, Any] = {}
    for text in texts or ():
        key, value = parse_assignment(text)
        out[key] = value
    return out


def _describe(container: Any) -> str:
    if isinstance(container, dict):
        return "keys " + ", ".join(map(str, container)) if container else "no keys"
    names = [item.get("name") for item in container if isinstance(item, dict)]
    named = f" or names {', '.join(str(n) for n in names if n is not None)}" if any(names) else ""
    return f"indices 0..{len(container) - 1}{named}" if container else "an empty list"


def _list_step(items: list, segments: list[str], i: int) -> tuple[int, int]:
    """(index into `items`, segments used): an integer index, or the name of an item; a name with dots
    in it spans several segments (the longest that names an item wins)."""
    head = segments[i]
    if head.isdigit():
        return int(head), 1
    for used in range(len(segments) - i, 0, -1):
        name = ".".join(segments[i:i + used])
        for index, item in enumerate(items):
            if isinstance(item, dict) and item.get("name") == name:
                return index, used
    return -1, 1


def _set(data: dict, key: str, value: Any, where: str) -> None:
    segments = key.split(".")
    if not key or any(not s for s in segments):
        raise HwConfigError(f"{where}: override {key!r}: an empty step in the key path; expected keys separated by "
                            f"single dots, e.g. chips.0.units.mxu.array.rows")
    node: Any = data
    i, walked = 0, []
    while True:
        last = i == len(segments) - 1
        if isinstance(node, dict):
            step, used = segments[i], 1
            if not last and step not in node:
                hint = difflib.get_close_matches(step, [str(k) for k in node], n=1)
                raise HwConfigError(f"{where}: override {key!r}: {'.'.join(walked) or 'the top level'} has no key {step!r}"
                                    f"{f' (did you mean {hint[0]!r}?)' if hint else ''}; it has {_describe(node)}")
        elif isinstance(node, list):
            step, used = _list_step(node, segments, i)
            last = i + used == len(segments)
            if not 0 <= step < len(node):
                names = [str(item["name"]) for item in node if isinstance(item, dict) and "name" in item]
                hint = difflib.get_close_matches(segments[i], names, n=1)
                raise HwConfigError(f"{where}: override {key!r}: {'.'.join(walked)} has no item {segments[i]!r}"
                                    f"{f' (did you mean {hint[0]!r}?)' if hint else ''}; it has {_describe(node)}")
        else:
            raise HwConfigError(f"{where}: override {key!r}: {'.'.join(walked)} is {node!r:.60}, not a mapping or a list, "
                                f"so it has no {segments[i]!r}")
        if last:
            node[step] = copy.deepcopy(value)
            return
        walked += segments[i:i + used]
        node = node[step]
        i += used


def apply_overrides(data: Any, overrides: Mapping[str, Any], where: str = "<hw>") -> Any:
    """A deep copy of parsed hardware data (read from `where`) with every override set, in order;
    `data` is unchanged."""
    if not isinstance(overrides, Mapping):
        raise HwConfigError(f"overrides must be a mapping of key paths to values, got {type(overrides).__name__}")
    if len(overrides) > MAX_OVERRIDES:
        raise HwConfigError(f"{len(overrides)} overrides: at most {MAX_OVERRIDES} are accepted")
    if not isinstance(data, dict):
        return data  # parse_hw reports what the top level should be
    out = copy.deepcopy(data)
    for key, value in overrides.items():
        if not isinstance(key, str) or len(key) > MAX_KEY_CHARS:
            raise HwConfigError(f"override key {key!r:.80}: expected a dotted key path of at most "
                                f"{MAX_KEY_CHARS} characters, e.g. chips.0.units.mxu.array.rows")
        _set(out, key, value, where)
    return out


def describe(overrides: Mapping[str, Any]) -> str:
    """'k=v, k=v' for messages and headers."""
    return ", ".join(f"{k}={v!r}" for k, v in overrides.items())
