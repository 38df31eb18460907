"""A path, a bundled name, a dict or an HwSpec -> a validated HwSpec; every problem is reported at once
as one HwConfigError, `file: key.path: message (got value)`."""
from __future__ import annotations

import difflib
import json
import re
from importlib import resources
from pathlib import Path
from collections.abc import Mapping
from typing import Any

import yaml
from pydantic import ValidationError

from accelsim.errors import HwConfigError
from accelsim.hw.overrides import apply_overrides, describe
from accelsim.hw.schema import unknown_key_hint
from accelsim.hw.spec import HwSpec
from accelsim.hw.yaml_loader import MAX_DEPTH, MAX_NODES, load_yaml, reader_error_line
from accelsim.pydantic_errors import describe_errors
from accelsim.safe_file import FileRules, read_regular

MAX_FILE_BYTES = 1 << 20
MAX_PROBLEMS_LISTED = 20
BUNDLED_PACKAGE = "accelsim.hwconfigs"
"""The bundled configs: the repository's top-level hwconfigs/ folder, installed as this package
(setup.py's package_dir), so a wheel, a plain install and an editable one all find them."""
SOURCE_TREE = Path(__file__).resolve().parent.parent.parent / "hwconfigs"
"""The same folder where BUNDLED_PACKAGE cannot be imported: an editable install (setuptools' editable
finder maps no folder without an __init__.py inside a package) or a source tree on PYTHONPATH."""
_BUNDLED_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,63}")
ACCEPTED = ("a path to a YAML file, the name of a bundled config (e.g. 'groq_like'), a dict of the same "
            "keys as a file, or an HwSpec")


def _shown(x: object) -> str:
    text = repr(x)
    return text if len(text) <= 80 else text[:77] + "..."


def _shown_path(x: str | Path) -> str:
    """A path as typed when it is plain text, else quoted (a NUL byte, a newline, a megabyte of text)."""
    text = str(x)
    return text if text.isprintable() and len(text) <= 200 else _shown(text)


def _bundled_files() -> dict[str, Path]:
    """Every bundled config by name ("groq_like" -> .../groq_like.yaml)."""
    try:
        folder = resources.files(BUNDLED_PACKAGE)
    except (ModuleNotFoundError, NotADirectoryError):  # the latter: a namespace path with a non-folder entry
        folder = SOURCE_TREE
    files = {}
    for entry in folder.iterdir() if folder.is_dir() else ():
        if entry.name.endswith(".yaml") and entry.is_file():
            files[entry.name.removesuffix(".yaml")] = Path(str(entry))
    return files


def bundled_names() -> list[str]:
    return sorted(_bundled_files())


def bundled_path(name: str) -> Path:
    """The file of bundled config `name` (never a path of the same name in the working folder)."""
    files = _bundled_files()
    if name not in files:
        raise HwConfigError(f"{_shown(name)} is not a bundled hardware config (bundled: {', '.join(sorted(files))})")
    return files[name]


def resolve(path_or_name: str | Path) -> Path:
    """A path, or the name of a bundled config ("groq_like" -> hwconfigs/groq_like.yaml)."""
    try:
        p = Path(path_or_name)
        if p.exists():
            return p
    except (OSError, ValueError) as e:  # a NUL byte, a name too long for the file system
        why = e.strerror if isinstance(e, OSError) and e.strerror else e  # strerror: without the name again
        raise HwConfigError(f"{_shown_path(path_or_name)}: not a usable path ({why}); expected {ACCEPTED}") from None
    name = str(path_or_name).removesuffix(".yaml")
    bundled = _bundled_files()
    # a name is looked up among the bundled files, never joined to a folder: "../x" or "a/b" cannot escape it
    if _BUNDLED_NAME.fullmatch(name) and name in bundled:
        return bundled[name]
    known = ", ".join(sorted(bundled)) or "none"
    close = difflib.get_close_matches(name, sorted(bundled), n=1) if len(name) <= 200 else []
    hint = f"did you mean {close[0]!r}? " if close else ""
    raise HwConfigError(f"{_shown_path(path_or_name)}: no such file, and no bundled hardware config of that "
                        f"name ({hint}bundled: {known})")


def _check_size(data: Any, source: str) -> None:
    """The limits the YAML reader enforces (MAX_NODES values, MAX_DEPTH levels), for data handed over as
    Python objects: shared or cyclic containers are walked as the tree they stand for, so a cycle shows
    up as too deep."""
    stack: list[tuple[Any, int]] = [(data, 1)]
    nodes = 0
    while stack:
        value, depth = stack.pop()
        nodes += 1
        if nodes > MAX_NODES:
            raise HwConfigError(f"{source}: more than {MAX_NODES} values in all; a hardware description "
                                f"needs a few hundred")
        if depth > MAX_DEPTH:
            raise HwConfigError(f"{source}: nested more than {MAX_DEPTH} levels deep (a structure that "
                                f"contains itself?); a hardware description needs about 8")
        if isinstance(value, dict):
            stack += [(v, depth + 1) for kv in value.items() for v in kv]
        elif isinstance(value, (list, tuple, set, frozenset)):
            stack += [(v, depth + 1) for v in value]


def parse_hw(data: Any, source: str = "<hw>") -> HwSpec:
    """Validate already-parsed data (a dict of the keys of a hardware file)."""
    if not isinstance(data, dict):
        got = "nothing (an empty file, or only comments)" if data is None else \
            f"a {type(data).__name__} ({_shown(data)})"
        raise HwConfigError(f"{source}: expected a mapping of keys (name, clock_hz, chips, ...) at the top "
                            f"level, got {got}")
    _check_size(data, source)
    try:
        return HwSpec.model_validate(data)
    except ValidationError as e:
        errors = e.errors()
        lines = describe_errors(errors, limit=MAX_PROBLEMS_LISTED)
        for i, error in enumerate(errors[:MAX_PROBLEMS_LISTED]):  # lines[i] describes errors[i]
            if error["type"] == "extra_forbidden":
                lines[i] += unknown_key_hint(error["loc"])
        raise HwConfigError(f"{source}: {len(errors)} problem(s)\n" + "\n".join(f"  {x}" for x in lines)) from None
    except RecursionError:
        raise HwConfigError(f"{source}: nested too deeply to validate") from None


HW_FILE = FileRules("a hardware description file (YAML)", MAX_FILE_BYTES, HwConfigError,
                    lambda n: f"more than {MAX_FILE_BYTES} bytes is too large for a hardware description "
                              f"(limit {MAX_FILE_BYTES} bytes)")


def _read_text(path: Path) -> str:
    """The file's text: a regular file of at most MAX_FILE_BYTES, UTF-8, no NUL bytes."""
    raw = read_regular(path, HW_FILE)
    if b"\0" in raw:
        raise HwConfigError(f"{path}: a binary file (it contains NUL bytes), not a UTF-8 text file; "
                            f"expected a hardware description in YAML")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise HwConfigError(f"{path}: not a UTF-8 text file (byte {e.start} is not UTF-8); expected a hardware "
                            f"description in YAML") from None


def _yaml_problem(path: Path, e: yaml.YAMLError, text: str) -> HwConfigError:
    if isinstance(e, yaml.reader.ReaderError):  # a control character: no mark, only an offset
        return HwConfigError(f"{path}: not valid YAML at line {reader_error_line(e, text)}: character "
                             f"{chr(e.character)!r} (#x{e.character:04x}) is not allowed in a YAML file")
    mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    problem = getattr(e, "problem", None) or getattr(e, "reason", None) or (str(e).splitlines() or ["?"])[0]
    context = getattr(e, "context", None)
    if context and getattr(e, "problem", None):  # "while parsing a flow sequence" / "but found another document"
        detail = f"{context}, {problem}" if problem.startswith("but ") else f"{problem} ({context})"
    else:
        detail = problem
    return HwConfigError(f"{path}: not valid YAML{where}: {detail}")


def _read_data(source: str | Path | dict[str, Any] | HwSpec) -> tuple[Any, str]:
    """The parsed data of a description before validation, and where it came from (for messages)."""
    if isinstance(source, HwSpec):
        return source.model_dump(mode="json"), source.name
    if isinstance(source, dict):
        return source, "<dict>"
    if not isinstance(source, (str, Path)):
        raise HwConfigError(f"load_hw got a {type(source).__name__} ({_shown(source)}); expected {ACCEPTED}")
    if not str(source).strip():
        raise HwConfigError(f"load_hw got an empty name; expected {ACCEPTED}")
    path = resolve(source)
    text = _read_text(path)
    try:
        return load_yaml(text), str(path)
    except yaml.YAMLError as e:
        raise _yaml_problem(path, e, text) from None
    except RecursionError:  # not reachable with the depth bound; kept so that no input yields a traceback
        raise HwConfigError(f"{path}: nested too deeply to read") from None


HwLike = HwSpec | str | Path | dict[str, Any] | None
"""What every entry point accepts as hardware: an HwSpec, a bundled name, a path, a parsed dict (or None where the
schedule's own hardware is meant)."""


def load_hw(source: str | Path | dict[str, Any] | HwSpec, overrides: Mapping[str, Any] | None = None) -> HwSpec:
    """Load and validate a hardware description: a path, a bundled name, a dict or an HwSpec (as is).

    `overrides` ({"chips.0.units.mxu.array.rows": 128, ...}, hw/overrides.py) change values by key path
    first; the result is validated like a file and remembers them (HwSpec.overrides, added to those of
    an HwSpec given as the source), so schedules compiled for it record them."""
    if overrides is not None and not isinstance(overrides, Mapping):
        raise HwConfigError(f"overrides must be a mapping of key paths to values, got {type(overrides).__name__} "
                            f"({_shown(overrides)})")
    if not overrides and isinstance(source, HwSpec):
        return source
    data, where = _read_data(source)
    if not overrides:
        return parse_hw(data, where)
    hw = parse_hw(apply_overrides(data, overrides, where), f"{where} with overrides {describe(overrides)}")
    recorded = json.loads(json.dumps(dict(overrides), default=str))  # plain JSON, as schedules store it
    hw._overrides = {**(source.overrides if isinstance(source, HwSpec) else {}), **recorded}
    return hw
