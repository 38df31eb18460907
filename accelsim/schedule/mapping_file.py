"""Mapping files: the mappings of a step by layer name and unit, as YAML or JSON (path <-> LayerMapping entries).
`accelsim compile/run --mapping-out FILE` writes the mappings a schedule records; `--mapping FILE` (StepOptions
.mapping) reads them back, whole or edited. The layout, one entry per layer and unit:

    mappings:
      conv2d3:                 # a layer (node) name
        mxu:                   # a unit name; its keys are optional: those left out are searched
          dataflow: ws
          rows: [C, FY, FX]    # dimensions flattened onto the array's rows
          cols: [K]
          stream: {OY: 56, OX: 56}
          order: [cols, rows]  # fold loops, outermost first (only with all of the above)

A unit's value may instead be a list of such entries, each with a `chip` index, where chips of several kinds
map the layer differently. Every problem is refused naming the file, the layer, the unit and the key."""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from accelsim.errors import AccelsimError
from accelsim.hw.yaml_loader import load_yaml
from accelsim.pydantic_errors import describe_errors
from accelsim.safe_file import FileRules, JsonRules, decode_utf8, parse_json, read_regular, special_target
from accelsim.mapping.entry import MAX_TILE, LayerMapping
from accelsim.schedule.mappings import NodeMapping

MAX_FILE_BYTES = 16 * 2**20
"""A mapping file holds a few lines per layer: a network of thousands of layers stays far below this."""
ENTRY_KEYS = ("chip", "dataflow", "rows", "cols", "stream", "order")


class MappingFileError(AccelsimError):
    """A mapping file that cannot be read or does not hold mappings (its path, layer, unit and key named)."""


MAPPING_FILE = FileRules("a mapping file (YAML or JSON, from `accelsim compile --mapping-out`)", MAX_FILE_BYTES,
                         MappingFileError, lambda n: f"{n:,} bytes is larger than any mapping file (limit "
                                                     f"{MAX_FILE_BYTES:,} bytes)",
                         missing="no such mapping file (write one with `accelsim compile --mapping-out FILE`)")
MAPPING_JSON = JsonRules(MappingFileError, "a mapping file",
                         lambda name: f"the number {name} is not allowed in a mapping file (tiles are whole numbers)",
                         unique_keys=True)  # as the YAML reader refuses a layer or unit named twice


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _key(name: str) -> str:
    """A layer or unit name in a key path: as written where short and printable, else quoted and cut (a name with
    a newline or a terminal escape would break the one-paragraph message, a long one would flood it)."""
    return name if name.isprintable() and len(name) <= 60 else _shown(name)


def _names(value: Any, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise MappingFileError(f"{where}: expected a list of dimension names like [C, FY, FX], got {_shown(value)}")
    return tuple(value)


def _stream(value: Any, where: str) -> tuple[tuple[str, int], ...]:
    if not isinstance(value, dict):
        raise MappingFileError(f"{where}: expected a mapping of dimension names to elements per fold like "
                               f"{{OY: 56, OX: 56}}, got {_shown(value)}")
    out = []
    for name, tile in value.items():
        if not isinstance(name, str) or not name:
            raise MappingFileError(f"{where}: {_shown(name)} is not a dimension name")
        if isinstance(tile, float) and not math.isfinite(tile):
            raise MappingFileError(f"{where}.{name}: {tile} elements per fold; expected a whole number >= 1")
        if isinstance(tile, bool) or not isinstance(tile, int) or not 1 <= tile <= MAX_TILE:
            raise MappingFileError(f"{where}.{name}: {_shown(tile)} elements per fold; expected a whole number "
                                   f"from 1 to the dimension's extent (a divisor of it)")
        out.append((name, tile))
    return tuple(out)


def _entry(layer: str, unit: str, raw: Any, where: str) -> LayerMapping:
    if not isinstance(raw, dict):
        raise MappingFileError(f"{where}: expected a mapping with keys {', '.join(ENTRY_KEYS)} (each optional), "
                               f"got {_shown(raw)}")
    unknown = [k for k in raw if k not in ENTRY_KEYS]
    if unknown:
        raise MappingFileError(f"{where}: unknown key(s) {', '.join(map(_shown, unknown))}; the keys are "
                               f"{', '.join(ENTRY_KEYS)}")
    fields: dict[str, Any] = {"layer": layer, "unit": unit}
    for key in ("rows", "cols", "order"):
        if raw.get(key) is not None:
            fields[key] = _names(raw[key], f"{where}.{key}")
    if raw.get("stream") is not None:
        fields["stream"] = _stream(raw["stream"], f"{where}.stream")
    for key in ("dataflow", "chip"):
        if raw.get(key) is not None:
            fields[key] = raw[key]
    try:
        return LayerMapping(**fields)
    except ValidationError as e:
        raise MappingFileError(f"{where}: " + "; ".join(describe_errors(e.errors()))) from None


def mapping_entries(data: Any, source: str) -> tuple[LayerMapping, ...]:
    """The entries of a parsed mapping file (`source` names it in messages)."""
    if not isinstance(data, dict) or set(data) != {"mappings"} or not isinstance(data["mappings"], dict):
        raise MappingFileError(f"{source}: expected one top-level key `mappings` holding layer names, each holding "
                               f"unit names and their mappings, got {_shown(data)}")
    entries = []
    for layer, units in data["mappings"].items():
        if not isinstance(layer, str) or not layer:
            raise MappingFileError(f"{source}: mappings: {_shown(layer)} is not a layer name")
        if not isinstance(units, dict) or not units:
            raise MappingFileError(f"{source}: mappings.{_key(layer)}: expected unit names and their mappings "
                                   f"(e.g. mxu: {{dataflow: ws}}), got {_shown(units)}")
        for unit, raw in units.items():
            if not isinstance(unit, str) or not unit:
                raise MappingFileError(f"{source}: mappings.{_key(layer)}: {_shown(unit)} is not a unit name")
            where = f"{source}: mappings.{_key(layer)}.{_key(unit)}"
            if isinstance(raw, list):
                if not raw or not all(isinstance(r, dict) and r.get("chip") is not None for r in raw):
                    raise MappingFileError(f"{where}: a list holds one mapping per chip, each with its `chip`")
                entries += [_entry(layer, unit, r, f"{where}[{i}]") for i, r in enumerate(raw)]
            else:
                entries.append(_entry(layer, unit, raw, where))
    return tuple(entries)


def read_mapping_file(path: str | Path) -> tuple[LayerMapping, ...]:
    """The entries of the mapping file at `path` (.json as JSON, anything else as YAML)."""
    if not isinstance(path, (str, Path)) or not str(path).strip():
        raise MappingFileError(f"a mapping file needs a path, got {_shown(path)}")
    text = decode_utf8(read_regular(path, MAPPING_FILE), str(path), MAPPING_JSON)
    if Path(path).suffix.lower() == ".json":
        return mapping_entries(parse_json(text, str(path), MAPPING_JSON), str(path))
    try:
        data = load_yaml(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise MappingFileError(f"{path}: not valid YAML{at}: {problem}") from None
    except (ValueError, RecursionError) as e:
        raise MappingFileError(f"{path}: not a mapping file: {e}") from None
    return mapping_entries(data, str(path))



def mapping_data(mappings: tuple[NodeMapping, ...]) -> dict[str, Any]:
    """The file's data for a schedule's mappings: by layer, then unit (a list by chip where a layer's unit has
    several), in the schedule's order."""
    by: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for m in mappings:
        entry = {"chip": m.chip, "dataflow": m.dataflow, "rows": list(m.rows), "cols": list(m.cols),
                 "stream": dict(m.stream), "order": list(m.order)}
        by.setdefault(m.layer, {}).setdefault(m.unit, []).append(entry)
    out: dict[str, Any] = {}
    for layer, units in by.items():
        out[layer] = {}
        for unit, entries in units.items():
            if len(entries) == 1:
                entries[0].pop("chip")
                out[layer][unit] = entries[0]
            else:
                out[layer][unit] = entries
    return {"mappings": out}


def write_mapping_file(mappings: tuple[NodeMapping, ...] | None, path: str | Path) -> Path:
    """Write `mappings` to `path` (.json as JSON, else YAML); the same mappings always give the same bytes."""
    if not mappings:
        raise MappingFileError(f"{path}: the schedule records no mappings: no unit of its hardware searches them "
                               f"(give an array unit `mapping: search`)")
    p = Path(path)
    kind = special_target(p)
    if kind is not None:
        raise MappingFileError(f"{path}: is {kind}, not a regular file; expected a file name to write the mappings to")
    data = mapping_data(mappings)
    if p.suffix.lower() == ".json":
        text = json.dumps(data, indent=1) + "\n"
    else:
        text = ("# accelsim mapping file: per layer and unit, the mapping (edit it and pass it to --mapping)\n"
                + yaml.safe_dump(data, sort_keys=False, default_flow_style=None, width=100))
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    except (OSError, ValueError) as e:  # ValueError: a NUL byte in the name, which only Python can pass
        raise MappingFileError(f"{str(path)!r}: cannot write the mapping file: "
                               f"{getattr(e, 'strerror', None) or e}") from None
    return p
