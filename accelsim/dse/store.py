"""A sweep's output directory, safe against kill -9: one JSON file per finished point (written to a
temporary file, fsynced, then renamed over its name), the spec as given, and results.parquet rewritten
the same way. A rerun reads the points it finds (point_file.py: each checked before it is trusted) and
evaluates only the others."""
from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

from accelsim.errors import SweepError
from accelsim.schedule.plan import hw_hash
from accelsim.dse.point_file import STORE_VERSION, Loaded, canonical_json, encode, read_point
from accelsim.dse.spec import SweepSpec

POINT_ID_CHARS = 16


def point_ids(spec: SweepSpec, params_list: list[dict[str, Any]]) -> list[str]:
    """point_id of each of `params_list`, the spec's part (the hardware's hash above all) encoded once:
    the canonical JSON of a dict is its sorted keys' canonical values joined, so only the values differ."""
    fixed = {"version": STORE_VERSION, "hw": hw_hash(spec._base_hw), "hw_set": spec.hw_set, "model": spec.model,
             "model_options": spec.model_options, "options": spec.options.model_dump(mode="json")}
    parts = [f"{canonical_json(key)}:{canonical_json(value)}" for key, value in sorted(fixed.items())]
    before = sum(key < "params" for key in fixed)
    head = "{" + "".join(f"{part}," for part in parts[:before]) + '"params":'
    tail = "".join(f",{part}" for part in parts[before:]) + "}"
    return [hashlib.sha256(f"{head}{canonical_json(params)}{tail}".encode()).hexdigest()[:POINT_ID_CHARS]
            for params in params_list]


def point_id(spec: SweepSpec, params: dict[str, Any]) -> str:
    """A short sha256 of everything that decides a point's results: the base hardware's content (so an
    edited hardware file is never answered from old points), hw_set, the model and its options, the
    step options and the point's values. Not the name, search, constraints or metrics."""
    return point_ids(spec, [params])[0]


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

    def load(self, pid: str, params: dict[str, Any]) -> Loaded:
        """The stored record of point `pid` with `params`; without one, why its file was not used (None
        when there is no file: the point was not finished)."""
        return read_point(self.points_dir / f"{pid}.json", pid, params)

    def save(self, pid: str, record: dict[str, Any]) -> None:
        write_atomic(self.points_dir / f"{pid}.json", encode(pid, record))

    def save_spec(self, text: str) -> None:
        write_atomic(self.out / "spec.yaml", text.encode())

    def save_results(self, table: Any) -> None:
        """Write a pyarrow Table as results.parquet, atomically."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        sink = pa.BufferOutputStream()
        pq.write_table(table, sink)
        write_atomic(self.results_path, sink.getvalue().to_pybytes())
