"""The metrics a sweep records per point, as a typed table: name -> unit, meaning, and how to read it
from what one point produced (run summary, simulation, check). Missing values are NaN."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable


@dataclass(frozen=True)
class Outcome:
    """What evaluating one point produced: `accelsim run`'s summary, the simulated makespan (None when
    the options did not simulate) and whether the check passed (None when they did not check)."""

    summary: dict[str, Any]
    simulated_makespan_cycles: int | None = None
    check_passed: bool | None = None


@dataclass(frozen=True)
class MetricDef:
    """One column of the results table. `needs`: the option (`simulate`, `check`) without which the
    metric is always NaN, so a spec that asks for it without the option is refused."""

    name: str
    unit: str
    description: str
    read: Callable[[Outcome], Any]
    needs: str | None = None


def _summary(key: str) -> Callable[[Outcome], Any]:
    # .get: the area/energy figures are absent from older summaries and None without energy data
    return lambda o: o.summary.get(key)


def _peak_memory_bytes(o: Outcome) -> float | None:
    peaks = o.summary.get("peak_memory_bytes") or {}
    return max(peaks.values(), default=None)


def _peak_memory_fraction(o: Outcome) -> float | None:
    peaks = o.summary.get("peak_memory_bytes") or {}
    caps = o.summary.get("memory_capacity_bytes") or {}
    fractions = [peak / caps[m] for m, peak in peaks.items() if caps.get(m)]
    return max(fractions, default=None)


def _check_passed(o: Outcome) -> float | None:
    return None if o.check_passed is None else float(o.check_passed)


_DEFS = (
    MetricDef("makespan_cycles", "cycles", "compiled length of one step", _summary("makespan_cycles")),
    MetricDef("makespan_s", "s", "compiled length of one step", _summary("makespan_s")),
    MetricDef("throughput_samples_per_s", "samples/s", "samples of a step over its makespan",
              _summary("throughput_samples_per_s")),
    MetricDef("latency_s", "s", "mean time from an input's first task to its last", _summary("latency_s")),
    MetricDef("bound_ratio", "ratio", "makespan over the best time any schedule could reach", _summary("bound_ratio")),
    MetricDef("tasks", "tasks", "tasks in the compiled step", _summary("tasks")),
    MetricDef("peak_memory_bytes", "bytes", "the largest peak occupancy over the memories", _peak_memory_bytes),
    MetricDef("peak_memory_fraction", "ratio", "the largest peak occupancy over capacity over the memories",
              _peak_memory_fraction),
    MetricDef("allreduce_cycles", "cycles", "cycles of collectives (each once)", _summary("allreduce_cycles")),
    MetricDef("transfer_cycles", "cycles", "cycles of chip-to-chip transfers (summed)", _summary("transfer_cycles")),
    MetricDef("simulated_makespan_cycles", "cycles", "makespan of the SimPy replay of the schedule",
              lambda o: o.simulated_makespan_cycles, needs="simulate"),
    MetricDef("check_passed", "1/0", "1.0 when the numba kernels matched the float64 reference", _check_passed,
              needs="check"),
    MetricDef("energy_j", "J", "energy of one step", _summary("energy_j")),
    MetricDef("energy_per_sample_j", "J/sample", "energy of one step over its samples", _summary("energy_per_sample_j")),
    MetricDef("power_w", "W", "energy of one step over its makespan", _summary("power_w")),
    MetricDef("tops_per_w", "TOPS/W", "operations per second per watt", _summary("tops_per_w")),
    MetricDef("area_mm2", "mm^2", "silicon area of the chips in use", _summary("area_mm2")),
    MetricDef("throughput_per_mm2", "samples/s/mm^2", "throughput over area", _summary("throughput_per_mm2")),
)
METRICS: dict[str, MetricDef] = {m.name: m for m in _DEFS}

DEFAULT_OBJECTIVES: dict[str, str] = {"throughput_samples_per_s": "max", "energy_per_sample_j": "min",
                                      "area_mm2": "min"}
"""Objectives of the Pareto plots of a grid or random sweep that names none: those among its metrics."""


def as_float(value: Any) -> float:
    """A metric value as a float (ints exact up to 2**53); NaN for None or anything that is not a number."""
    if isinstance(value, (bool, int, float)):
        x = float(value)
        return math.nan if math.isnan(x) else x  # one NaN bit pattern, so equal tables are equal bytes
    return math.nan


def measure(outcome: Outcome) -> dict[str, float]:
    """Every metric of the table for one point, NaN where the outcome does not have it."""
    return {name: as_float(m.read(outcome)) for name, m in METRICS.items()}


def nan_metrics() -> dict[str, float]:
    """The metrics of a point that produced nothing (it failed before its schedule was summarized)."""
    return {name: math.nan for name in METRICS}
