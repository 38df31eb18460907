"""A sweep spec file, dict or SweepSpec -> a validated SweepSpec with its base hardware resolved; every
problem is reported at once as one SweepError, `spec.yaml: key.path: message`."""
from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from accelsim.errors import HwConfigError, SweepError
from accelsim.hw import load_hw
from accelsim.hw.load import bundled_names
from accelsim.hw.spec import HwSpec
from accelsim.hw.yaml_loader import load_yaml
from accelsim.pydantic_errors import describe_errors
from accelsim.dse.checks import check_spec
from accelsim.dse.spec import PARAM_TAGS, SweepSpec
from accelsim.safe_file import FileRules, read_regular

MAX_FILE_BYTES = 1 << 20
TOP_LEVEL_KEYS = "name, hw, hw_set, model, model_options, options, parameters, search, constraints, metrics"
DEFAULT_NAME = "sweep"
MAX_PROBLEMS = 20


def _problems(source: str, lines: list[str]) -> SweepError:
    if len(lines) == 1:
        return SweepError(f"{source}: {lines[0]}")
    return SweepError(f"{source}: {len(lines)} problem(s)\n" + "\n".join(f"  {line}" for line in lines))


SPEC_FILE = FileRules("a sweep spec file (YAML)", MAX_FILE_BYTES, SweepError,
                      lambda n: f"larger than {MAX_FILE_BYTES} bytes; a sweep spec is a few dozen lines")


def _read_file(path: Path) -> tuple[Any, str]:
    """The parsed YAML of a spec file and its text: at most MAX_FILE_BYTES of UTF-8, one document."""
    raw = read_regular(path, SPEC_FILE)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise SweepError(f"{path}: not a UTF-8 text file (byte {e.start}); expected a sweep spec in YAML") from None
    try:
        return load_yaml(text), text
    except (yaml.YAMLError, RecursionError) as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(e, "problem", None) or (str(e).splitlines() or ["?"])[0]
        raise SweepError(f"{path}: not valid YAML{where}: {problem}") from None


def _describe(error: dict[str, Any]) -> str:
    """One pydantic error as `key.path: message`; a parameter's key is shown whole (it is a dotted
    path itself, often longer than pydantic_errors clips a key to), without the tag that says
    whether it is a list or a range."""
    loc = tuple(error.get("loc", ()))
    if len(loc) < 2 or loc[0] != "parameters" or not isinstance(loc[1], str):
        return describe_errors([error])[0]
    rest = loc[3:] if len(loc) > 2 and loc[2] in PARAM_TAGS else loc[2:]
    key = loc[1] if loc[1].isprintable() and len(loc[1]) <= 200 else repr(loc[1][:200])
    line = describe_errors([{**error, "loc": ("x",) + rest}])[0]  # "x[2]: ...", "x.low: ...", "x: ..."
    return f"parameters.{key}{line[1:]}"


def _validate(data: Any, source: str) -> SweepSpec:
    if not isinstance(data, Mapping):
        got = "nothing (an empty file?)" if data is None else f"a {type(data).__name__}"
        raise SweepError(f"{source}: expected a mapping of keys ({TOP_LEVEL_KEYS}) at the top level, got {got}")
    try:
        return SweepSpec.model_validate(dict(data))
    except ValidationError as e:
        errors = e.errors()
        lines = [_describe(err) for err in errors[:MAX_PROBLEMS]]
        if len(errors) > MAX_PROBLEMS:
            lines.append(f"... and {len(errors) - MAX_PROBLEMS} more")
        raise _problems(source, lines) from None
    except RecursionError:
        raise SweepError(f"{source}: nested too deeply to validate") from None


def _hw_source(hw: str, spec_dir: Path | None) -> str:
    """A spec file's `hw`: a path relative to the file's directory, else a bundled name."""
    if spec_dir is None or Path(hw).is_absolute():
        return hw
    try:
        candidate = spec_dir / hw
        if candidate.exists():
            return str(candidate)
    except (OSError, ValueError):
        pass  # a NUL byte or an over-long name: load_hw names the problem
    if hw.removesuffix(".yaml") in bundled_names():
        return hw
    raise HwConfigError(f"{hw!r:.200}: no file {spec_dir / hw} (paths are relative to the spec file) and no "
                        f"bundled hardware config of that name (bundled: {', '.join(bundled_names())})")


def _base_hw(spec: SweepSpec, spec_dir: Path | None) -> tuple[HwSpec | None, list[str]]:
    try:
        return load_hw(_hw_source(spec.hw, spec_dir)), []
    except HwConfigError as e:
        return None, [f"hw: {e}".replace("\n", "\n  ")]
    except (OSError, ValueError) as e:
        return None, [f"hw: {spec.hw!r:.200} cannot be read ({e})"]


def _default_name(path: Path | None) -> str:
    if path is None:
        return DEFAULT_NAME
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", path.stem)[:64].lstrip(".-")
    return name or DEFAULT_NAME


def load_spec(source: str | Path | Mapping[str, Any] | SweepSpec) -> SweepSpec:
    """Read and validate a sweep spec (a YAML file, a dict of its keys, or a SweepSpec); raises one
    SweepError listing every problem, each with its key path."""
    if isinstance(source, SweepSpec) and source._base_hw is not None:
        return source  # loaded and checked already
    path = spec_dir = text = None
    if isinstance(source, SweepSpec):
        spec, where = source, "<spec>"
    elif isinstance(source, Mapping):
        spec, where = _validate(source, "<dict>"), "<dict>"
    elif isinstance(source, (str, Path)) and str(source).strip():
        path = Path(source)
        where, spec_dir = str(path), path.parent
        data, text = _read_file(path)
        spec = _validate(data, where)
    else:
        raise SweepError(f"a sweep spec must be a YAML file's path, a dict or a SweepSpec, got "
                         f"{type(source).__name__} {str(source)[:60]!r}")
    base, problems = _base_hw(spec, spec_dir)
    problems += check_spec(spec, base)
    if problems:
        raise _problems(where, problems)
    if spec.name is None:
        spec = spec.model_copy(update={"name": _default_name(path)})
    spec._source, spec._base_hw = where, base
    spec._text = text if text is not None else \
        yaml.safe_dump(spec.model_dump(mode="json", by_alias=True, exclude_unset=True), sort_keys=False)
    return spec
