"""Schedule <-> JSON file: deterministic writing, and reading that refuses malformed files (types and ranges;
A.load_schedule, in accelsim/api.py, then validates what was read against its graph, hardware and plan)."""
from __future__ import annotations

import json
from pathlib import Path

from pydantic import ValidationError

from accelsim.errors import ScheduleError
from accelsim.pydantic_errors import describe_errors
from accelsim.safe_file import FileRules, JsonRules, decode_utf8, parse_json, read_regular, special_target
from accelsim.schedule.plan import FORMAT_VERSION, Schedule

MAX_FILE_BYTES = 512 * 2**20
"""A schedule of GPT-2 small training with 16 micro-batches is ~60 MB; anything past this is not ours."""


SCHEDULE_FILE = FileRules("a schedule file (JSON, from `accelsim compile`)", MAX_FILE_BYTES, ScheduleError,
                          lambda n: f"{n} bytes is larger than any schedule accelsim writes (limit {MAX_FILE_BYTES} "
                                    "bytes)",
                          missing="no such schedule file (write one with `accelsim compile`)")
SCHEDULE_JSON = JsonRules(ScheduleError, "a schedule",
                          lambda name: f"the number {name} is not allowed in a schedule (times, sizes and energies "
                                       "are finite)")


def _path(path: object, what: str) -> Path:
    if not isinstance(path, (str, Path)) or not str(path):
        raise ScheduleError(f"{what} needs a file path (str or pathlib.Path), got {path!r}")
    return Path(path)


def save_schedule(schedule: Schedule, path: str | Path) -> None:
    """Write `schedule` as JSON; the same schedule always gives a byte-identical file."""
    if not isinstance(schedule, Schedule):
        raise ScheduleError(f"save_schedule needs a Schedule (from A.compile), got {type(schedule).__name__}")
    path = _path(path, "save_schedule")
    kind = special_target(path)
    if kind is not None:
        raise ScheduleError(f"{path}: is {kind}, not a regular file; expected a file name to write the schedule to")
    text = json.dumps(schedule.model_dump(mode="json"), sort_keys=True, separators=(",", ":")) + "\n"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    except OSError as e:
        raise ScheduleError(f"{path}: cannot write the schedule: {e.strerror or e}") from None


def read_schedule(path: str | Path) -> Schedule:
    """Parse a schedule file into a Schedule (types and ranges only: see load_schedule)."""
    path = _path(path, "load_schedule")
    text = decode_utf8(read_regular(path, SCHEDULE_FILE), str(path), SCHEDULE_JSON)
    data = parse_json(text, str(path), SCHEDULE_JSON)
    if not isinstance(data, dict):
        raise ScheduleError(f"{path}: expected a JSON object (graph_name, tasks, tensors, ...) at the top "
                            f"level, got {type(data).__name__}")
    if data.get("version") != FORMAT_VERSION:
        raise ScheduleError(f"{path}: schedule format version {data.get('version')!r}, but this accelsim reads "
                            f"version {FORMAT_VERSION}: recompile with `accelsim compile`")
    try:
        return Schedule.model_validate_json(text)
    except ValidationError as e:
        errors = e.errors()
        lines = "\n".join(f"  {line}" for line in describe_errors(errors))
        raise ScheduleError(f"{path}: not a valid schedule: {len(errors)} problem(s)\n{lines}") from None

