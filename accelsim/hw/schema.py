"""The JSON Schema of a hardware file (HwSpec's, with every field described), for editors and YAML
language servers (`accelsim hw schema`), and the keys it allows at a key path, for the "did you mean"
of an unknown key (hw/load.py).
"""
from __future__ import annotations

import copy
import difflib
import functools
import json
from collections.abc import Sequence
from typing import Any

from accelsim.hw.quantity import pattern
from accelsim.hw.spec import HwSpec
from accelsim.pydantic_errors import format_loc

DIALECT = "https://json-schema.org/draft/2020-12/schema"
TITLE = "accelsim hardware description"


@functools.cache
def _schema() -> dict[str, Any]:
    schema = HwSpec.model_json_schema()
    for model in [schema, *schema["$defs"].values()]:
        for prop in model.get("properties", {}).values():
            accepts = _accepted_forms(prop)
            if accepts and "description" in prop:
                prop["description"] += f"; {accepts}"
    schema.pop("title")  # "HwSpec": a class name, not what a reader of the schema is looking at
    return {"$schema": DIALECT, "title": TITLE, **schema}


def hw_json_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) a hardware file satisfies, as a fresh dict."""
    return copy.deepcopy(_schema())


def schema_text() -> str:
    """The schema as the text `accelsim hw schema` writes: the same bytes on every run."""
    return json.dumps(_schema(), indent=2, ensure_ascii=False) + "\n"


def _accepted_forms(prop: dict[str, Any]) -> str | None:
    """'a whole number from 1 to 2^60 bytes, or a size with its unit: ...' for a quantity (hw/fields.py
    _schema: a number branch and a string branch, each described; pydantic adds a null branch to an
    `X | None`, nested or not); None for anything else. A field says what its value means, its type how it
    may be written."""
    branches = [b for b in prop.get("anyOf", []) if b != {"type": "null"}]
    if len(branches) == 1:
        return _accepted_forms(branches[0])
    if len(branches) != 2 or not all("description" in b for b in branches):
        return None
    number, text = branches
    if text.get("type") != "string" or "minimum" not in number:
        return None
    unit = text["pattern"] != pattern()  # a number written as text needs no explaining
    return number["description"] + (f", or {text['description']}" if unit else "")


def _resolve(node: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    """Follow a $ref, and from an `X | None` take X."""
    while True:
        if "$ref" in node:
            node = defs[node["$ref"].rsplit("/", 1)[-1]]
        elif "anyOf" in node:
            options = [b for b in node["anyOf"] if b != {"type": "null"}]
            if len(options) != 1:
                return node
            node = options[0]
        else:
            return node


def keys_at(loc: Sequence[str | int]) -> tuple[str, list[str]] | None:
    """(the title of the object at `loc`, its allowed keys) for a key path as pydantic reports it,
    e.g. ('chips', 0, 'units', 1) -> ('Unit', ['name', 'ops', ...]); None where `loc` does not lead to an
    object with fixed keys."""
    schema = _schema()
    defs = schema["$defs"]
    node = _resolve(schema, defs)
    for part in loc:
        if isinstance(part, int):
            if node.get("type") != "array":
                return None
            node = node["items"]
        elif part in node.get("properties", {}):
            node = node["properties"][part]
        else:
            return None
        node = _resolve(node, defs)
    if "properties" not in node:
        return None
    return node.get("title", "the top level"), list(node["properties"])


def unknown_key_hint(loc: Sequence[str | int]) -> str:
    """For a key that is not allowed at `loc` (its own name last): "; did you mean 'array'?", else the
    keys allowed there; '' where those are not known."""
    if not loc or not isinstance(loc[-1], str):
        return ""
    found = keys_at(loc[:-1])
    if found is None:
        return ""
    keys = found[1]
    where = format_loc(tuple(loc[:-1])) if len(loc) > 1 else "the top level"
    close = difflib.get_close_matches(loc[-1], keys, n=3)
    if close:
        return f"; did you mean {' or '.join(repr(k) for k in close)}? ({where} has no key {loc[-1]!r})"
    return f"; {where} has no key {loc[-1]!r}, its keys are {', '.join(keys)}"
