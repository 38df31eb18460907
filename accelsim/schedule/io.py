"""Schedule <-> JSON file: deterministic writing, and loading that refuses stale or malformed schedules."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from accelsim.errors import ScheduleError
from accelsim.graph.ir import Graph
from accelsim.hw.spec import HwSpec
from accelsim.schedule.plan import Schedule, graph_hash, hw_hash

FORMAT_VERSION = 1


def save_schedule(schedule: Schedule, path: str | Path) -> None:
    """Write `schedule` as JSON; the same schedule always gives a byte-identical file."""
    path = Path(path)
    text = json.dumps(schedule.model_dump(mode="json"), sort_keys=True, separators=(",", ":")) + "\n"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    except OSError as e:
        raise ScheduleError(f"{path}: cannot write the schedule: {e.strerror or e}") from None


def load_schedule(path: str | Path, graph: Graph | None = None, hw: HwSpec | None = None) -> Schedule:
    """Read a schedule written by save_schedule; with `graph` or `hw`, refuse one compiled for others."""
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise ScheduleError(f"{path}: no such schedule file (write one with `accelsim compile`)") from None
    except UnicodeDecodeError:
        raise ScheduleError(f"{path}: not a UTF-8 text file, so not a schedule") from None
    except OSError as e:
        raise ScheduleError(f"{path}: cannot read the schedule: {e.strerror or e}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise ScheduleError(f"{path}: not valid JSON: {e.msg} at line {e.lineno}, column {e.colno}") from None
    if not isinstance(data, dict):
        raise ScheduleError(f"{path}: expected a JSON object (graph_name, tasks, tensors, ...) at the top "
                            f"level, got {type(data).__name__}")
    if data.get("version", FORMAT_VERSION) != FORMAT_VERSION:
        raise ScheduleError(f"{path}: schedule format version {data['version']!r}, but this accelsim reads "
                            f"version {FORMAT_VERSION}: recompile with `accelsim compile`")
    try:
        schedule = Schedule.model_validate(data)
    except ValidationError as e:
        errors = e.errors()
        lines = "\n".join(f"  {_describe(err)}" for err in errors[:20])
        more = f"\n  ... and {len(errors) - 20} more" if len(errors) > 20 else ""
        raise ScheduleError(f"{path}: not a valid schedule: {len(errors)} problem(s)\n{lines}{more}") from None
    if graph is not None:
        _check_compiled_for(path, "graph", schedule.graph_name, schedule.graph_hash, graph.name, graph_hash(graph))
    if hw is not None:
        _check_compiled_for(path, "hardware", schedule.hw_name, schedule.hw_hash, hw.name, hw_hash(hw))
    return schedule


def _check_compiled_for(path: Path, what: str, name: str, digest: str, used_name: str, used_digest: str) -> None:
    if digest != used_digest:
        raise ScheduleError(f"{path}: the schedule was compiled for {what} {name!r} (hash {digest[:12]}) and is "
                            f"being used with {what} {used_name!r} (hash {used_digest[:12]}): "
                            f"recompile with `accelsim compile`")


def _describe(error: Any) -> str:
    """One pydantic error as `tasks[3].start: message (got value)`."""
    loc = ""
    for part in error["loc"]:
        loc += f"[{part}]" if isinstance(part, int) else ("." if loc else "") + str(part)
    got = error.get("input")
    shown = f" (got {got!r})" if error["type"] != "missing" and not isinstance(got, (dict, list)) else ""
    if len(shown) > 80:
        shown = shown[:77] + "...)"
    return f"{loc or '(top level)'}: {error['msg']}{shown}"
