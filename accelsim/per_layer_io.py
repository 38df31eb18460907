"""Writing a LayerReport to the file a user named (LayerReport, path -> FILE.csv or FILE.json): the suffix picks
the format. A path that is a directory, a special file (FIFO, device, socket) or lies below a file is refused
before anything is written, so a report can neither hang on a pipe nor land somewhere unexpected."""
from __future__ import annotations

import csv
import io
import json
import math
import os
import stat
from pathlib import Path

from accelsim.errors import AccelsimError
from accelsim.per_layer import LayerReport
from accelsim.safe_file import SPECIAL_KINDS

FORMATS = (".csv", ".json")


class ReportPathError(AccelsimError):
    """A per-layer report path that cannot be written: its suffix, a directory, a special file, a file above it."""


def _finite(value: object) -> object:
    """JSON has no NaN or infinity: write them as strings, as every accelsim JSON does."""
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def check_report_path(path: str | Path, option: str = "--report") -> Path:
    """`path` as a Path if a report may be written there, else ReportPathError naming it and the reason."""
    if "\x00" in str(path):  # os.stat would raise ValueError: only a caller from Python can pass one
        raise ReportPathError(f"{option} {str(path)!r}: a file name cannot contain a NUL byte")
    p = Path(path)
    if p.suffix.lower() not in FORMATS:
        raise ReportPathError(f"{option} {path}: the file name must end in .csv or .json (the format), got "
                              f"{p.suffix or 'no suffix'!r}")
    for parent in p.parents:
        if parent.exists() and not parent.is_dir():
            raise ReportPathError(f"{option} {path}: {parent} is an existing file, not a directory")
    try:
        mode = os.stat(p).st_mode
    except FileNotFoundError:
        return p
    except OSError as e:
        raise ReportPathError(f"{option} {path}: cannot be examined ({e.strerror or e}); expected a file "
                              "name") from None
    if stat.S_ISDIR(mode):
        raise ReportPathError(f"{option} {path}: is a directory; expected a file name ending in .csv or .json")
    kind = next((what for test, what in SPECIAL_KINDS if test(mode)), None)
    if kind is not None or not stat.S_ISREG(mode):
        raise ReportPathError(f"{option} {path}: is {kind or 'not a regular file'}; expected a regular file name "
                              "ending in .csv or .json")
    return p


def report_text(report: LayerReport, fmt: str) -> str:
    """The report as CSV (one row per layer, LayerReport.columns) or JSON (LayerReport.to_dict: per-node detail)."""
    if fmt == ".json":
        return json.dumps(_finite(report.to_dict()), indent=1, allow_nan=False) + "\n"
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=report.columns(), lineterminator="\n")
    writer.writeheader()
    for row in report.rows():
        writer.writerow({k: "" if v is None else v for k, v in row.items()})
    return out.getvalue()


def write_layer_report(report: LayerReport, path: str | Path, option: str = "--report") -> Path:
    """Write `report` to `path` (.csv or .json, check_report_path's rules); returns the path written."""
    p = check_report_path(path, option)
    text = report_text(report, p.suffix.lower())
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        # non-blocking and checked again once open: a pipe that appeared since the check cannot hang the write
        fd = os.open(p, os.O_WRONLY | os.O_CREAT | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0), 0o644)
        with os.fdopen(fd, "w") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                raise ReportPathError(f"{option} {path}: is not a regular file; expected a file name ending in "
                                      ".csv or .json")
            f.truncate(0)
            f.write(text)
    except OSError as e:
        raise ReportPathError(f"{option} {path}: cannot be written ({e.strerror or e})") from None
    return p
