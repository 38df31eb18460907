"""Metrics over timed work records (a Schedule's tasks or a simulation's spans), defined once so the
compiled summary and the simulated one cannot drift apart."""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Iterable, Mapping, Protocol

from accelsim.cost.model import peak_ops_per_cycle
from accelsim.hw.precision import peak_flops_per_s
from accelsim.hw.spec import HwSpec
from accelsim.schedule.kinds import busy_kinds
from accelsim.schedule.levels import chip_list
from accelsim.schedule.plan import PER_STEP, memory_label

BUSY_KINDS = busy_kinds()
"""Record kinds that occupy a unit (TaskKindDef.busy: they hold Holds.UNIT); transfers and collectives do not."""


class Interval(Protocol):
    """What the metrics read from a record: schedule.plan.Task and sim.trace.Span both fit
    (read-only properties, since both are frozen)."""

    @property
    def kind(self) -> str: ...
    @property
    def resource(self) -> str: ...
    @property
    def microbatch(self) -> int: ...
    @property
    def replica(self) -> int: ...
    @property
    def start(self) -> int: ...
    @property
    def end(self) -> int: ...


def unit_instances(hw: HwSpec, chips_used: Iterable[int]) -> dict[str, int]:
    """Unit kind -> its instances over the chips in use (a gang of instances counts once)."""
    chips = chip_list(hw)
    out: dict[str, int] = defaultdict(int)
    for c in sorted(set(chips_used)):
        for u in chips[c].units:
            out[u.name] += 1 if u.gang else u.count
    return dict(out)


def utilization(records: Iterable[Interval], unit_instances: Mapping[str, int],
                makespan_cycles: int) -> dict[str, float]:
    """Busy fraction of each unit kind over the makespan, over all `unit_instances[kind]` instances."""
    busy: dict[str, int] = defaultdict(int)
    for r in records:
        if r.kind in BUSY_KINDS:
            busy[r.resource] += r.end - r.start
    return {u: busy.get(u, 0) / (n * makespan_cycles) if makespan_cycles else 0.0
            for u, n in sorted(unit_instances.items())}


def input_spans(records: Iterable[Interval]) -> dict[tuple[int, int], tuple[int, int]]:
    """(micro-batch, replica) -> (first start, last end): each input's time in the machine. Per-step
    work (the optimizer update) belongs to no input and is left out."""
    out: dict[tuple[int, int], list[int]] = {}
    for r in records:
        if r.microbatch == PER_STEP:
            continue
        lo_hi = out.setdefault((r.microbatch, r.replica), [r.start, r.end])
        lo_hi[0], lo_hi[1] = min(lo_hi[0], r.start), max(lo_hi[1], r.end)
    return {k: (v[0], v[1]) for k, v in out.items()}


def mean_latency_cycles(records: Iterable[Interval], makespan_cycles: int) -> float:
    """Mean over inputs of their span; the makespan when no record belongs to an input."""
    spans = input_spans(records)
    return sum(e - s for s, e in spans.values()) / len(spans) if spans else float(makespan_cycles)


# --- definitions, stated once: run_summary returns these strings beside the numbers ---------------------

LATENCY_DEFINITION = (
    "mean over the step's inputs, each (micro-batch, replica) pair, of the time from the start of its first "
    "task to the end of its last task, in seconds at the hardware clock; work that belongs to no input (the "
    "optimizer update, per-step collectives) is left out, so it is not the makespan (the whole step)")

OPS_PER_MAC = 2
"""Convention: one multiply-accumulate is two operations (a multiply and an add). The op registry counts
FLOPs this way (matmul (m, k) @ (k, n): 2 m k n) and so do vendors' TOPS figures, so useful MACs are
FLOPs / 2 and an array's peak is rows x cols MACs = 2 x rows x cols ops per cycle (cost.model)."""

TOPS_DEFINITION = (
    "ops = FLOPs of the op registry (a multiply-accumulate counts 2 ops) done by node and accumulate tasks on "
    "units with an arithmetic peak; achieved_tops = ops / makespan_s / 1e12; peak_tops = the peak ops per "
    "second of those units (array: 2 x rows x cols per instance per cycle, vector: lanes x ops per lane; every "
    "instance; the chips the step uses) / 1e12; mac_utilization = useful MACs / peak MACs over the makespan "
    "= achieved_tops / peak_tops (1.0 is every MAC busy with useful work every cycle)")

PEAK_MEMORY_DEFINITION = (
    "per memory instance (label 'chip<c>:<memory>', one entry for each memory of each chip, never summed over "
    "memories or chips): the most bytes allocated in it at once during the step, every tensor counted at its "
    "placed size (the hardware's bytes per element, rounded up to 64 B) over its live interval; for a "
    "schedule, its tensor placements (what the static replay reproduces); binary units: 1 MiB = 2**20 bytes")

MIB = 1 << 20
"""Bytes in a MiB: every memory figure accelsim shows is in binary units (KiB, MiB, GiB)."""


class MemoryPeak(Protocol):
    """What peak_memory_bytes reads: schedule.plan.MemoryUse and sim.trace.MemoryTrace both fit."""

    @property
    def chip(self) -> int: ...
    @property
    def memory(self) -> str: ...
    @property
    def peak_bytes(self) -> int: ...


def peak_memory_bytes(memories: Iterable[MemoryPeak]) -> dict[str, int]:
    """Peak memory, the one definition the run summary, its JSON, the terminal and the memory plot use.

    For every memory instance (each memory of each chip; label "chip<c>:<memory>", schedule.plan.memory_label)
    in the order given: the largest number of bytes allocated in that memory at once over the step, counting
    each tensor at its placed size (the hardware's bytes per element, not numpy's, rounded up to 64 B,
    schedule.levels.aligned) over its live interval. Per memory instance, never summed over a chip's memories
    or over chips (a step that fits needs each entry within that memory's capacity).

    Given a Schedule's `memories` (MemoryUse) it is the peak of the compiled placement, which run_summary
    reports; given a simulation Result's `memories` (MemoryTrace) it is the peak of that run's occupancy log.
    The static replay allocates exactly the schedule's tensors at their placed sizes and times, so the two
    agree; the dynamic runtime allocates as it goes (outputs when produced, at their unrounded size), so its
    peak is its own, and its plot says so."""
    return {memory_label(m.chip, m.memory): int(m.peak_bytes) for m in memories}


# --- MAC utilization and TOPS -----------------------------------------------------------------------------

class Work(Interval, Protocol):
    """A record that did arithmetic on a unit: schedule.plan.Task fits (its chip and its FLOPs)."""

    @property
    def chip(self) -> int: ...
    @property
    def flops(self) -> int: ...


def unit_peak_ops_per_cycle(hw: HwSpec, chips_used: Iterable[int]) -> dict[tuple[int, str], float]:
    """(chip, unit kind) -> peak ops per cycle of all the kind's instances on that chip, for the chips in use
    and the unit kinds with an arithmetic peak (cost.model.peak_ops_per_cycle: 2 x rows x cols per array
    instance, lanes x ops per lane per vector instance; stream and per-element units have none and are left
    out). A gang's instances count separately here: they all work on each node. For `hw` resolved at a step
    precision (hw/precision.at_precision), the peak is the unit's at that precision
    (hw/precision.peak_flops_per_s): a step in fp32 on Tensor Cores is measured against their fp32 peak."""
    chips = chip_list(hw)
    out: dict[tuple[int, str], float] = {}
    for c in sorted(set(chips_used)):
        for u in chips[c].units:
            peak = peak_ops_per_cycle(u) * u.count
            if peak > 0 and hw.step_precision is not None:
                peak = peak_flops_per_s(hw, u) / hw.clock_hz
            if peak > 0:
                out[(c, u.name)] = out.get((c, u.name), 0.0) + peak
    return out


@dataclass(frozen=True, slots=True)
class Rates:
    """MAC utilization, achieved and peak TOPS of some units over the makespan (TOPS_DEFINITION)."""

    mac_utilization: float
    achieved_tops: float
    peak_tops: float

    def to_dict(self) -> dict[str, float]:
        """{"mac_utilization", "achieved_tops", "peak_tops"}: the JSON of one per_unit or per_chip entry."""
        return {"mac_utilization": self.mac_utilization, "achieved_tops": self.achieved_tops,
                "peak_tops": self.peak_tops}


@dataclass(frozen=True, slots=True)
class ComputeRates:
    """Rates overall, per unit kind (by name, sorted) and per chip (by number, sorted), over the unit kinds
    with an arithmetic peak on the chips in use."""

    overall: Rates
    per_unit: Mapping[str, Rates]
    per_chip: Mapping[int, Rates]


def _rates(ops: float, peak_ops_per_cycle: float, makespan_cycles: int, clock_hz: float) -> Rates:
    seconds = makespan_cycles / clock_hz
    peak_window = peak_ops_per_cycle * makespan_cycles
    return Rates(mac_utilization=ops / peak_window if peak_window else 0.0,
                 achieved_tops=ops / seconds / 1e12 if seconds else 0.0,
                 peak_tops=peak_ops_per_cycle * clock_hz / 1e12)


def compute_rates(records: Iterable[Work], hw: HwSpec, makespan_cycles: int,
                  chips_used: Iterable[int] | None = None) -> ComputeRates:
    """MAC utilization, achieved and peak TOPS (TOPS_DEFINITION) overall, per unit kind and per chip.

    Useful ops are the `flops` of the records that occupy a unit (BUSY_KINDS: node and accumulate tasks;
    communication does no arithmetic) on a unit kind with a peak; the peak is over every instance of those
    unit kinds on the chips in use (`chips_used`, default the records' chips, as utilization counts them)
    for the whole makespan. mac_utilization = achieved / peak (0.0 when there is no peak or no time), so
    "% of peak" is 100 x mac_utilization. Per unit kind sums over the chips, per chip over its unit kinds."""
    records = list(records)
    chips = {r.chip for r in records} if chips_used is None else set(chips_used)
    peaks = unit_peak_ops_per_cycle(hw, chips)
    ops: dict[tuple[int, str], int] = defaultdict(int)
    for r in records:
        if r.kind in BUSY_KINDS and (r.chip, r.resource) in peaks:
            ops[(r.chip, r.resource)] += r.flops
    clock = hw.clock_hz

    def rates(keys: list[tuple[int, str]]) -> Rates:
        return _rates(sum(ops[k] for k in keys), sum(peaks[k] for k in keys), makespan_cycles, clock)

    units = sorted({u for _, u in peaks})
    chip_ids = sorted({c for c, _ in peaks})
    return ComputeRates(overall=rates(list(peaks)),
                        per_unit={u: rates([k for k in peaks if k[1] == u]) for u in units},
                        per_chip={c: rates([k for k in peaks if k[0] == c]) for c in chip_ids})
