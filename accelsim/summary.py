"""RunSummary: one compiled step's figures as a typed, frozen record (report.run_summary makes it), with
per-unit, per-chip and per-memory records. Readers use its attributes, so a misspelled figure is an
AttributeError at once instead of a None; `to_dict()` is the JSON `accelsim run --json` writes."""
from __future__ import annotations

import copy
import difflib
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Mapping

from accelsim import metrics
from accelsim.errors import AccelsimError
from accelsim.exposed_communication import EXPOSED_COMMUNICATION_DEFINITION, ExposedCommunication
from accelsim.memory_split import MEMORY_SPLIT_DEFINITION, ChipMemory
from accelsim.metrics import Rates
from accelsim.schedule.options import StepOptions
from accelsim.schedule.plan import memory_label
from accelsim.step_flops import FLOPS_DEFINITION
from accelsim.sim.energy import EnergyBreakdown


class UnknownSummaryKey(AccelsimError, KeyError):
    """A key RunSummary's dict (`to_dict()`) does not have; a KeyError too, as a dict's lookup raises."""

    def __str__(self) -> str:  # KeyError's own quotes the message as a repr
        return str(self.args[0]) if self.args else ""


@dataclass(frozen=True, slots=True)
class UnitSummary:
    """One unit kind over the chips the step uses: its busy fraction over the makespan (occupancy, over all
    its instances) and, for a kind with an arithmetic peak (arrays, vector units), its rates; None for the
    others (stream and per-element units do no counted arithmetic)."""

    name: str
    busy: float
    rates: Rates | None


@dataclass(frozen=True, slots=True)
class ChipSummary:
    """One chip in use: the rates of its unit kinds with an arithmetic peak."""

    chip: int
    rates: Rates

    @property
    def label(self) -> str:
        """"chip<c>", the key of the JSON's per_chip."""
        return f"chip{self.chip}"


@dataclass(frozen=True, slots=True)
class MemorySummary:
    """One memory instance: the most bytes the compiled placement holds in it at once
    (metrics.PEAK_MEMORY_DEFINITION) and its capacity."""

    chip: int
    memory: str
    peak_bytes: int
    capacity_bytes: int

    @property
    def label(self) -> str:
        """"chip<c>:<memory>" (schedule.plan.memory_label), the key of the JSON's memory figures."""
        return memory_label(self.chip, self.memory)

    @property
    def fraction(self) -> float:
        """Peak over capacity."""
        return self.peak_bytes / self.capacity_bytes


@dataclass(frozen=True, slots=True)
class ChipArea:
    """The modelled area of one copy of a chip the hardware describes (by its name), mm^2."""

    name: str
    area_mm2: float


@dataclass(frozen=True, slots=True)
class RunSummary:
    """What `accelsim run` prints and writes as JSON for one compiled step (report.run_summary says how each
    figure is found). Seconds at the hardware clock; energy and area None where the hardware lacks figures.
    Fields in the order of `to_dict()`'s keys; `units`, `chips` and `memories` in the JSON's order (unit
    kinds by name, chips by number, memories as the schedule lists them). The training figures (FLOPs, TFLOP/s
    per chip, MFU, peak memory per chip split by what it holds) are None for an inference step; `chip_memory`
    also where run_summary was not given the graph. Their JSON keys follow the older ones.

    energy_pj (and energy_j, power_w, tops_per_w from it) is the energy of what the compiled timeline moves,
    static power included (`energy_breakdown`, sim/energy.py). Before issue 28 it was the sum of the cost
    model's task energies, which charged every byte at its unit's first memory (none at DRAM or HBM) and
    no leakage: that value was wrong and is no longer reported (the schedule keeps it as Schedule.energy_pj)."""

    graph: str
    hw: str
    hw_overrides: Mapping[str, Any]
    training: bool
    options: StepOptions
    samples_per_step: int
    tasks: int
    makespan_cycles: int
    makespan_s: float
    throughput_samples_per_s: float
    latency_s: float
    units: tuple[UnitSummary, ...]
    mac_utilization: float
    achieved_tops: float
    peak_tops: float
    chips: tuple[ChipSummary, ...]
    memories: tuple[MemorySummary, ...]
    allreduce_cycles: int
    transfer_cycles: int
    energy_pj: float | None
    energy_j: float | None
    energy_per_sample_j: float | None
    power_w: float | None
    ops_per_step: int
    tops_per_w: float | None
    area_mm2: float | None
    chip_areas: tuple[ChipArea, ...] | None
    throughput_per_mm2: float | None
    critical_path_cycles: int
    resource_bound_cycles: int
    resource_bound_unit: str
    bound_cycles: int
    bound_ratio: float
    # what a training-systems user reads (None for an inference step; chip_memory also without the graph)
    model_flops_per_step: int | None = None
    hardware_flops_per_step: int | None = None
    model_tflops_per_chip: float | None = None
    hardware_tflops_per_chip: float | None = None
    peak_tflops_per_chip: float | None = None
    mfu: float | None = None
    chip_memory: tuple[ChipMemory, ...] | None = None
    exposed_communication: tuple[ExposedCommunication, ...] = ()
    # --- energy by component (sim/energy.py): what the compiled timeline moved; None without figures --------
    energy_breakdown: EnergyBreakdown | None = None

    __iter__ = None  # not a mapping: `for k in summary` would otherwise probe __getitem__ with 0, 1, ...

    def __post_init__(self) -> None:
        # a read-only view of a private copy: the record cannot change under its reader
        object.__setattr__(self, "hw_overrides", MappingProxyType(copy.deepcopy(dict(self.hw_overrides))))

    # --- definitions, stated once in metrics.py --------------------------------------------------------

    @property
    def latency_definition(self) -> str:
        return metrics.LATENCY_DEFINITION

    @property
    def tops_definition(self) -> str:
        return metrics.TOPS_DEFINITION

    @property
    def peak_memory_definition(self) -> str:
        return metrics.PEAK_MEMORY_DEFINITION

    @property
    def flops_definition(self) -> str:
        return FLOPS_DEFINITION

    @property
    def memory_split_definition(self) -> str:
        return MEMORY_SPLIT_DEFINITION

    @property
    def exposed_communication_definition(self) -> str:
        return EXPOSED_COMMUNICATION_DEFINITION

    # --- derived figures -----------------------------------------------------------------------------

    @property
    def rates(self) -> Rates:
        """The step's overall MAC utilization, achieved and peak TOPS as one record."""
        return Rates(self.mac_utilization, self.achieved_tops, self.peak_tops)

    @property
    def largest_peak_memory_bytes(self) -> int | None:
        """The largest peak over the memory instances; None with no memory."""
        return max((m.peak_bytes for m in self.memories), default=None)

    @property
    def largest_peak_memory_fraction(self) -> float | None:
        """The largest peak over capacity over the memory instances; None with no memory."""
        return max((m.fraction for m in self.memories), default=None)

    def unit(self, name: str) -> UnitSummary:
        """The record of unit kind `name`."""
        for u in self.units:
            if u.name == name:
                return u
        raise AccelsimError(f"the run summary of {self.graph!r} on {self.hw!r} has no unit kind {name!r}; its unit "
                            f"kinds: {', '.join(u.name for u in self.units) or 'none'}")

    def memory(self, label: str) -> MemorySummary:
        """The record of memory instance `label` ("chip<c>:<memory>")."""
        for m in self.memories:
            if m.label == label:
                return m
        raise AccelsimError(f"the run summary of {self.graph!r} on {self.hw!r} has no memory {label!r}; its "
                            f"memories: {', '.join(m.label for m in self.memories) or 'none'}")

    # --- energy by component, J (None without energy figures); sweeps record these as metrics ----------------

    def _energy_j(self, pj: float | None) -> float | None:
        return None if pj is None else pj * 1e-12

    @property
    def static_energy_j(self) -> float | None:
        """Leakage of every chip described (and DRAM background power) over the makespan."""
        return self._energy_j(None if self.energy_breakdown is None else self.energy_breakdown.static_pj)

    @property
    def dynamic_energy_j(self) -> float | None:
        """Arithmetic, unit buffers, memory reads and writes and links."""
        return self._energy_j(None if self.energy_breakdown is None else self.energy_breakdown.dynamic_pj)

    @property
    def arithmetic_energy_j(self) -> float | None:
        """Every unit kind's operations at its precision."""
        return self._energy_j(None if self.energy_breakdown is None else self.energy_breakdown.kind_pj("arithmetic"))

    @property
    def memory_energy_j(self) -> float | None:
        """Reads and writes of every memory, on chip and off."""
        return self._energy_j(None if self.energy_breakdown is None else self.energy_breakdown.memory_pj)

    @property
    def off_chip_energy_j(self) -> float | None:
        """Reads and writes of DRAM and HBM."""
        return self._energy_j(None if self.energy_breakdown is None else self.energy_breakdown.off_chip_pj)

    @property
    def link_energy_j(self) -> float | None:
        """Bytes over the links between chips, each link crossed."""
        return self._energy_j(None if self.energy_breakdown is None else self.energy_breakdown.kind_pj("link"))

    # --- the JSON --------------------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """The summary as `accelsim run --json` writes it (keys and their order fixed: scripts and sweep
        tables read them), a new dict each call."""
        return {
            "graph": self.graph,
            "hw": self.hw,
            "hw_overrides": copy.deepcopy(dict(self.hw_overrides)),
            "training": self.training,
            "options": self.options.model_dump(),
            "samples_per_step": self.samples_per_step,
            "tasks": self.tasks,
            "makespan_cycles": self.makespan_cycles,
            "makespan_s": self.makespan_s,
            "throughput_samples_per_s": self.throughput_samples_per_s,
            "latency_s": self.latency_s,
            "latency_definition": self.latency_definition,
            "utilization": {u.name: u.busy for u in self.units},
            "mac_utilization": self.mac_utilization,
            "achieved_tops": self.achieved_tops,
            "peak_tops": self.peak_tops,
            "per_unit": {u.name: u.rates.to_dict() for u in self.units if u.rates is not None},
            "per_chip": {c.label: c.rates.to_dict() for c in self.chips},
            "tops_definition": self.tops_definition,
            "peak_memory_bytes": {m.label: m.peak_bytes for m in self.memories},
            "peak_memory_definition": self.peak_memory_definition,
            "memory_capacity_bytes": {m.label: m.capacity_bytes for m in self.memories},
            "allreduce_cycles": self.allreduce_cycles,
            "transfer_cycles": self.transfer_cycles,
            "energy_pj": self.energy_pj,
            "energy_j": self.energy_j,
            "energy_per_sample_j": self.energy_per_sample_j,
            "power_w": self.power_w,
            "static_energy_j": self.static_energy_j,
            "energy_by_component_pj": None if self.energy_breakdown is None else self.energy_breakdown.to_dict(),
            "ops_per_step": self.ops_per_step,
            "tops_per_w": self.tops_per_w,
            "area_mm2": self.area_mm2,
            "chip_area_mm2": None if self.chip_areas is None else {a.name: a.area_mm2 for a in self.chip_areas},
            "throughput_per_mm2": self.throughput_per_mm2,
            "critical_path_cycles": self.critical_path_cycles,
            "resource_bound_cycles": self.resource_bound_cycles,
            "resource_bound_unit": self.resource_bound_unit,
            "bound_cycles": self.bound_cycles,
            "bound_ratio": self.bound_ratio,
            "model_flops_per_step": self.model_flops_per_step,
            "hardware_flops_per_step": self.hardware_flops_per_step,
            "model_tflops_per_chip": self.model_tflops_per_chip,
            "hardware_tflops_per_chip": self.hardware_tflops_per_chip,
            "peak_tflops_per_chip": self.peak_tflops_per_chip,
            "mfu": self.mfu,
            "flops_definition": self.flops_definition,
            "peak_memory_per_chip": None if self.chip_memory is None else {
                c.label: {"peak_bytes": c.peak_bytes, **{f"{k}_bytes": v for k, v in c.parts().items()},
                          "peak_cycle": c.peak_cycle} for c in self.chip_memory},
            "memory_split_definition": self.memory_split_definition,
            "exposed_communication": {e.kind: {"chip": e.chip, "exposed_cycles": e.exposed_cycles,
                                               "in_flight_cycles": e.in_flight_cycles}
                                      for e in self.exposed_communication},
            "exposed_communication_definition": self.exposed_communication_definition,
        }

    def __getitem__(self, key: str) -> Any:
        """summary["makespan_s"]: the value of `to_dict()`'s key, so scripts written when run_summary returned
        that dict keep working; a key it lacks is refused by name (never None). New code reads attributes."""
        data = self.to_dict()
        if key not in data:
            close = difflib.get_close_matches(str(key), data, n=3)
            hint = f" (did you mean {' or '.join(map(repr, close))}?)" if close else ""
            raise UnknownSummaryKey(f"the run summary has no key {key!r}{hint}; its keys: {', '.join(data)}")
        return data[key]

