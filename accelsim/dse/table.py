"""Finished points -> the typed results table: point, point_id, config_hash, one column per parameter
(named by its key, as written in the spec), a number beside each parameter whose values are quantities
("8 MiB" -> `<key>_bytes` 8388608.0; also `_bytes_per_s` and `_hz`), one column per metric, feasible,
violated (what made an infeasible point infeasible), error, wall_s; sorted by point."""
from __future__ import annotations

from typing import Any

from accelsim.dse.checks import constraints, metric_columns
from accelsim.dse.constraints import Constraint
from accelsim.dse.deps import require
from accelsim.dse.params import parameters
from accelsim.dse.spec import SweepSpec
from accelsim.hw.quantity import parse_bandwidth, parse_bytes, parse_hz

QUANTITY_UNITS = (("bytes_per_s", parse_bandwidth), ("bytes", parse_bytes), ("hz", parse_hz))
"""How a parameter's quantity strings read as numbers, tried in this order (a bandwidth first: "17 GB/s" is not
a size), and the suffix of the numeric column beside it."""


def feasible(record: dict[str, Any], cons: list[Constraint]) -> bool:
    """No error, and every constraint holds (judged now, so a stored point meets edited constraints)."""
    return not record["error"] and all(c.holds(record["metrics"], record["fits"]) for c in cons)


def violated(record: dict[str, Any], cons: list[Constraint]) -> str:
    """Why a point is infeasible, in the spec's own words: "error" when it failed, else the constraints it does
    not meet, joined by "; " ("" for a feasible point)."""
    if record["error"]:
        return "error"
    return "; ".join(c.text for c in cons if not c.holds(record["metrics"], record["fits"]))


def quantity_column(values: list[Any]) -> tuple[str, list[float]] | None:
    """(unit suffix, magnitudes) when every value is a quantity string of one kind ("8 MiB", "600 GB/s",
    "700 MHz"), else None: the number a pandas user filters and plots by, beside the string as written."""
    if not values or not all(isinstance(v, str) for v in values):
        return None
    for suffix, parse in QUANTITY_UNITS:
        try:
            return suffix, [float(parse(v)) for v in values]
        except (ValueError, TypeError):
            continue
    return None


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
        values = [r["params"][p.key] for r in recs]
        columns[p.key] = pa.array(values, arrow_types[p.dtype])
        quantity = quantity_column(values) if p.dtype == "str" else None
        if quantity is not None and f"{p.key}_{quantity[0]}" not in spec.parameters:
            columns[f"{p.key}_{quantity[0]}"] = pa.array(quantity[1], pa.float64())
    for name in metric_columns(spec):
        columns[name] = pa.array([r["metrics"][name] for r in recs], pa.float64())
    cons = constraints(spec)
    columns["feasible"] = pa.array([feasible(r, cons) for r in recs], pa.bool_())
    columns["violated"] = pa.array([violated(r, cons) for r in recs], pa.string())
    columns["error"] = pa.array([r["error"] for r in recs], pa.string())
    columns["wall_s"] = pa.array([r["wall_s"] for r in recs], pa.float64())
    return pa.table(columns)
