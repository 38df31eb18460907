"""The per-layer report (Schedule, HwSpec, Graph, optional simulated Result -> LayerReport): per model layer (its
nodes' forward, backward and update tasks together, named by layer_names.py), its cycles by cause, its arithmetic
and the unit utilization and mapping efficiency behind it, the bytes it read and wrote in each memory, and its
energy by component; with one detail record per node.

Cycles are layer_work.py's (its docstring defines ideal, latency, memory-stall, communication, wait and
port-stall cycles), summed over the layer's tasks: unit-cycles, so a layer run by many micro-batches counts
each. Utilization = flops / (busy cycles x the peak ops per cycle of the units it ran on); mapping efficiency =
flops / (ideal cycles x that peak): on a systolic array the fold utilization the cost model computes (MACs /
(compute cycles x rows x cols)); below 1 where folds leave rows or columns idle or fill and drain dominate.
Bytes and energy are sim/energy.py's timeline energy of the layer's tasks (`timeline_energy(ran=...)`): what
the schedule's loads move through each memory (reads and writes, as the step's energy charges them) and each
link, and the energy of its arithmetic, unit buffers, memory reads and writes and links. Static (leakage)
energy belongs to the step, not to a layer: it is `static_energy_pj`, outside the rows; so the rows' energy
sums to the step's dynamic energy and their bytes to its traffic per memory.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, fields

from accelsim.api import resolve
from accelsim.errors import AccelsimError
from accelsim.graph.ir import Graph
from accelsim.hw.load import HwLike
from accelsim.hw.spec import HwSpec
from accelsim.fusion_groups import group_of_nodes
from accelsim.layer_names import layer_names
from accelsim.layer_work import TaskWork, task_work, timeline_of
from accelsim.mapping.cost import unit_dataflows
from accelsim.mapping.dims import layer_dims
from accelsim.mapping.nest import LoopNest, loop_nest
from accelsim.mapping.record import Mapping
from accelsim.schedule.levels import chip_list
from accelsim.schedule.plan import Schedule, memory_label
from accelsim.sim.energy import ENERGY_KINDS, TimelineFacts, timeline_energy, timeline_facts
from accelsim.sim.trace import Result

Pairs = tuple[tuple[str, int], ...]
"""(label, amount) pairs in a fixed order: a frozen record's mapping."""


@dataclass(frozen=True, slots=True)
class Work:
    """Cycles and arithmetic of some tasks together (layer_work.py's definitions), summed."""

    tasks: int = 0
    busy_cycles: int = 0
    ideal_cycles: int = 0
    latency_cycles: int = 0
    memory_stall_cycles: int = 0
    communication_cycles: int = 0
    wait_cycles: int = 0
    port_stall_cycles: int = 0
    flops: int = 0
    peak_op_cycles: float = 0.0  # sum of busy cycles x peak ops per cycle: the arithmetic the units could do
    ideal_op_cycles: float = 0.0  # sum of ideal cycles x peak ops per cycle

    def plus(self, w: TaskWork) -> Work:
        return Work(self.tasks + 1, self.busy_cycles + w.busy_cycles, self.ideal_cycles + w.ideal_cycles,
                    self.latency_cycles + w.latency_cycles, self.memory_stall_cycles + w.memory_stall_cycles,
                    self.communication_cycles + w.communication_cycles, self.wait_cycles + w.wait_cycles,
                    self.port_stall_cycles + w.port_stall_cycles, self.flops + w.flops,
                    self.peak_op_cycles + w.busy_cycles * w.peak_ops_per_cycle,
                    self.ideal_op_cycles + w.ideal_cycles * w.peak_ops_per_cycle)

    @property
    def utilization(self) -> float | None:
        """flops / (busy cycles x peak ops per cycle); None on units without an arithmetic peak."""
        return self.flops / self.peak_op_cycles if self.peak_op_cycles else None

    @property
    def mapping_efficiency(self) -> float | None:
        """flops / (ideal cycles x peak ops per cycle): an array's fold utilization; None without a peak."""
        return self.flops / self.ideal_op_cycles if self.ideal_op_cycles else None

    def figures(self) -> dict[str, int | float | None]:
        """The cycle and arithmetic figures by name, with utilization and mapping efficiency."""
        out: dict[str, int | float | None] = {f.name: getattr(self, f.name) for f in fields(self)
                                              if not f.name.endswith("op_cycles")}
        return out | {"utilization": self.utilization, "mapping_efficiency": self.mapping_efficiency}


@dataclass(frozen=True, slots=True)
class NodeDetail:
    """One graph node of a layer: its op and phase, the units it ran on, its Work, and the bytes its tasks
    moved through each memory port (reads and writes together, schedule/traffic.task_loads)."""

    node: int
    op: str
    phase: str
    units: tuple[str, ...]
    work: Work
    port_bytes: Pairs
    mappings: tuple[LoopNest, ...] = ()  # its mapping on each unit that searched one (schedule.mappings)

    def to_dict(self) -> dict:
        out = {"node": self.node, "op": self.op, "phase": self.phase, "units": list(self.units),
               **self.work.figures(), "port_bytes": dict(self.port_bytes)}
        if self.mappings:  # only where a unit searched mappings: other reports keep their keys
            out["mappings"] = [m.to_dict() for m in self.mappings]
        return out


@dataclass(frozen=True, slots=True)
class LayerRow:
    """One layer: its name, ops and units, its Work, the bytes it read and wrote per memory instance
    ("chip0:sram"), its dynamic energy per component ("arithmetic:mxu", "memory_read:chip0:dram", ...; pJ) and
    its nodes."""

    layer: str
    ops: tuple[str, ...]
    units: tuple[str, ...]
    work: Work
    bytes_read: Pairs
    bytes_written: Pairs
    energy_pj: tuple[tuple[str, float], ...]
    nodes: tuple[NodeDetail, ...]
    fusion_group: str = ""  # the fused chain it is a tile layer or the concat of ("first .. last"); "": none

    @property
    def total_energy_pj(self) -> float:
        return sum(pj for _, pj in self.energy_pj)

    @property
    def mapping(self) -> str | None:
        """Its nodes' mappings, one compact line each (`op unit dataflow rows<-... | loops | stream ...`), joined
        by "; "; None where no unit searched one."""
        lines = [f"{d.op} {m.compact()}" for d in self.nodes for m in d.mappings]
        return "; ".join(lines) if lines else None

    def to_dict(self) -> dict:
        out = {"layer": self.layer, "ops": list(self.ops), "units": list(self.units), **self.work.figures(),
               "bytes_read": dict(self.bytes_read), "bytes_written": dict(self.bytes_written),
               "energy_pj": self.total_energy_pj, "energy_by_component_pj": dict(self.energy_pj),
               "nodes": [n.to_dict() for n in self.nodes]}
        if self.mapping is not None:
            out["mapping"] = self.mapping
        if self.fusion_group:
            out["fusion_group"] = self.fusion_group
        return out


@dataclass(frozen=True, slots=True)
class LayerReport:
    """Every layer of a step, in model order (by the first node of each). `timeline`: "compiled", or the
    simulation mode whose spans gave the cycles. `static_energy_pj`: the step's leakage (None: the hardware
    has no energy figures; then every layer's energy is empty)."""

    graph: str
    hw: str
    timeline: str
    layers: tuple[LayerRow, ...]
    static_energy_pj: float | None

    def top_by_time(self, n: int = 10) -> list[LayerRow]:
        """The `n` layers with the most busy cycles (ties: model order)."""
        return sorted(self.layers, key=lambda r: -r.work.busy_cycles)[:n]

    def top_by_energy(self, n: int = 10) -> list[LayerRow]:
        """The `n` layers with the most dynamic energy (ties: model order)."""
        return sorted(self.layers, key=lambda r: -r.total_energy_pj)[:n]

    def to_dict(self) -> dict:
        return {"graph": self.graph, "hw": self.hw, "timeline": self.timeline,
                "static_energy_pj": self.static_energy_pj, "layers": [r.to_dict() for r in self.layers]}

    def columns(self) -> list[str]:
        """The CSV's columns: the figures, then bytes read and written per memory and energy per component
        (every label any layer has, in a fixed order)."""
        memories = sorted({m for r in self.layers for m, _ in r.bytes_read + r.bytes_written})
        parts = {c for r in self.layers for c, _ in r.energy_pj}
        energy = sorted(parts, key=lambda c: (ENERGY_KINDS.index(c.split(":", 1)[0]), c))
        mapped = ["mapping"] if any(r.mapping is not None for r in self.layers) else []
        fused = ["fusion_group"] if any(r.fusion_group for r in self.layers) else []
        return (["layer", "ops", "units", *Work().figures(), "energy_pj"] + [f"bytes_read:{m}" for m in memories]
                + [f"bytes_written:{m}" for m in memories] + [f"energy_pj:{c}" for c in energy] + mapped + fused)

    def rows(self) -> list[dict]:
        """One flat dict per layer with every column of `columns()` (0 where a layer has none)."""
        columns = self.columns()
        out = []
        for r in self.layers:
            row: dict = {"layer": r.layer, "ops": " ".join(r.ops), "units": " ".join(r.units),
                         **r.work.figures(), "energy_pj": r.total_energy_pj}
            row |= {f"bytes_read:{m}": b for m, b in r.bytes_read}
            row |= {f"bytes_written:{m}": b for m, b in r.bytes_written}
            row |= {f"energy_pj:{c}": pj for c, pj in r.energy_pj}
            row["mapping"] = r.mapping or ""
            row["fusion_group"] = r.fusion_group
            out.append({c: row.get(c, 0) for c in columns})
        return out


def _layer_energy(schedule: Schedule, hw: HwSpec, ids: list[int],
                  facts: TimelineFacts) -> tuple[Pairs, Pairs, tuple[tuple[str, float], ...]]:
    """(bytes read, bytes written, dynamic energy by component) of tasks `ids`, from the timeline energy."""
    breakdown = timeline_energy(schedule, hw, ran=ids, makespan_cycles=0, facts=facts)
    if breakdown is None:
        return (), (), ()
    read: dict[str, int] = defaultdict(int)
    written: dict[str, int] = defaultdict(int)
    energy = []
    for item in breakdown.items:
        if item.kind == "static":
            continue
        if item.kind == "memory_read":
            read[item.name] += int(item.quantity)
        elif item.kind == "memory_write":
            written[item.name] += int(item.quantity)
        energy.append((f"{item.kind}:{item.name}", item.energy_pj))
    return tuple(sorted(read.items())), tuple(sorted(written.items())), tuple(energy)


def _loop_nests(schedule: Schedule, hw: HwSpec, graph: Graph) -> dict[int, tuple[LoopNest, ...]]:
    """The schedule's recorded mappings as loop nests, by node (validated already: they fit)."""
    chips = chip_list(hw)
    out: dict[int, list[LoopNest]] = defaultdict(list)
    for m in schedule.mappings or ():
        unit = next(u for u in chips[m.chip].units if u.name == m.unit)
        mapping = Mapping(m.dataflow, m.rows, m.cols, m.stream, m.order)
        out[m.node].append(loop_nest(layer_dims(graph, graph.nodes[m.node]), mapping, unit.array.rows,
                                     unit.array.cols, unit_dataflows(unit), unit.name))
    return {node: tuple(nests) for node, nests in out.items()}


def build_layer_report(schedule: Schedule, hw: HwSpec, graph: Graph, result: Result | None = None) -> LayerReport:
    """The report of a schedule already validated against `hw` and `graph` (the compiler's, or api.resolve's):
    cycles from `result`'s spans when given (a simulation of this schedule), else from the compiled timeline."""
    if result is not None and (not isinstance(result, Result) or len(result.spans) != len(schedule.tasks)
                               or result.graph_name != schedule.graph_name):
        raise AccelsimError(f"layer report: result must be a simulation of this schedule ({schedule.graph_name!r}, "
                            f"{len(schedule.tasks)} tasks), got {type(result).__name__}"
                            + (f" of {result.graph_name!r} with {len(result.spans)} spans"
                               if isinstance(result, Result) else ""))
    names = layer_names(graph)
    groups = group_of_nodes(graph)
    works = task_work(schedule, hw, graph, timeline_of(schedule, None if result is None else result.spans))
    facts = timeline_facts(schedule, hw)
    loads = facts.loads
    nests = _loop_nests(schedule, hw, graph)
    by_layer: dict[str, dict[int, list[int]]] = defaultdict(lambda: defaultdict(list))
    for t in schedule.tasks:
        by_layer[names[t.node]][t.node].append(t.id)
    rows = []
    for layer, nodes in sorted(by_layer.items(), key=lambda kv: min(kv[1])):
        details = []
        for node_id, ids in sorted(nodes.items()):
            work, moved = Work(), defaultdict(int)
            for i in ids:
                work = work.plus(works[i])
                for memory, nbytes in loads[i].items():
                    moved[memory_label(schedule.tasks[i].chip, memory)] += nbytes
            n = graph.nodes[node_id]
            details.append(NodeDetail(node_id, n.op, n.phase, tuple(sorted({works[i].resource for i in ids})), work,
                                      tuple(sorted(moved.items())), nests.get(node_id, ())))
        ids = sorted(i for task_ids in nodes.values() for i in task_ids)
        total = Work()
        for i in ids:
            total = total.plus(works[i])
        read, written, energy = _layer_energy(schedule, hw, ids, facts)
        rows.append(LayerRow(layer, tuple(sorted({d.op for d in details})),
                             tuple(sorted({u for d in details for u in d.units})), total, read, written, energy,
                             tuple(details), next((groups[n] for n in sorted(nodes) if n in groups), "")))
    whole = timeline_energy(schedule, hw, makespan_cycles=None if result is None else result.makespan_cycles,
                            facts=facts)
    return LayerReport(schedule.graph_name, schedule.hw_name, "compiled" if result is None else result.mode,
                       tuple(rows), None if whole is None else whole.static_pj)


def layer_report(schedule: Schedule, hw: HwLike = None, graph: Graph | None = None,
                 result: Result | None = None) -> LayerReport:
    """The per-layer report of `schedule` (module docstring), after validating it against `hw` and `graph` as
    A.simulate does (defaults: the hardware it names, the graph rebuilt from its source). `result`: a
    simulation of it (A.simulate) whose timeline gives the cycles and port stalls; None: the compiled one."""
    hw, graph = resolve(schedule, hw, graph)
    return build_layer_report(schedule, hw, graph, result)
