"""Finished points -> the typed results table: point, point_id, config_hash, one column per parameter
(named by its key), one per metric, feasible, error, wall_s; sorted by point."""
from __future__ import annotations

from typing import Any

from accelsim.dse.checks import constraints, metric_columns
from accelsim.dse.constraints import Constraint
from accelsim.dse.deps import require
from accelsim.dse.params import parameters
from accelsim.dse.spec import SweepSpec


def feasible(record: dict[str, Any], cons: list[Constraint]) -> bool:
    """No error, and every constraint holds (judged now, so a stored point meets edited constraints)."""
    return not record["error"] and all(c.holds(record["metrics"], record["fits"]) for c in cons)


def results_table(spec: SweepSpec, rows: list[tuple[int, str]], records: dict[str, dict[str, Any]]) -> Any:
    """A pyarrow Table of the rows (point index, point id) that have a record, sorted by point. Built
    from typed arrays without pandas metadata, so the same points give the same bytes."""
    pa = require("pyarrow", "sweep")
    arrow_types = {"bool": pa.bool_(), "int": pa.int64(), "float": pa.float64(), "str": pa.string()}
    done = sorted((index, pid) for index, pid in rows if pid in records)
    recs = [records[pid] for _, pid in done]
    columns: dict[str, Any] = {
        "point": pa.array([index for index, _ in done], pa.int64()),
        "point_id": pa.array([pid for _, pid in done], pa.string()),
        "config_hash": pa.array([r["config_hash"] for r in recs], pa.string()),
    }
    for p in parameters(spec):
        columns[p.key] = pa.array([r["params"][p.key] for r in recs], arrow_types[p.dtype])
    for name in metric_columns(spec):
        columns[name] = pa.array([r["metrics"][name] for r in recs], pa.float64())
    cons = constraints(spec)
    columns["feasible"] = pa.array([feasible(r, cons) for r in recs], pa.bool_())
    columns["error"] = pa.array([r["error"] for r in recs], pa.string())
    columns["wall_s"] = pa.array([r["wall_s"] for r in recs], pa.float64())
    return pa.table(columns)
