"""How `run` and `simulate` print a run summary (accelsim.report.run_summary, a RunSummary read by its
attributes) and how `check` prints a check report: lines and tables of formatted numbers (accelsim/fmt.py). A
figure of the summary's JSON this module does not print in its own words is still printed, by its name,
formatted by its unit suffix."""
from __future__ import annotations

import math
from typing import Any

from rich.console import Console
from rich.table import Table

from accelsim import fmt
from accelsim.metrics import Rates
from accelsim.schedule.options import StepOptions
from accelsim.schedule.plan import Schedule
from accelsim.summary import RunSummary

LATENCY_MEANS = "mean over inputs of an input's first task's start to its last task's end"
"""What "latency" is, in one phrase (run_summary's latency_definition says it in full)."""

SHOWN = frozenset((
    "graph", "hw", "hw_overrides", "training", "options", "samples_per_step", "tasks", "makespan_cycles",
    "makespan_s", "throughput_samples_per_s", "latency_s", "utilization", "mac_utilization", "achieved_tops",
    "peak_tops", "per_unit", "per_chip", "peak_memory_bytes", "memory_capacity_bytes", "allreduce_cycles",
    "transfer_cycles", "energy_pj", "energy_j", "energy_per_sample_j", "power_w", "static_energy_j",
    "energy_by_component_pj", "ops_per_step", "tops_per_w",
    "area_mm2", "chip_area_mm2", "throughput_per_mm2", "critical_path_cycles", "resource_bound_cycles",
    "resource_bound_unit", "bound_cycles", "bound_ratio", "model_flops_per_step", "hardware_flops_per_step",
    "model_tflops_per_chip", "hardware_tflops_per_chip", "peak_tflops_per_chip", "mfu", "peak_memory_per_chip",
    "exposed_communication"))
"""Keys of RunSummary.to_dict() printed in their own words below (or plumbing). Keys ending in _definition
are the metrics' definitions, kept for the JSON; the terminal says each in a phrase."""



def step_words(o: StepOptions, samples_per_step: int) -> list[str]:
    """The parallelism a step header states, at task and at stage granularity alike (run's header,
    stage_step.print_stage_step): samples per step, micro-batches, replicas, stages and the options that
    shard it."""
    parts = [fmt.plural(samples_per_step, "sample") + " per step",
             fmt.plural(o.microbatches, "micro-batch", "micro-batches"), fmt.plural(o.data_parallel, "replica"),
             fmt.plural(o.pipeline_stages, "stage")]
    parts += [f"{o.virtual_stages} virtual stages"] * (o.virtual_stages > 1)
    parts += [f"{o.tensor_parallel} tensor-parallel ranks"] * (o.tensor_parallel > 1)
    parts += [f"ZeRO stage {o.zero}"] * bool(o.zero)
    return parts

def exact_line(schedule: Schedule) -> str | None:
    """What the exact mode proved, in one line ("exact: optimal (proved) ..."); None without it."""
    e = schedule.exact
    if e is None:
        return None
    what = "optimal (proved)" if e.status == "optimal" else f"within {100 * e.gap:.2f}% of optimal"
    return (f"exact: {what}, makespan {fmt.cycles(schedule.makespan_cycles)} (bound {fmt.count(e.bound_cycles)}; "
            f"list schedule {fmt.count(e.list_makespan_cycles)}; CP-SAT budget {fmt.number(e.time_limit_s)} s)")


def _compute(rates: Rates) -> str | None:
    """"29.47 TOPS achieved of 741.9 TOPS peak (4.0% of peak MACs)"; None without an arithmetic peak (no unit
    kind in use is an array or a vector unit: there is nothing to be a fraction of)."""
    if not rates.peak_tops:
        return None
    return (f"{fmt.metric('achieved_tops', rates.achieved_tops)} achieved of "
            f"{fmt.metric('peak_tops', rates.peak_tops)} peak ({fmt.percent(rates.mac_utilization)} of peak MACs)")


def efficiency_lines(s: RunSummary) -> list[str]:
    """Energy, power and area of a run summary (report.efficiency), where the hardware has the figures."""
    lines = []
    if s.energy_j is not None:
        static = "" if s.static_energy_j is None else f", {fmt.si(s.static_energy_j, 'J')} of it static"
        lines.append(f"energy      {fmt.si(s.energy_j, 'J')} per step{static}, {fmt.si(s.energy_per_sample_j, 'J')} "
                     f"per sample; power {fmt.si(s.power_w, 'W')} (dynamic and static); "
                     f"{fmt.si(s.tops_per_w * 1e12, 'OPS/W')} over {fmt.si(s.ops_per_step, 'op')} per step")
    if s.area_mm2 is not None:
        chips = ", ".join(f"{a.name} {fmt.number(a.area_mm2)} mm^2" for a in s.chip_areas or ())
        lines.append(f"area        {fmt.number(s.area_mm2)} mm^2 modelled for the machine (per chip: {chips}; "
                     f"datapaths and SRAM only); {fmt.rate(s.throughput_per_mm2)} per mm^2")
    return lines


def training_lines(s: RunSummary) -> list[str]:
    """A training step's FLOPs, TFLOP/s per chip both ways and MFU (step_flops.FLOPS_DEFINITION), in two
    lines; none for an inference step."""
    if s.model_flops_per_step is None:
        return []
    mfu = "n/a (no unit runs tensor ops)" if s.mfu is None else f"{fmt.number(100 * s.mfu)}%"
    return [f"FLOPs       model {fmt.si(s.model_flops_per_step, 'FLOP')} per step (3 x forward tensor-op FLOPs), "
            f"hardware {fmt.si(s.hardware_flops_per_step, 'FLOP')} (every executed matmul/conv, recomputation "
            "included)",
            f"per chip    model {fmt.si(s.model_tflops_per_chip * 1e12, 'FLOP/s')}, hardware "
            f"{fmt.si(s.hardware_tflops_per_chip * 1e12, 'FLOP/s')}, of {fmt.si(s.peak_tflops_per_chip * 1e12, 'FLOP/s')} "
            f"peak of its tensor units: MFU {mfu}"]


def exposed_lines(s: RunSummary) -> list[str]:
    """Exposed communication per kind, where the step communicates: the chip that waits longest and how much of
    the kind's time in flight there computation did not hide."""
    if not s.exposed_communication:
        return []
    parts = [f"{e.label} {fmt.cycles(e.exposed_cycles)} of {fmt.count(e.in_flight_cycles)} in flight on chip{e.chip} "
             f"({fmt.percent(e.hidden_fraction)} hidden)" for e in s.exposed_communication]
    return ["exposed communication (a chip idle while it waits on it, worst chip): " + "; ".join(parts)]


def _other_lines(key: str, value: Any) -> list[str]:
    """A key this module does not know: "label  value"; a dict of dicts (per unit, per chip) a line each."""
    label = key.replace("_", " ")
    if isinstance(value, dict) and any(isinstance(v, dict) for v in value.values()):
        return [f"{label}:"] + [f"  {name}: " + (", ".join(f"{k.replace('_', ' ')} {fmt.metric(k, x)}"
                                                          for k, x in v.items()) if isinstance(v, dict)
                                                 else fmt.metric(key, v)) for name, v in value.items()]
    return [f"{label:<11} {fmt.metric(key, value)}"]


def summary_lines(s: RunSummary, schedule: Schedule) -> list[str]:
    """A compiled step's run_summary in lines (indented): times, rates, compute, efficiency, bounds,
    communication, then any figure of its JSON beyond those."""
    lines = [f"makespan    {fmt.cycles(s.makespan_cycles)} = {fmt.seconds(s.makespan_s)} per step",
             f"throughput  {fmt.rate(s.throughput_samples_per_s)}",
             f"latency     {fmt.seconds(s.latency_s)} per input ({LATENCY_MEANS})"]
    compute = _compute(s.rates)
    if compute is not None:
        lines.append(f"compute     {compute}")
    lines += efficiency_lines(s)
    lines.append(f"bound       {fmt.cycles(s.bound_cycles)} (critical path {fmt.count(s.critical_path_cycles)}, "
                 f"busiest resource {s.resource_bound_unit} {fmt.count(s.resource_bound_cycles)}); "
                 f"makespan/bound {fmt.ratio(s.bound_ratio)}")
    if schedule.exact is not None:
        lines.append(exact_line(schedule))
    if s.allreduce_cycles or s.transfer_cycles:
        lines.append(f"communication: all-reduce and other collectives {fmt.cycles(s.allreduce_cycles)} "
                     f"(each once), transfers {fmt.cycles(s.transfer_cycles)} (summed over tasks)")
    lines += exposed_lines(s)
    lines += training_lines(s)
    for key, value in s.to_dict().items():
        if key not in SHOWN and not key.endswith("_definition"):
            lines += _other_lines(key, value)
    return [f"  {line}" for line in lines]


def _rate_cells(rates: Rates | None) -> list[str]:
    """MACs used (% of peak), achieved and peak TOPS of one unit kind or chip ("-" for a unit kind without)."""
    if rates is None:
        return ["-"] * 3
    return [fmt.percent(rates.mac_utilization), fmt.metric("achieved_tops", rates.achieved_tops),
            fmt.metric("peak_tops", rates.peak_tops)]


def unit_table(s: RunSummary) -> Table:
    """Per unit kind: busy fraction, and for the kinds with an arithmetic peak, MACs used, achieved and peak
    TOPS."""
    with_rates = any(u.rates is not None for u in s.units)
    table = Table(title="units (busy: occupied" + ("; MACs used: useful MACs of the peak" if with_rates else "")
                  + ", over the makespan)")
    table.add_column("unit")
    table.add_column("busy", justify="right")
    if with_rates:
        for col in ("MACs used", "achieved", "peak"):
            table.add_column(col, justify="right")
    for u in s.units:
        table.add_row(u.name, fmt.percent(u.busy), *(_rate_cells(u.rates) if with_rates else ()))
    return table


def chip_table(s: RunSummary) -> Table | None:
    """Per chip MACs used, achieved and peak TOPS; None for one chip (the compute line says it) or none."""
    if len(s.chips) < 2:
        return None
    table = Table(title="chips")
    for col in ("chip", "MACs used", "achieved", "peak"):
        table.add_column(col, justify="left" if col == "chip" else "right")
    for c in s.chips:
        table.add_row(c.label, *_rate_cells(c.rates))
    return table


def memory_table(s: RunSummary) -> Table:
    """Peak bytes per memory (run_summary's memories: metrics.peak_memory_bytes, the one definition) against
    its capacity."""
    table = Table(title="memory (peak: most bytes placed at once)")
    for col in ("memory", "peak", "capacity", "used"):
        table.add_column(col, justify="left" if col == "memory" else "right")
    for m in s.memories:
        table.add_row(m.label, fmt.nbytes(m.peak_bytes), fmt.nbytes(m.capacity_bytes), fmt.percent(m.fraction))
    return table


def chip_ranges(chips: list[int]) -> str:
    """Chip numbers as "chip0-3,6" (ascending input), so a table of many identical chips stays one row."""
    runs: list[list[int]] = []
    for c in chips:
        if runs and c == runs[-1][1] + 1:
            runs[-1][1] = c
        else:
            runs.append([c, c])
    return "chip" + ",".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def chip_memory_table(s: RunSummary) -> Table | None:
    """A training step's peak memory per chip and its parts at that moment (memory_split.MEMORY_SPLIT_DEFINITION),
    chips with equal figures in one row, chips holding nothing left out; None without the split (an inference
    step, or no graph)."""
    rows: dict[tuple[int, ...], list[int]] = {}
    for c in s.chip_memory or ():
        if c.peak_bytes:
            rows.setdefault((c.peak_bytes, *c.parts().values()), []).append(c.chip)
    if not rows:
        return None
    table = Table(title="peak memory per chip (all its memories; parts at the peak)")
    for col in ("chips", "peak", "parameters", "gradients", "optimizer state", "activations"):
        table.add_column(col, justify="left" if col == "chips" else "right")
    for figures, chips in sorted(rows.items(), key=lambda kv: kv[1][0]):
        table.add_row(chip_ranges(chips), *(fmt.nbytes(v) for v in figures))
    return table


ENERGY_ROWS = 12
"""The energy table's largest components shown one per row; the rest share a row."""


def energy_table(s: RunSummary) -> Table | None:
    """The step's energy by component (sim/energy.py), largest first; None without energy figures."""
    b = s.energy_breakdown
    if b is None or not b.total_pj:
        return None
    table = Table(title="energy by component (what the timeline moved; static over the makespan)")
    for col in ("kind", "component", "moved", "energy", "share"):
        table.add_column(col, justify="left" if col in ("kind", "component") else "right")
    ranked = sorted(b.items, key=lambda i: (-i.energy_pj, i.kind, i.name))
    moved = {"op": lambda q: fmt.si(q, "op"), "B": fmt.nbytes, "W": lambda q: fmt.si(q, "W"), "": lambda q: ""}
    shown = ENERGY_ROWS + (len(ranked) == ENERGY_ROWS + 1)  # one component left over is shown, not "1 others"
    for i in ranked[:shown]:
        table.add_row(i.kind.replace("_", " "), i.name, moved[i.unit](i.quantity), fmt.si(i.energy_pj * 1e-12, "J"),
                      fmt.percent(i.energy_pj / b.total_pj))
    rest = ranked[shown:]
    if rest:
        pj = sum(i.energy_pj for i in rest)
        table.add_row("", f"{len(rest)} others", "", fmt.si(pj * 1e-12, "J"), fmt.percent(pj / b.total_pj))
    return table


def print_summary(console: Console, s: RunSummary, schedule: Schedule) -> None:
    """summary_lines, then the unit, chip, memory, (training) per-chip memory and energy tables."""
    for line in summary_lines(s, schedule):
        console.print(line)
    for table in (unit_table(s), chip_table(s), memory_table(s), chip_memory_table(s),
                  energy_table(s)):  # None: not shown
        if table is not None:
            console.print(table)


def _over(e: Any) -> float:
    """How far over its tolerance a check entry is (error / tolerance); inf for a non-finite or named mismatch."""
    if e.mismatch is not None or not math.isfinite(e.max_rel_err):
        return math.inf
    if e.tolerance > 0:
        return e.max_rel_err / e.tolerance
    return 0.0 if e.max_rel_err == 0 else math.inf


def print_check(console: Console, report: Any, dtype: str, slack: float, seconds: float, verbose: bool) -> None:
    """A check report: the tensors out of tolerance (every tensor with `verbose`), corruptions and failures,
    then the summary line ("14 of 14 tensors within tolerance; worst ...") and passed/FAILED."""
    entries = report.entries
    rows = entries if verbose else [e for e in entries if not e.passed]
    if rows:
        table = Table(title=f"check: {'every tensor' if verbose else 'tensors out of tolerance'}")
        for col in ("tensor", "max abs err", "max rel err", f"numpy {dtype}", "tolerance", "ok"):
            table.add_column(col, justify="left" if col == "tensor" else "right")
        for e in rows:
            table.add_row(e.name, fmt.error(e.max_abs_err), fmt.error(e.max_rel_err), fmt.error(e.reference_rel_err),
                          fmt.error(e.tolerance), "yes" if e.passed else "NO")
        console.print(table)
    for c in report.corruptions:
        console.print(f"  corrupted: {c}")
    for f in report.failures:
        console.print(f"  failed: {f}")
    for w in report.warnings:
        console.print(f"  numeric warning: {w}")
    extra = "" if dtype == "float64" else f", or {fmt.number(slack)}x numpy's own {dtype} error if larger"
    console.print(f"check: {report.backend} kernels through the schedule's memory vs a float64 numpy evaluation "
                  f"(tolerance per tensor: {fmt.error(report.tolerance)} relative{extra})")
    ok = sum(e.passed for e in entries)
    worst = max(entries, key=_over, default=None)
    line = f"  {fmt.count(ok)} of {fmt.plural(len(entries), 'tensor')} within tolerance"
    if worst is not None:
        line += (f"; worst {worst.name}: relative error {fmt.error(worst.max_rel_err)} of tolerance "
                 f"{fmt.error(worst.tolerance)}")
    console.print(line + ("" if verbose else " (--verbose lists every tensor)"))
    console.print(f"  check {'passed' if report.passed else 'FAILED'} in {fmt.wall(seconds)}")
