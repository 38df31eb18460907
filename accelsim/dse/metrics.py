"""The metrics a sweep records per point, as a typed table: name -> unit, meaning, and what it reads from
what one point produced (a RunSummary field by name, checked against RunSummary when the table is built,
or the simulation and check outcomes). Missing values are NaN."""
from __future__ import annotations

import difflib
import math
import typing
from dataclasses import dataclass, fields
from typing import Any, Callable

from accelsim.errors import AccelsimError
from accelsim.summary import RunSummary

NUMERIC_TYPES = frozenset({int, float, bool, int | None, float | None, bool | None})
"""What a summary field must hold to be a metric: a number (None where the hardware lacks the figures)."""


def _summary_numbers() -> dict[str, Any]:
    """RunSummary's fields and properties -> their types (a property's by its return annotation)."""
    hints = typing.get_type_hints(RunSummary)
    out: dict[str, Any] = {f.name: hints[f.name] for f in fields(RunSummary)}
    for name, member in vars(RunSummary).items():
        if isinstance(member, property) and member.fget is not None:
            out[name] = typing.get_type_hints(member.fget).get("return")
    return out


SUMMARY_TYPES: dict[str, Any] = _summary_numbers()
"""What a metric may read from a RunSummary, with its type."""


@dataclass(frozen=True)
class Outcome:
    """What evaluating one point produced: `accelsim run`'s summary, the simulated makespan (None when
    the options did not simulate) and whether the check passed (None when they did not check)."""

    summary: RunSummary
    simulated_makespan_cycles: int | None = None
    check_passed: bool | None = None


@dataclass(frozen=True)
class MetricDef:
    """One column of the results table. `field`: the numeric RunSummary field (or property) it reads, by
    default its own name; `read` instead, for what the summary does not hold. `needs`: the option
    (`simulate`, `check`) without which the metric is always NaN, so a spec that asks for it without the
    option is refused. A field RunSummary lacks, or one that is not a number, is refused when the table is
    built (at import), so a misspelled metric cannot become a column of NaN."""

    name: str
    unit: str
    description: str
    read: Callable[[Outcome], Any] | None = None
    needs: str | None = None
    field: str | None = None

    def __post_init__(self) -> None:
        if self.read is not None:
            if self.field is not None:
                raise AccelsimError(f"metric {self.name!r}: give a RunSummary field or a read function, not both")
            return
        name = self.field or self.name
        if name not in SUMMARY_TYPES:
            close = difflib.get_close_matches(name, SUMMARY_TYPES, n=3)
            hint = f" (did you mean {' or '.join(map(repr, close))}?)" if close else ""
            raise AccelsimError(f"metric {self.name!r} reads RunSummary.{name}, which RunSummary does not have"
                                f"{hint}; its fields: {', '.join(SUMMARY_TYPES)}")
        if SUMMARY_TYPES[name] not in NUMERIC_TYPES:
            raise AccelsimError(f"metric {self.name!r} reads RunSummary.{name}, of type {SUMMARY_TYPES[name]}; a "
                                f"metric is a number (int, float or bool, or None where absent)")
        object.__setattr__(self, "field", name)

    def value(self, outcome: Outcome) -> Any:
        """The metric's value for one point (None where the point does not have it)."""
        return self.read(outcome) if self.read is not None else getattr(outcome.summary, self.field)


def _check_passed(o: Outcome) -> float | None:
    return None if o.check_passed is None else float(o.check_passed)


_DEFS = (
    MetricDef("makespan_cycles", "cycles", "compiled length of one step"),
    MetricDef("makespan_s", "s", "compiled length of one step"),
    MetricDef("throughput_samples_per_s", "samples/s", "samples of a step over its makespan"),
    MetricDef("latency_s", "s", "mean time from an input's first task to its last"),
    MetricDef("bound_ratio", "ratio", "makespan over the best time any schedule could reach"),
    MetricDef("tasks", "tasks", "tasks in the compiled step"),
    MetricDef("peak_memory_bytes", "bytes", "the largest peak occupancy over the memories",
              field="largest_peak_memory_bytes"),
    MetricDef("peak_memory_fraction", "ratio", "the largest peak occupancy over capacity over the memories",
              field="largest_peak_memory_fraction"),
    MetricDef("allreduce_cycles", "cycles", "cycles of collectives (each once)"),
    MetricDef("transfer_cycles", "cycles", "cycles of chip-to-chip transfers (summed)"),
    MetricDef("simulated_makespan_cycles", "cycles", "makespan of the SimPy replay of the schedule",
              lambda o: o.simulated_makespan_cycles, needs="simulate"),
    MetricDef("check_passed", "1/0", "1.0 when the numba kernels matched the float64 reference", _check_passed,
              needs="check"),
    MetricDef("energy_j", "J", "energy of one step"),
    MetricDef("energy_per_sample_j", "J/sample", "energy of one step over its samples"),
    MetricDef("power_w", "W", "energy of one step over its makespan"),
    MetricDef("static_energy_j", "J", "leakage and DRAM background power of every chip over the makespan"),
    MetricDef("dynamic_energy_j", "J", "arithmetic, unit buffers, memory reads and writes and links of one step"),
    MetricDef("arithmetic_energy_j", "J", "every unit's operations at its precision in one step"),
    MetricDef("memory_energy_j", "J", "reads and writes of every memory in one step"),
    MetricDef("off_chip_energy_j", "J", "reads and writes of DRAM and HBM in one step"),
    MetricDef("link_energy_j", "J", "bytes over the links between chips in one step, each link crossed"),
    MetricDef("tops_per_w", "TOPS/W", "operations per second per watt"),
    MetricDef("area_mm2", "mm^2", "silicon area of the chips in use"),
    MetricDef("throughput_per_mm2", "samples/s/mm^2", "throughput over area"),
    # the rest of what `accelsim run` prints, so a sweep can rank or constrain by it
    MetricDef("training", "1/0", "1.0 for a training step, 0.0 for inference"),
    MetricDef("samples_per_step", "samples", "inputs one step processes (micro-batches x replicas x batch)"),
    MetricDef("mac_utilization", "ratio", "useful MACs over the MAC slots of the array units in use"),
    MetricDef("achieved_tops", "TOPS", "operations per step over the makespan"),
    MetricDef("peak_tops", "TOPS", "the peak of the units in use"),
    MetricDef("energy_pj", "pJ", "energy of one step (energy_j in picojoules)"),
    MetricDef("ops_per_step", "ops", "operations of one step (a MAC is two)"),
    MetricDef("critical_path_cycles", "cycles", "the longest dependence chain, every task at its own cost"),
    MetricDef("resource_bound_cycles", "cycles", "the busiest unit kind's work over its instances"),
    MetricDef("bound_cycles", "cycles", "the larger of the critical path and resource bounds"),
    MetricDef("model_flops_per_step", "FLOP", "model FLOPs of one training step (Megatron's convention)"),
    MetricDef("hardware_flops_per_step", "FLOP", "FLOPs the chips execute in one step, recomputation included"),
    MetricDef("model_tflops_per_chip", "TFLOP/s", "model FLOPs per second per chip"),
    MetricDef("hardware_tflops_per_chip", "TFLOP/s", "hardware FLOPs per second per chip"),
    MetricDef("peak_tflops_per_chip", "TFLOP/s", "a chip's dense tensor peak"),
    MetricDef("mfu", "ratio", "model FLOPs utilization: model TFLOP/s per chip over its peak"),
)
METRICS: dict[str, MetricDef] = {m.name: m for m in _DEFS}

DEFAULT_OBJECTIVES: dict[str, str] = {"throughput_samples_per_s": "max", "energy_per_sample_j": "min",
                                      "area_mm2": "min"}
"""Objectives of the Pareto plots of a grid or random sweep that names none: those among its metrics."""


def _close_metrics(name: str) -> list[str]:
    """The metrics a misspelled or shortened `name` may mean, in the table's order: close in spelling as a
    whole or by first word ('thruput' -> throughput_*), or containing it ('energy' -> energy_j, ...)."""
    text = name.lower()
    head = text.split("_")[0]
    close = set(difflib.get_close_matches(text, METRICS, n=3))
    close |= {m for m in METRICS if difflib.SequenceMatcher(None, head, m.split("_")[0]).ratio() >= 0.75}
    close |= {m for m in METRICS if len(text) >= 3 and text in m}
    return [m for m in METRICS if m in close]


def unknown_metric(name: object, shown: str | None = None) -> str:
    """Why `name` is refused as a metric, for a spec's problem line: the names it may mean, then every valid
    one (`shown`: how to quote the name, default its repr)."""
    close = _close_metrics(name) if isinstance(name, str) else []
    hint = f" (did you mean {', '.join(map(repr, close))}?)" if close else ""
    return f"unknown metric {shown or repr(name)}{hint}; known metrics: {', '.join(METRICS)}"


def as_float(value: Any) -> float:
    """A metric value as a float (ints exact up to 2**53); NaN for None or anything that is not a number."""
    if isinstance(value, (bool, int, float)):
        x = float(value)
        return math.nan if math.isnan(x) else x  # one NaN bit pattern, so equal tables are equal bytes
    return math.nan


def measure(outcome: Outcome) -> dict[str, float]:
    """Every metric of the table for one point, NaN where the outcome does not have it."""
    return {name: as_float(m.value(outcome)) for name, m in METRICS.items()}


def nan_metrics() -> dict[str, float]:
    """The metrics of a point that produced nothing (it failed before its schedule was summarized)."""
    return {name: math.nan for name in METRICS}
