"""Simulation results as plain data: spans of executed tasks, memory and channel traces, and the
metrics derived from them. Identities are typed fields; the string labels ("chip0:sram",
"link:0->1") are for display only."""
from __future__ import annotations

from dataclasses import dataclass, field

from accelsim import metrics
from accelsim.schedule.identity import TaskIdentity
from accelsim.schedule.plan import LINK, memory_label, resource_label
from accelsim.sim.energy import EnergyBreakdown

STALL_CAUSES = ("data", "unit", "buffer_space", "memory_port")


@dataclass(frozen=True, slots=True, kw_only=True)
class Span(TaskIdentity):
    """One executed task: task `task`'s identity (TaskIdentity's fields, as the schedule's task has them)
    and what happened to it. `resource` is its display label: a unit kind ("mxm"), a link ("link:0->1")
    or "allreduce". `stalls` are the cycles it started late, by cause: in static mode relative to
    its compiled start; in dynamic mode relative to the time its inputs were ready."""

    task: int
    resource: str
    instance: int
    ready: int
    start: int
    end: int
    planned_start: int
    stalls: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True, slots=True)
class MemoryTrace:
    """One memory instance over the step: its capacity and (cycle, bytes in use) steps."""

    chip: int
    memory: str
    capacity_bytes: int
    occupancy: tuple[tuple[int, int], ...]

    @property
    def label(self) -> str:
        return memory_label(self.chip, self.memory)

    @property
    def peak_bytes(self) -> int:
        return max((b for _, b in self.occupancy), default=0)


@dataclass(frozen=True, slots=True)
class Channel:
    """A path bytes moved through: the port of memory `memory` on `chip`, or (memory "") the link from
    `chip` to `out_chip`; with the bytes moved and its peak bandwidth."""

    chip: int
    out_chip: int
    memory: str
    bytes_moved: int
    bandwidth_bytes_per_cycle: float

    @property
    def label(self) -> str:
        return memory_label(self.chip, self.memory) if self.memory else resource_label(LINK, self.chip, self.out_chip)


@dataclass(frozen=True)
class Result:
    """What `simulate` returns. Time is in cycles of `clock_hz`."""

    mode: str
    graph_name: str
    hw_name: str
    clock_hz: float
    samples_per_step: int
    spans: tuple[Span, ...]
    makespan_cycles: int
    compiled_makespan_cycles: int
    memories: tuple[MemoryTrace, ...]
    channels: tuple[Channel, ...]
    unit_instances: dict[str, int]  # unit kind -> instances on the chips in use
    events: int
    energy_pj: float | None = None  # energy.total_pj; None: the hardware has no energy figures
    energy: EnergyBreakdown | None = None  # what the timeline moved, by component (sim/energy.py)
    notes: tuple[str, ...] = field(default=())

    @property
    def makespan_s(self) -> float:
        return self.makespan_cycles / self.clock_hz

    @property
    def throughput_samples_per_s(self) -> float:
        return self.samples_per_step / self.makespan_s if self.makespan_cycles else 0.0

    @property
    def occupancy(self) -> dict[str, tuple[tuple[int, int], ...]]:
        """Display label -> ((cycle, bytes in use), ...) steps, per memory instance."""
        return {m.label: m.occupancy for m in self.memories}

    @property
    def memory_capacity_bytes(self) -> dict[str, int]:
        return {m.label: m.capacity_bytes for m in self.memories}

    @property
    def port_bytes(self) -> dict[str, int]:
        """Display label -> bytes moved, per memory port and link."""
        return {c.label: c.bytes_moved for c in self.channels}

    @property
    def port_bandwidth(self) -> dict[str, float]:
        """Display label -> bytes per cycle, per memory port and link."""
        return {c.label: c.bandwidth_bytes_per_cycle for c in self.channels}

    def stall_cycles(self) -> dict[str, int]:
        out = dict.fromkeys(STALL_CAUSES, 0)
        for s in self.spans:
            for cause, cycles in s.stalls:
                out[cause] += cycles
        return out

    def input_spans(self) -> dict[tuple[int, int], tuple[int, int]]:
        """(micro-batch, replica) -> (first start, last end): each input's time in the machine."""
        return metrics.input_spans(self.spans)

    def latency_cycles(self) -> float:
        return metrics.mean_latency_cycles(self.spans, self.makespan_cycles)

    def littles_law(self) -> dict[str, float]:
        """L = lambda * W over the inputs' residence: average inputs in flight (time-averaged over the
        span from the first input's arrival to the last one's departure), their arrival rate and latency."""
        spans = list(self.input_spans().values())
        if not spans:
            return {"in_flight": 0.0, "throughput_per_cycle": 0.0, "latency_cycles": 0.0}
        t0, t1 = min(s for s, _ in spans), max(e for _, e in spans)
        window = max(t1 - t0, 1)
        in_flight = sum(e - s for s, e in spans) / window
        return {"in_flight": in_flight, "throughput_per_cycle": len(spans) / window,
                "latency_cycles": self.latency_cycles()}

    def utilization(self) -> dict[str, float]:
        """Busy fraction of each unit kind over the makespan, over all its instances."""
        return metrics.utilization(self.spans, self.unit_instances, self.makespan_cycles)

    def port_utilization(self) -> dict[str, float]:
        """Bytes moved / (peak bandwidth x makespan) per memory port and link, by display label."""
        return {c.label: c.bytes_moved / (c.bandwidth_bytes_per_cycle * self.makespan_cycles)
                if self.makespan_cycles else 0.0
                for c in sorted(self.channels, key=lambda c: c.label) if c.bandwidth_bytes_per_cycle}

    def peak_occupancy_bytes(self) -> dict[str, int]:
        return {m.label: m.peak_bytes for m in self.memories}

    def summary(self) -> dict:
        return {
            "mode": self.mode, "graph": self.graph_name, "hw": self.hw_name,
            "makespan_cycles": self.makespan_cycles, "compiled_makespan_cycles": self.compiled_makespan_cycles,
            "makespan_s": self.makespan_s, "throughput_samples_per_s": self.throughput_samples_per_s,
            "latency_s": self.latency_cycles() / self.clock_hz, "utilization": self.utilization(),
            "stall_cycles": self.stall_cycles(), "peak_occupancy_bytes": self.peak_occupancy_bytes(),
            "port_utilization": self.port_utilization(), "port_bytes": dict(sorted(self.port_bytes.items())),
            "littles_law": self.littles_law(), "events": self.events, "energy_pj": self.energy_pj,
            "energy_by_component_pj": None if self.energy is None else self.energy.to_dict(),
        }
