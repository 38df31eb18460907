"""A sweep's output directory, safe against kill -9: one JSON file per finished point (written to a
temporary file, fsynced, then renamed over its name), the spec as given, and results.parquet rewritten
the same way. A rerun reads the points it finds and evaluates only the others."""
from __future__ import annotations

import hashlib
import json
import math
import os
from pathlib import Path
from typing import Any

from accelsim.errors import SweepError
from accelsim.schedule.plan import hw_hash
from accelsim.dse.metrics import METRICS
from accelsim.dse.spec import SweepSpec

STORE_VERSION = 1
"""Part of every point's id: bumped when what a stored point means changes, so old points are not reused."""
POINT_ID_CHARS = 16


def _canonical(data: Any) -> str:
    return json.dumps(data, sort_keys=True, separators=(",", ":"), allow_nan=False, default=str)


def point_id(spec: SweepSpec, params: dict[str, Any]) -> str:
    """A short sha256 of everything that decides a point's results: the base hardware's content (so an
    edited hardware file is never answered from old points), hw_set, the model and its options, the
    step options and the point's values. Not the name, search, constraints or metrics."""
    content = {"version": STORE_VERSION, "hw": hw_hash(spec._base_hw), "hw_set": spec.hw_set, "model": spec.model,
               "model_options": spec.model_options, "options": spec.options.model_dump(mode="json"), "params": params}
    return hashlib.sha256(_canonical(content).encode()).hexdigest()[:POINT_ID_CHARS]


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some file systems cannot sync a directory; the rename is still atomic
    finally:
        os.close(fd)


def write_atomic(path: Path, data: bytes) -> None:
    """Replace `path` with `data` so that a reader (or a rerun after kill -9) sees the old file or the
    new one, never a part: a temporary file in the same directory, flushed and fsynced, then renamed."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise SweepError(f"cannot write {path}: {e.strerror or e}") from None
    _fsync_dir(path.parent)


def _plain_float(x: float) -> float | str:
    """JSON has no NaN or infinity: they are written as the strings "nan", "inf", "-inf"."""
    return x if math.isfinite(x) else repr(x)


def _read_float(x: Any) -> float:
    if isinstance(x, bool) or not isinstance(x, (int, float, str)):
        raise ValueError(f"not a number: {x!r}")
    if isinstance(x, str) and x not in ("nan", "inf", "-inf"):
        raise ValueError(f"not a number: {x!r}")
    return float(x)


def _record_from_json(data: Any, pid: str, params: dict[str, Any]) -> dict[str, Any] | None:
    """A stored point's record, or None when the file is not one for these values (an edit, a file
    from another version): such a point is evaluated again."""
    try:
        if data.get("version") != STORE_VERSION or data["point_id"] != pid or data["params"] != params:
            return None
        metrics = {name: math.nan for name in METRICS}
        metrics.update({k: _read_float(v) for k, v in data["metrics"].items() if k in METRICS})
        record = {"params": dict(params), "config_hash": data["config_hash"], "metrics": metrics,
                  "fits": data["fits"], "feasible": data["feasible"], "error": data["error"],
                  "wall_s": _read_float(data["wall_s"])}
    except (AttributeError, KeyError, TypeError, ValueError):
        return None
    ok = (isinstance(record["config_hash"], (str, type(None))) and isinstance(record["error"], str)
          and isinstance(record["fits"], bool) and isinstance(record["feasible"], bool))
    return record if ok else None


class PointStore:
    """DIR/points/<point_id>.json, DIR/spec.yaml and DIR/results.parquet."""

    def __init__(self, out: str | Path) -> None:
        self.out = Path(out)
        self.points_dir = self.out / "points"
        try:
            self.points_dir.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise SweepError(f"cannot create the sweep directory {self.out}: {e.strerror or e}") from None

    @property
    def results_path(self) -> Path:
        return self.out / "results.parquet"

    def load(self, pid: str, params: dict[str, Any]) -> dict[str, Any] | None:
        """The stored record of point `pid` with `params`, or None (not finished, or not readable)."""
        path = self.points_dir / f"{pid}.json"
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return None
        try:
            data = json.loads(text)
        except (json.JSONDecodeError, RecursionError):
            return None
        return _record_from_json(data, pid, params)

    def save(self, pid: str, record: dict[str, Any]) -> None:
        data = {"version": STORE_VERSION, "point_id": pid, "params": record["params"],
                "config_hash": record["config_hash"],
                "metrics": {k: _plain_float(v) for k, v in record["metrics"].items()},
                "fits": record["fits"], "feasible": record["feasible"], "error": record["error"],
                "wall_s": _plain_float(record["wall_s"])}
        text = json.dumps(data, indent=1, allow_nan=False, default=str) + "\n"
        write_atomic(self.points_dir / f"{pid}.json", text.encode())

    def save_spec(self, text: str) -> None:
        write_atomic(self.out / "spec.yaml", text.encode())

    def save_results(self, table: Any) -> None:
        """Write a pyarrow Table as results.parquet, atomically."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        sink = pa.BufferOutputStream()
        pq.write_table(table, sink)
        write_atomic(self.results_path, sink.getvalue().to_pybytes())
