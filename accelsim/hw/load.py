"""YAML -> HwSpec, with every problem reported at once as `file: key.path: message (got value)`."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from accelsim.errors import HwConfigError
from accelsim.hw.spec import HwSpec

MAX_FILE_BYTES = 1 << 20
BUNDLED = Path(__file__).resolve().parent.parent.parent / "hwconfigs"


def resolve(path_or_name: str | Path) -> Path:
    """A path, or the name of a bundled config ("groq_like" -> hwconfigs/groq_like.yaml)."""
    p = Path(path_or_name)
    if p.exists():
        return p
    for candidate in (BUNDLED / f"{path_or_name}.yaml", BUNDLED / str(path_or_name)):
        if candidate.is_file():
            return candidate
    known = ", ".join(sorted(q.stem for q in BUNDLED.glob("*.yaml"))) or "none"
    raise HwConfigError(f"{path_or_name}: no such file, and no bundled hardware config of that name "
                        f"(bundled: {known})")


def _loc(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif not str(part).startswith(("function-", "tagged-union")):
            out += ("." if out else "") + str(part)
    return out or "(top level)"


def _describe(errors: list[dict[str, Any]]) -> list[str]:
    lines = []
    for e in errors:
        msg = e["msg"].removeprefix("Value error, ")
        scalar = not isinstance(e.get("input"), (dict, list))
        got = f" (got {e['input']!r})" if scalar and e["type"] != "missing" and "got" not in msg else ""
        if len(got) > 80:
            got = got[:77] + "...)"
        lines.append(f"  {_loc(e['loc'])}: {msg}{got}")
    return lines


def parse_hw(data: Any, source: str = "<hw>") -> HwSpec:
    """Validate already-parsed YAML data."""
    if not isinstance(data, dict):
        raise HwConfigError(f"{source}: expected a mapping of keys (name, clock_hz, chips, ...) at the top "
                            f"level, got {type(data).__name__}")
    try:
        return HwSpec.model_validate(data)
    except ValidationError as e:
        errors = e.errors()
        raise HwConfigError(f"{source}: {len(errors)} problem(s)\n" + "\n".join(_describe(errors))) from None


def load_hw(path_or_name: str | Path) -> HwSpec:
    """Load and validate a hardware description (yaml.safe_load only)."""
    path = resolve(path_or_name)
    if not path.is_file():
        raise HwConfigError(f"{path}: not a file")
    size = path.stat().st_size
    if size > MAX_FILE_BYTES:
        raise HwConfigError(f"{path}: {size} bytes is too large for a hardware description "
                            f"(limit {MAX_FILE_BYTES} bytes)")
    try:
        data = yaml.safe_load(path.read_text())
    except UnicodeDecodeError:
        raise HwConfigError(f"{path}: not a UTF-8 text file") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise HwConfigError(f"{path}: not valid YAML{where}: {problem}") from None
    return parse_hw(data, str(path))
