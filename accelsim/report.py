"""Schedule (+ its hardware) -> RunSummary (accelsim/summary.py): what `accelsim run` prints and writes as
JSON, and what sweeps record."""
from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any, Mapping

from accelsim import metrics
from accelsim.cost.area import chip_area_mm2, machine_area_mm2
from accelsim.errors import AccelsimError, ScheduleError
from accelsim.exposed_communication import exposed_communication
from accelsim.graph.ir import Graph
from accelsim.hw import load_hw
from accelsim.hw.load import HwLike
from accelsim.hw.precision import at_precision
from accelsim.hw.spec import HwSpec
from accelsim.schedule.hardware import hardware_of
from accelsim.schedule.kinds import TASK_KINDS
from accelsim.memory_split import chip_memory
from accelsim.schedule.plan import Schedule, hw_hash, memory_label
from accelsim.step_flops import step_flops, tensor_peak_flops_per_s
from accelsim.sim.energy import EnergyBreakdown, timeline_energy
from accelsim.summary import ChipArea, ChipSummary, MemorySummary, RunSummary, UnitSummary


def utilization(schedule: Schedule, hw: HwSpec) -> dict[str, float]:
    """Busy fraction of each unit kind over the makespan, over all its instances on the chips in use."""
    instances = metrics.unit_instances(hw, (t.chip for t in schedule.tasks))
    return metrics.utilization(schedule.tasks, instances, schedule.makespan_cycles)


def latency_cycles(schedule: Schedule) -> float:
    """Mean over (micro-batch, replica) of the span from its first task's start to its last task's end
    (metrics.LATENCY_DEFINITION)."""
    return metrics.mean_latency_cycles(schedule.tasks, schedule.makespan_cycles)


def compute_rates(schedule: Schedule, hw: HwSpec) -> metrics.ComputeRates:
    """MAC utilization, achieved and peak TOPS overall, per unit kind and per chip (metrics.compute_rates,
    metrics.TOPS_DEFINITION), over the chips the step uses, as utilization counts them."""
    return metrics.compute_rates(schedule.tasks, at_precision(hw, schedule.options.precision), schedule.makespan_cycles,
                                 (t.chip for t in schedule.tasks))


def peak_memory_bytes(schedule: Schedule) -> dict[str, int]:
    """Peak bytes per memory instance of the compiled placement (metrics.peak_memory_bytes: the one
    definition the terminal, the JSON and the memory plot share)."""
    return metrics.peak_memory_bytes(schedule.memories)


def communication_cycles(schedule: Schedule) -> dict[str, int]:
    """Cycles of communication tasks by what they hold: "collective" (each collective once, not once
    per member) and "link" (summed over transfers)."""
    out: dict[str, int] = defaultdict(int)
    seen_groups = set()
    for t in schedule.tasks:
        kind = TASK_KINDS[t.kind]
        if not kind.communication:
            continue
        if kind.together:
            if t.group in seen_groups:
                continue
            seen_groups.add(t.group)
        out[kind.holds.value] += t.end - t.start
    return out


def _ratio(num: float | None, den: float | None) -> float | None:
    return None if num is None or not den else num / den


def efficiency(schedule: Schedule, hw: HwSpec) -> dict[str, Any]:
    """_efficiency with the energy of what the compiled timeline moves (sim/energy.timeline_energy)."""
    return _efficiency(schedule, hw, timeline_energy(schedule, hw))


def _efficiency(schedule: Schedule, hw: HwSpec, breakdown: EnergyBreakdown | None) -> dict[str, Any]:
    """Energy, power and area of one step (None where the hardware lacks the figures): the energy of what
    the compiled timeline moves, by component (sim/energy.py: arithmetic, unit buffers, each memory's reads
    and writes, each link, static power over the makespan), energy_j per step and per sample, power_w =
    energy / makespan (static included), the FLOPs
    the step's tasks carry (node and accumulate tasks; collectives and transfers do none) per joule as
    tops_per_w, the area of the whole machine (every chip described, idle or not, cost/area.py) and
    samples/s per mm^2."""
    makespan_s = schedule.makespan_cycles / schedule.clock_hz
    energy_j = None if breakdown is None else breakdown.total_pj * 1e-12
    ops = sum(t.flops for t in schedule.tasks)
    chips = {c.name: chip_area_mm2(hw, c) for c in hw.chips}
    area = machine_area_mm2(hw)
    throughput = schedule.samples_per_step / makespan_s if makespan_s else 0.0
    tops_per_w = _ratio(ops, energy_j)
    return {
        "energy_j": energy_j,
        "energy_per_sample_j": _ratio(energy_j, schedule.samples_per_step),
        "power_w": _ratio(energy_j, makespan_s),
        "ops_per_step": ops,
        "tops_per_w": None if tops_per_w is None else tops_per_w / 1e12,
        "area_mm2": area,
        "chip_area_mm2": None if any(a is None for a in chips.values()) else chips,
        "throughput_per_mm2": _ratio(throughput, area),
    }


def _resolved_hw(schedule: Schedule, hw: HwLike) -> HwSpec:
    """The hardware `hw` names (an HwSpec as it is; a bundled name, a path or a parsed dict loaded; None: the
    hardware the schedule names, with its overrides), refused unless it is the hardware the schedule was
    compiled for: a summary against other hardware would divide by other units' peaks."""
    spec = load_hw(hw) if hw is not None else hardware_of(schedule)
    if schedule.hw_hash != hw_hash(spec) or schedule.hw_name != spec.name:
        raise ScheduleError(f"run_summary: the schedule of {schedule.graph_name!r} was compiled for hardware "
                            f"{schedule.hw_name!r} (hash {schedule.hw_hash[:12]}) but is summarized with hardware "
                            f"{spec.name!r} (hash {hw_hash(spec)[:12]}): pass the hardware it was compiled for "
                            "(with its overrides), or leave hw out")
    return spec


def _units(schedule: Schedule, hw: HwSpec, per_unit: Mapping[str, metrics.Rates]) -> tuple[UnitSummary, ...]:
    """Each unit kind of the chips in use, by name, with its busy fraction and (where it has a peak) rates."""
    busy = utilization(schedule, hw)
    assert set(per_unit) <= set(busy), "every unit kind with a peak is a unit kind of the chips in use"
    return tuple(UnitSummary(name, fraction, per_unit.get(name)) for name, fraction in busy.items())


def training_figures(schedule: Schedule, hw: HwSpec, graph: Graph | None) -> dict[str, Any]:
    """What a training-systems user reads of a training step: model and hardware FLOPs per step, TFLOP/s per
    chip both ways, the tensor units' peak per chip and MFU (step_flops.FLOPS_DEFINITION), and with the graph
    each chip's peak memory split into parameters, gradients, optimizer state and activations
    (memory_split.MEMORY_SPLIT_DEFINITION); {} for an inference step."""
    if not schedule.training:
        return {}
    flops = step_flops(schedule)
    chips = {t.chip for t in schedule.tasks}
    seconds = schedule.makespan_cycles / schedule.clock_hz
    per_chip_s = seconds * len(chips)
    peak = tensor_peak_flops_per_s(at_precision(hw, schedule.options.precision), chips) / max(len(chips), 1)
    model = flops.model_flops / per_chip_s / 1e12 if per_chip_s else 0.0
    return {
        "model_flops_per_step": flops.model_flops,
        "hardware_flops_per_step": flops.hardware_flops,
        "model_tflops_per_chip": model,
        "hardware_tflops_per_chip": flops.hardware_flops / per_chip_s / 1e12 if per_chip_s else 0.0,
        "peak_tflops_per_chip": peak / 1e12,
        "mfu": model * 1e12 / peak if peak else None,
        "chip_memory": None if graph is None else chip_memory(schedule, graph),
    }


def run_summary(schedule: Schedule, hw: HwLike = None, graph: Graph | None = None) -> RunSummary:
    """What `accelsim run` prints and writes as JSON (RunSummary.to_dict): times, throughput, bounds,
    utilization, memory, energy, power and area (efficiency), MAC utilization and TOPS. `hw`: the hardware
    the schedule was compiled for, as an HwSpec, a bundled name, a path or a parsed dict (as A.compile takes
    it); None: the one the schedule names, with its overrides. Other hardware is refused.

    - makespan_s: the step, first task's start to last task's end (all inputs, the update, collectives).
    - latency_s: `latency_definition` (metrics.LATENCY_DEFINITION): the mean over inputs, each (micro-batch,
      replica), of the time from its first task's start to its last task's end; per-step work (optimizer
      update, per-step all-reduce) is left out, so with one input it is at most the makespan.
    - units[].busy: per unit kind, the busy fraction of its instances over the makespan (occupancy, whatever
      the unit does while busy).
    - mac_utilization, achieved_tops, peak_tops, and the same three per unit kind (`units[].rates`) and per
      chip (`chips`): `tops_definition` (metrics.TOPS_DEFINITION): useful MACs / peak MACs over the
      makespan, ops per second in TOPS with 2 ops per MAC, and the units' peak; "% of peak" is
      100 x mac_utilization.
    - memories[].peak_bytes: `peak_memory_definition` (metrics.peak_memory_bytes): per memory instance
      ("chip<c>:<memory>"), the most bytes the compiled placement holds in it at once.
    - training figures (training_figures; None for inference): FLOPs, TFLOP/s per chip, MFU, memory split.
    - exposed_communication: per communication kind, the cycles a chip computes nothing while that kind is in
      flight (exposed_communication.EXPOSED_COMMUNICATION_DEFINITION)."""
    if not isinstance(schedule, Schedule) or not (hw is None or isinstance(hw, (HwSpec, str, Path, dict))):
        raise AccelsimError(f"run_summary(schedule, hw) needs a Schedule and the hardware (an HwSpec, a bundled "
                            f"name, a path or a dict; or None for the one the schedule names), got "
                            f"{type(schedule).__name__} and {type(hw).__name__}")
    if graph is not None and not isinstance(graph, Graph):
        raise AccelsimError(f"run_summary(schedule, hw, graph): graph must be the Graph the schedule was compiled "
                            f"from, or None; got {type(graph).__name__}")
    hw = _resolved_hw(schedule, hw)
    clock = schedule.clock_hz
    makespan_s = schedule.makespan_cycles / clock
    comm = communication_cycles(schedule)
    rates = compute_rates(schedule, hw)
    breakdown = timeline_energy(schedule, hw)
    eff = _efficiency(schedule, hw, breakdown)
    peaks = peak_memory_bytes(schedule)
    return RunSummary(
        graph=schedule.graph_name,
        hw=schedule.hw_name,
        hw_overrides=schedule.hw_overrides or {},
        training=schedule.training,
        options=schedule.options,
        samples_per_step=schedule.samples_per_step,
        tasks=len(schedule.tasks),
        makespan_cycles=schedule.makespan_cycles,
        makespan_s=makespan_s,
        throughput_samples_per_s=schedule.samples_per_step / makespan_s if makespan_s else 0.0,
        latency_s=latency_cycles(schedule) / clock,
        units=_units(schedule, hw, rates.per_unit),
        mac_utilization=rates.overall.mac_utilization,
        achieved_tops=rates.overall.achieved_tops,
        peak_tops=rates.overall.peak_tops,
        chips=tuple(ChipSummary(c, r) for c, r in rates.per_chip.items()),
        memories=tuple(MemorySummary(m.chip, m.memory, peaks[memory_label(m.chip, m.memory)], m.capacity_bytes)
                       for m in schedule.memories),
        allreduce_cycles=comm.get("collective", 0),
        transfer_cycles=comm.get("link", 0),
        energy_pj=None if breakdown is None else breakdown.total_pj,
        energy_j=eff["energy_j"],
        energy_per_sample_j=eff["energy_per_sample_j"],
        power_w=eff["power_w"],
        ops_per_step=eff["ops_per_step"],
        tops_per_w=eff["tops_per_w"],
        area_mm2=eff["area_mm2"],
        chip_areas=None if eff["chip_area_mm2"] is None else tuple(ChipArea(name, area)
                                                                     for name, area in eff["chip_area_mm2"].items()),
        throughput_per_mm2=eff["throughput_per_mm2"],
        critical_path_cycles=schedule.bounds.critical_path_cycles,
        resource_bound_cycles=schedule.bounds.resource_cycles,
        resource_bound_unit=schedule.bounds.resource,
        bound_cycles=schedule.bounds.bound_cycles,
        bound_ratio=schedule.bound_ratio,
        exposed_communication=exposed_communication(schedule.tasks),
        **training_figures(schedule, hw, graph),
        energy_breakdown=breakdown,
    )
