"""What each task of a schedule did, in the measures of the per-layer report (Schedule, HwSpec, Graph, timeline ->
one TaskWork per task): its cycles split by cause, its arithmetic, and the arithmetic its unit could have done.

A task's cycles (definitions; every cycle of a task's span is in exactly one of the first four):
- ideal_cycles: the cycles its unit's datapath computes, memory aside: the cost model's compute cycles of its
  node on the unit it ran on (an array's systolic fold model: every fold's fill, stream and drain). An
  accumulation (a gradient sum on a unit) is all ideal.
- latency_cycles: its unit's pipeline latency (cost model), once per task, and on a GPU-like chip the kernel's
  launch and tail (`gpu_overheads`: the cost model's overhead cycles), which are no wait for memory.
- memory_stall_cycles: the rest of its span on its unit, where the unit waits for bytes: operand buffers that
  refill (stall cycles of the cost model) or a memory port slower than the arithmetic (a memory-bound node).
  Where the task's span differs from the cost model's cycles (a part of a split node, another precision),
  ideal and latency cycles are scaled to the span and the memory stall is what remains.
- communication_cycles: the span of a transfer or a collective, on a link: the unit-level split does not apply.
- wait_cycles (dependency/waiting): from the moment its last input (or ordering edge) was done to its start,
  less its port stall: it was ready but queued behind other tasks on its unit or link (the compiled order), or
  waited for space in its output memory or for its compiled slot. Not part of its span.
- port_stall_cycles: the cycles the simulation held it before its start for bandwidth on a memory port that
  concurrent tasks were using (Span.stalls' "memory_port"); 0 on the compiled timeline. Not part of its span.
"""
from __future__ import annotations

from dataclasses import dataclass

from accelsim.cost.model import node_cost, peak_ops_per_cycle
from accelsim.graph.ir import Graph
from accelsim.hw.spec import HwSpec, Unit
from accelsim.schedule.kinds import TASK_KINDS, Holds
from accelsim.schedule.levels import chip_list
from accelsim.schedule.plan import Schedule
from accelsim.sim.trace import Span


@dataclass(frozen=True, slots=True)
class TaskWork:
    """One task's figures (module docstring). `peak_ops_per_cycle`: its unit's arithmetic peak (a gang's
    instances together; 0 for units without one and for communication)."""

    task: int
    resource: str
    busy_cycles: int
    ideal_cycles: int
    latency_cycles: int
    memory_stall_cycles: int
    communication_cycles: int
    wait_cycles: int
    port_stall_cycles: int
    flops: int
    peak_ops_per_cycle: float


@dataclass(frozen=True, slots=True)
class Interval:
    """Where a task ran on the timeline: its resource label, start and end, and its simulated port stall."""

    resource: str
    start: int
    end: int
    port_stall_cycles: int = 0


def timeline_of(schedule: Schedule, spans: tuple[Span, ...] | None) -> list[Interval]:
    """Per task id, its interval: from a simulation's spans, else as compiled."""
    if spans is None:
        return [Interval(t.resource, t.start, t.end) for t in schedule.tasks]
    by_task = {s.task: s for s in spans}
    return [Interval(s.resource, s.start, s.end, dict(s.stalls).get("memory_port", 0))
            for s in (by_task[i] for i in range(len(schedule.tasks)))]


def _unit(hw: HwSpec, chip: int, name: str) -> Unit | None:
    return next((u for u in chip_list(hw)[chip].units if u.name == name), None)


def _split(busy: int, compute: int, latency: int, cycles: int) -> tuple[int, int, int]:
    """(ideal, latency, memory stall) of a span of `busy` cycles whose cost-model cycles split as given."""
    if cycles == busy:
        ideal, lat = compute, latency
    else:
        ideal = round(busy * compute / cycles) if cycles else 0
        lat = round(busy * latency / cycles) if cycles else 0
    ideal = min(ideal, busy)
    lat = min(lat, busy - ideal)
    return ideal, lat, busy - ideal - lat


def task_work(schedule: Schedule, hw: HwSpec, graph: Graph, timeline: list[Interval]) -> list[TaskWork]:
    """Every task's figures, by task id (module docstring)."""
    chips = chip_list(hw)
    costs: dict[tuple[int, int, str], tuple[int, int, int]] = {}
    out = []
    for t in schedule.tasks:
        iv = timeline[t.id]
        busy = iv.end - iv.start
        ready = max((timeline[d].end for d in t.deps + t.after), default=0)
        wait = max(0, iv.start - ready - iv.port_stall_cycles)
        unit = _unit(hw, t.chip, iv.resource) if TASK_KINDS[t.kind].holds is Holds.UNIT else None
        if unit is None:
            out.append(TaskWork(t.id, iv.resource, busy, 0, 0, 0, busy, wait, iv.port_stall_cycles, t.flops, 0.0))
            continue
        peak = peak_ops_per_cycle(unit) * (unit.count if unit.gang else 1)
        if t.kind != "node":
            out.append(TaskWork(t.id, iv.resource, busy, busy, 0, 0, 0, wait, iv.port_stall_cycles, t.flops, peak))
            continue
        key = (t.node, t.chip, unit.name)
        if key not in costs:
            c = node_cost(hw, graph, graph.nodes[t.node], unit, chips[t.chip])
            costs[key] = (c.compute_cycles, c.latency_cycles + c.overhead_cycles, c.cycles)
        ideal, lat, stall = _split(busy, *costs[key])
        out.append(TaskWork(t.id, iv.resource, busy, ideal, lat, stall, 0, wait, iv.port_stall_cycles, t.flops,
                            peak))
    return out
