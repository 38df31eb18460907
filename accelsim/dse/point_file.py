"""One stored sweep point on disk: a record -> the JSON of its point file (`encode`), and a point file ->
its record, or the reason it cannot be trusted (`read_point`). A point file is bound to its point id (the
hash of its configuration), the store version, the accelsim version that wrote it and a checksum of its
contents, so an edit, a file from another version or a damaged file is evaluated again, never reused."""
from __future__ import annotations

import errno
import hashlib
import json
import math
import os
import stat
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from accelsim.dse.metrics import METRICS

STORE_VERSION = 1
"""Part of every point's id: bumped when what a stored point means changes, so old points are not reused."""
MAX_POINT_FILE_BYTES = 1 << 20
"""A point file is about a kilobyte; a larger one is not read (a stray file, or /dev/zero behind a link)."""
ALWAYS_MEASURED = ("makespan_cycles", "tasks")
"""Metrics every point without an error has (its compiled step's run summary), so NaN there is damage."""


def accelsim_version() -> str:
    """The installed accelsim's version (what accelsim.__version__ holds), read here because the
    package root imports the sweep: importing it from the store would be a cycle."""
    try:
        return metadata.version("accelsim")
    except metadata.PackageNotFoundError:
        return "0+unknown"


def canonical_json(data: Any) -> str:
    """One text per value (sorted keys, no spaces), what the point id and the checksum hash."""
    return json.dumps(data, sort_keys=True, separators=(",", ":"), allow_nan=False, default=str)


def _checksum(data: dict[str, Any]) -> str:
    """sha256 of everything in a point file but its checksum, in canonical JSON."""
    return hashlib.sha256(canonical_json({k: v for k, v in data.items() if k != "checksum"}).encode()).hexdigest()


def _plain_float(x: float) -> float | str:
    """JSON has no NaN or infinity: they are written as the strings "nan", "inf", "-inf"."""
    return x if math.isfinite(x) else repr(x)


def encode(pid: str, record: dict[str, Any]) -> bytes:
    """The point file of point `pid` holding `record` (evaluate_point's), checksum last."""
    data = {"version": STORE_VERSION, "accelsim": accelsim_version(), "point_id": pid, "params": record["params"],
            "config_hash": record["config_hash"],
            "metrics": {k: _plain_float(v) for k, v in record["metrics"].items()},
            "fits": record["fits"], "feasible": record["feasible"], "error": record["error"],
            "wall_s": _plain_float(record["wall_s"])}
    data = json.loads(canonical_json(data))  # what a reader will parse, so its checksum is recomputed exactly
    data["checksum"] = _checksum(data)
    return (json.dumps(data, indent=1, allow_nan=False) + "\n").encode()


class Untrusted(Exception):
    """Why a point file is not used (the text completes "its file ...")."""


@dataclass(frozen=True)
class Loaded:
    """A stored point: its record, or None with `problem` saying why a file that is there was not used
    (None too when there is no file: the point was never finished)."""

    record: dict[str, Any] | None
    problem: str | None = None


def _kind(mode: int) -> str:
    kinds = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a named pipe"), (stat.S_ISCHR, "a character device"),
             (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))
    return next((name for test, name in kinds if test(mode)), "not a regular file")


def _read_bytes(path: Path) -> bytes | None:
    """The bytes of a regular file of at most MAX_POINT_FILE_BYTES; None when there is none. Opened
    without following a link and without blocking (a named pipe would wait for a writer forever)."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as e:
        raise Untrusted(f"cannot be examined ({e.strerror or e})") from None
    if stat.S_ISLNK(info.st_mode):
        try:
            target = os.readlink(path)
        except OSError:
            target = "?"
        raise Untrusted(f"is a symbolic link (to {target[:200]!r}), not a file the sweep wrote")
    if not stat.S_ISREG(info.st_mode):
        raise Untrusted(f"is {_kind(info.st_mode)}, not a file the sweep wrote")
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError as e:
        if e.errno == errno.ENOENT:
            return None
        raise Untrusted(f"cannot be opened ({e.strerror or e})") from None
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())  # what was opened, in case the name was swapped after the lstat
        if not stat.S_ISREG(info.st_mode):
            raise Untrusted(f"is {_kind(info.st_mode)}, not a file the sweep wrote")
        try:
            data = f.read(MAX_POINT_FILE_BYTES + 1)
        except OSError as e:
            raise Untrusted(f"cannot be read ({e.strerror or e})") from None
    if len(data) > MAX_POINT_FILE_BYTES:
        raise Untrusted(f"holds more than {MAX_POINT_FILE_BYTES:,} bytes (a point file is about a kilobyte)")
    return data


def _no_constant(name: str) -> Any:
    raise ValueError(f"the non-JSON constant {name}")


def _parse(data: bytes) -> dict[str, Any]:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise Untrusted(f"is not UTF-8 text (byte {e.start})") from None
    if not text.strip():
        raise Untrusted("is empty (a write cut short?)")
    try:
        parsed = json.loads(text, parse_constant=_no_constant)
    except json.JSONDecodeError as e:
        raise Untrusted(f"is not valid JSON ({e.msg} at line {e.lineno}, column {e.colno}; cut short?)") from None
    except (ValueError, RecursionError) as e:  # NaN literals, a 5000-digit integer, nesting past the stack
        raise Untrusted(f"is not valid JSON for a point ({type(e).__name__}: {str(e)[:100]})") from None
    if not isinstance(parsed, dict):
        raise Untrusted(f"holds a JSON {type(parsed).__name__}, expected an object")
    return parsed


def _float(field: str, x: Any) -> float:
    """A stored number: an int or float, or one of the strings "nan", "inf", "-inf"."""
    if isinstance(x, str) and x in ("nan", "inf", "-inf"):
        return float(x)
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        raise Untrusted(f"holds {field} = {str(x)[:60]!r} ({type(x).__name__}), expected a number")
    try:
        return float(x)
    except OverflowError:
        raise Untrusted(f"holds {field} = an integer of {len(str(x))} digits, beyond a float") from None


def _check_binding(data: dict[str, Any], pid: str, params: dict[str, Any]) -> None:
    """The file is the one this point's id, values, store and accelsim version would write, unedited."""
    if data.get("version") != STORE_VERSION:
        raise Untrusted(f"has store version {str(data.get('version'))[:40]!r}, this sweep writes {STORE_VERSION}")
    if data.get("point_id") != pid:
        raise Untrusted(f"names point id {str(data.get('point_id'))[:40]!r}, not {pid!r}")
    if data.get("params") != params:
        raise Untrusted("holds other parameter values than this point's")
    version = accelsim_version()
    if data.get("accelsim") != version:
        raise Untrusted(f"was written by accelsim {str(data.get('accelsim'))[:40]!r}, this is {version!r}")
    try:
        expected = _checksum(data)
    except ValueError:  # a value canonical JSON cannot hold
        expected = None
    if data.get("checksum") != expected:
        raise Untrusted("does not match its checksum (edited or damaged after it was written)")


def _record(data: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    """The record of a checked point file: every field of its type, every metric finite where it must be."""
    metrics = data.get("metrics")
    if not isinstance(metrics, dict):
        raise Untrusted(f"holds metrics of type {type(metrics).__name__}, expected an object")
    values = {name: math.nan for name in METRICS}
    values.update({k: _float(f"metric {k}", v) for k, v in metrics.items() if k in METRICS})
    for field, kinds in (("config_hash", (str, type(None))), ("error", str), ("fits", bool), ("feasible", bool)):
        if not isinstance(data.get(field), kinds):
            raise Untrusted(f"holds {field} = {str(data.get(field))[:60]!r}, of the wrong type")
    for name, x in values.items():
        if math.isinf(x) or (math.isnan(x) and not data["error"] and name in ALWAYS_MEASURED):
            raise Untrusted(f"holds metric {name} = {x} (a finished point's metrics are finite numbers)")
    wall_s = _float("wall_s", data.get("wall_s"))
    if not (math.isfinite(wall_s) and wall_s >= 0):
        raise Untrusted(f"holds wall_s = {wall_s} (expected seconds, 0 or more)")
    return {"params": dict(params), "config_hash": data["config_hash"], "metrics": values, "fits": data["fits"],
            "feasible": data["feasible"], "error": data["error"], "wall_s": wall_s}


def read_point(path: Path, pid: str, params: dict[str, Any]) -> Loaded:
    """The point stored at `path` for point `pid` with `params`, after every check above."""
    try:
        data = _read_bytes(path)
        if data is None:
            return Loaded(None)
        parsed = _parse(data)
        _check_binding(parsed, pid, params)
        return Loaded(_record(parsed, params))
    except Untrusted as e:
        return Loaded(None, str(e))
