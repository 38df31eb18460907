"""pydantic's validation errors -> readable lines `key.path[3].field: message (got value)`.

Shared by every loader of user files (hardware YAML, schedule JSON) so that all of them report a bad
value the same way: where it is, what is wrong, what was given.
"""
from __future__ import annotations

import re
from typing import Any

MAX_VALUE_CHARS = 80
MAX_KEY_CHARS = 40
_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*")
# Parts of a location that name pydantic's machinery rather than the user's keys.
_INTERNAL = ("function-", "tagged-union", "json-or-python", "lax-or-strict", "chain[")


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def format_loc(loc: tuple[Any, ...]) -> str:
    """('chips', 0, 'units', 3, 'name') -> 'chips[0].units[3].name'; '(top level)' for ()."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part == "[key]":  # pydantic's marker for a bad dict key: the key itself is the previous part
            out += " (the key)"
        elif not any(str(part).startswith(p) for p in _INTERNAL):
            text = str(part)
            # A hostile key (newlines, escapes, a megabyte of text) must not break the one-line format.
            shown = text if _PLAIN_KEY.fullmatch(text) else repr(text)
            out += ("." if out else "") + _clip(shown, MAX_KEY_CHARS)
    return out or "(top level)"


def _shown_value(error: dict[str, Any], msg: str) -> str:
    """' (got 1e-320)' for a scalar input; nothing for a container, a missing key, or a value the
    message already shows."""
    if error.get("type") == "missing" or "input" not in error:
        return ""
    value = error["input"]
    if isinstance(value, (dict, list, tuple, set, frozenset)) or hasattr(value, "model_dump"):
        return ""
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001 - a user object with a broken __repr__ must not hide the error
        text = f"<{type(value).__name__}>"
    text = _clip(text, MAX_VALUE_CHARS)
    return "" if f"got {text}" in msg else f" (got {text})"


def describe_errors(errors: list[dict[str, Any]], limit: int = 20) -> list[str]:
    """One line per pydantic error, `key.path[3].field: message (got value)`, at most `limit` of them
    followed by '... and N more'. Lines carry no indentation; callers indent as they print."""
    lines = []
    for error in errors[:limit]:
        msg = str(error.get("msg", "invalid")).removeprefix("Value error, ").removeprefix("Assertion failed, ")
        loc = tuple(error.get("loc", ()))
        if not loc and re.match(r"[A-Za-z_][\w.\[\]]*: ", msg):
            lines.append(msg + _shown_value(error, msg))  # a model-level check that names its own path
        else:
            lines.append(f"{format_loc(loc)}: {msg}{_shown_value(error, msg)}")
    if len(errors) > limit:
        lines.append(f"... and {len(errors) - limit} more")
    return lines
