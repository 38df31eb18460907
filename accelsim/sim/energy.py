"""The energy of a step from what its timeline moved (Schedule, HwSpec, the tasks that ran, the bytes each
memory port moved, the makespan -> EnergyBreakdown): every operation at its unit's precision, every byte at
each memory it is read from or written to and each link it crosses, and every component's static power
over the makespan, idle or not.

What is charged, per task that ran (pJ figures from cost/energy.py):
- arithmetic: its FLOPs at its unit's pJ/op (the unit it ran on, at the precision the step computes in:
  cost/energy.op_precision; the unit's own without a step precision).
- unit buffers: what the cost model charged it inside its unit (operand and input/output buffers), i.e. its
  cost-model energy (Task.energy_pj) less its arithmetic and its port traffic at its port memory; the
  schedule does not carry a unit's buffer traffic itself. Never negative. (A task carries the energy of its
  node on its fastest unit kind; one that ran on another kind leaves the difference here.)
- memory reads and writes: its loads (schedule/levels.port_loads: operands through its port, inputs that
  live in other memories, such as parameters in DRAM or spilled activations, through theirs, and its output
  where it was written, step results in the backing memory included) at each memory's pJ/byte. Its port
  traffic counts its output's bytes as written and the rest as read. Given the bytes each memory's port
  moved in the simulation (the static replay moves exactly these loads; the dynamic runtime places outputs
  itself), those totals are charged, split into reads and writes as the schedule's loads split them.
  A transfer or a collective member reads its bytes where its largest input lives and writes its output
  where it was placed (on the destination chip): no memory port meters these, so they come from the schedule.
  A prefetch (a streamed placement's DMA engine, hw/placement.py) loads ports like a unit task: its tile is
  read where the leaf lives and written in the stream's buffer; its reader reads the tile there and the rest
  of the leaf where the leaf lives.
- links: a transfer's bytes at the link pJ/byte on every physical link of its route; a collective's bytes
  (its members' together) once, spread evenly over the links it holds.
- static: every chip the hardware describes, idle or not (cost/energy.chip_static_power), over the makespan.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Iterable, Literal, Mapping, get_args

from accelsim.cost.energy import chip_static_power, link_pj_per_byte, memory_pj_per_byte, unit_pj_per_op
from accelsim.hw.precision import at_precision
from accelsim.hw.spec import HwSpec
from accelsim.hw.topology import topology_of
from accelsim.schedule.collectives import links_of_schedule
from accelsim.schedule.kinds import TASK_KINDS, Holds
from accelsim.schedule.levels import chip_list, memory_of
from accelsim.schedule.plan import Schedule, memory_label
from accelsim.schedule.traffic import Placed, placed_io, task_loads

EnergyKind = Literal["arithmetic", "unit_buffers", "memory_read", "memory_write", "link", "static"]
ENERGY_KINDS: tuple[str, ...] = get_args(EnergyKind)
OFF_CHIP = ("dram", "hbm")
"""Memory kinds on other dies: their reads and writes are the off-chip memory energy."""


@dataclass(frozen=True, slots=True)
class EnergyItem:
    """One component's energy in one step. `name`: a unit kind (arithmetic, unit_buffers), a memory instance
    "chip<c>:<memory>" (memory_read, memory_write), a link "link:0->1", or a chip kind's component
    "<chip>:<unit or memory>" over all its copies (static). `quantity` in `unit`: ops, bytes or watts ("":
    not known, for unit buffers, whose bytes the schedule does not carry)."""

    kind: EnergyKind
    name: str
    quantity: float
    unit: Literal["op", "B", "W", ""]
    energy_pj: float
    memory_kind: str = ""  # the memory's kind (sram, cache, dram, hbm) for memory_read and memory_write


@dataclass(frozen=True, slots=True)
class EnergyBreakdown:
    """A step's energy by component (items in ENERGY_KINDS order, then by name). Everything sums to
    `total_pj`; `static_pj` is the leakage part, `dynamic_pj` the rest."""

    items: tuple[EnergyItem, ...]
    makespan_s: float

    @property
    def total_pj(self) -> float:
        return sum(i.energy_pj for i in self.items)

    @property
    def static_pj(self) -> float:
        return self.kind_pj("static")

    @property
    def dynamic_pj(self) -> float:
        return self.total_pj - self.static_pj

    @property
    def memory_pj(self) -> float:
        """Reads and writes of every memory."""
        return self.kind_pj("memory_read") + self.kind_pj("memory_write")

    @property
    def off_chip_pj(self) -> float:
        """Reads and writes of DRAM and HBM."""
        return sum(i.energy_pj for i in self.items if i.memory_kind in OFF_CHIP)

    def kind_pj(self, kind: str) -> float:
        """The energy of every item of `kind` (one of ENERGY_KINDS), pJ."""
        if kind not in ENERGY_KINDS:
            raise ValueError(f"no energy kind {kind!r} (known: {', '.join(ENERGY_KINDS)})")
        return sum(i.energy_pj for i in self.items if i.kind == kind)

    def to_dict(self) -> dict[str, dict[str, float]]:
        """kind -> name -> pJ, every kind present (empty where nothing was charged)."""
        out: dict[str, dict[str, float]] = {k: {} for k in ENERGY_KINDS}
        for i in self.items:
            out[i.kind][i.name] = i.energy_pj
        return out


def _unit_items(schedule: Schedule, hw: HwSpec, ran: list[int]) -> list[EnergyItem]:
    chips = chip_list(hw)
    ops: dict[str, int] = defaultdict(int)
    arith: dict[str, float] = defaultdict(float)
    inside: dict[str, float] = defaultdict(float)
    for tid in ran:
        t = schedule.tasks[tid]
        if TASK_KINDS[t.kind].holds is not Holds.UNIT:
            continue
        chip = chips[t.chip]
        unit = next((u for u in chip.units if u.name == t.resource), None)
        if unit is None:
            continue
        per_op = unit_pj_per_op(hw, chip, unit, t.phase) or 0.0
        port = memory_pj_per_byte(chip, chip.memory(unit.reads[0])) or 0.0
        ops[unit.name] += t.flops
        arith[unit.name] += t.flops * per_op
        rest = t.energy_pj - t.flops * per_op - t.bytes_moved * port
        inside[unit.name] += rest if rest > 1e-9 * t.energy_pj else 0.0  # below: rounding of the same sum
    items = [EnergyItem("arithmetic", n, ops[n], "op", arith[n]) for n in sorted(ops)]
    return items + [EnergyItem("unit_buffers", n, 0, "", inside[n]) for n in sorted(inside) if inside[n] > 0]


Traffic = dict[tuple[int, str], list[int]]
"""(chip, memory) -> [bytes read, bytes written]."""
PlacedIO = tuple[list[list[Placed]], list[Placed | None]]
"""schedule.traffic.placed_io's answer: per task its inputs and its output, each as (memory, bytes)."""


@dataclass(frozen=True)
class TimelineFacts:
    """What timeline_energy reads from the whole schedule, whichever tasks it is asked about: where each task's
    inputs and output were placed, what it moved through each port, and the links each transfer or collective
    crossed. Computed once by timeline_facts when the energy of many subsets is asked for (a per-layer
    report: otherwise every layer re-derives them from every task)."""

    io: PlacedIO
    loads: list[dict[str, int]]
    links: tuple


def timeline_facts(schedule: Schedule, hw: HwSpec) -> TimelineFacts:
    io = placed_io(schedule, hw)
    return TimelineFacts(io, task_loads(schedule, hw, io), tuple(links_of_schedule(schedule, topology_of(hw))))


def _port_traffic(schedule: Schedule, ran: list[int], facts: TimelineFacts) -> Traffic:
    """What the unit tasks in `ran` move through memory ports (their loads), split into reads and writes."""
    loads = facts.loads
    outputs = facts.io[1]
    split: Traffic = defaultdict(lambda: [0, 0])
    for tid in ran:
        t = schedule.tasks[tid]
        out = outputs[tid]
        for memory, nbytes in loads[tid].items():
            rw = split[(t.chip, memory)]
            if memory == t.port:  # its operands and its result as the cost model streams them, and its
                # output again if it was placed here outside its unit's own memory
                written = min(t.out_bytes, t.bytes_moved) + max(0, nbytes - t.bytes_moved)
            else:
                written = out[1] if out is not None and out[0] == memory else 0
            written = min(written, nbytes)
            rw[0] += nbytes - written
            rw[1] += written
    return split


def _link_end_traffic(schedule: Schedule, ran: list[int], io: PlacedIO) -> Traffic:
    """What transfers and collectives in `ran` read at their source and write at their destination: their bytes
    from the memory holding their largest input, their output where it was placed (no memory port meters these)."""
    inputs, outputs = io
    split: Traffic = defaultdict(lambda: [0, 0])
    for tid in ran:
        t = schedule.tasks[tid]
        if TASK_KINDS[t.kind].holds in (Holds.UNIT, Holds.DMA) or not t.bytes_moved:  # ports meter these
            continue
        if inputs[tid]:
            source = max(inputs[tid], key=lambda placed: (placed[1], placed[0]))[0]
            split[(t.chip, source)][0] += t.bytes_moved
        if outputs[tid] is not None:
            split[(t.out_chip, outputs[tid][0])][1] += outputs[tid][1]
    return split


def _memory_items(schedule: Schedule, hw: HwSpec, ran: list[int],
                  port_bytes: Mapping[tuple[int, str], int] | None, facts: TimelineFacts) -> list[EnergyItem]:
    chips = chip_list(hw)
    io = facts.io
    split = _port_traffic(schedule, ran, facts)
    if port_bytes is not None:  # the simulation's totals, split as the schedule's loads split them
        split = {k: [v - min(split.get(k, [0, 0])[1], v), min(split.get(k, [0, 0])[1], v)]
                 for k, v in port_bytes.items() if v}
    total: Traffic = defaultdict(lambda: [0, 0])
    for part in (split, _link_end_traffic(schedule, ran, io)):
        for key, (read, written) in part.items():
            total[key][0] += read
            total[key][1] += written
    items = []
    for (chip, memory), (read, written) in sorted(total.items()):
        mem = memory_of(chips[chip], memory)
        per_byte = memory_pj_per_byte(chips[chip], mem) or 0.0
        label = memory_label(chip, memory)
        for kind, nbytes in (("memory_read", read), ("memory_write", written)):
            if nbytes:
                items.append(EnergyItem(kind, label, nbytes, "B", nbytes * per_byte, mem.kind))
    return sorted(items, key=lambda i: (ENERGY_KINDS.index(i.kind), i.name))


def _link_items(schedule: Schedule, hw: HwSpec, ran: set[int], facts: TimelineFacts) -> list[EnergyItem]:
    topo = topology_of(hw)
    per_byte = link_pj_per_byte(hw) or 0.0
    moved: dict[str, float] = defaultdict(float)
    for h in facts.links:
        nbytes = sum(schedule.tasks[t].bytes_moved for t in h.tasks if t in ran)
        together = TASK_KINDS[schedule.tasks[h.tasks[0]].kind].together
        share = nbytes / len(h.links) if together else nbytes
        for link in h.links:
            moved[topo.label(link)] += share
    return [EnergyItem("link", name, moved[name], "B", moved[name] * per_byte) for name in sorted(moved)
            if moved[name]]


def _static_items(hw: HwSpec, makespan_s: float) -> list[EnergyItem]:
    watts: dict[str, float] = defaultdict(float)
    for chip in hw.chips:
        for p in chip_static_power(hw, chip):
            suffix = " operand buffers" if p.component == "operand_buffers" else ""
            watts[f"{chip.name}:{p.name}{suffix}"] += p.power_w * chip.count
    return [EnergyItem("static", name, watts[name], "W", watts[name] * makespan_s * 1e12) for name in sorted(watts)]


def timeline_energy(schedule: Schedule, hw: HwSpec, ran: Iterable[int] | None = None,
                    port_bytes: Mapping[tuple[int, str], int] | None = None,
                    makespan_cycles: int | None = None, facts: TimelineFacts | None = None) -> EnergyBreakdown | None:
    """The step's energy by component (module docstring); None when the hardware has no energy figures
    (schedule.energy_pj is None). `ran`: ids of the tasks that ran (default all); `port_bytes`: (chip,
    memory) -> bytes its port moved in a simulation (default the schedule's loads); `makespan_cycles`:
    the simulated makespan (default the compiled one); `facts`: timeline_facts(schedule, hw), when the caller
    asks about many subsets of one schedule."""
    if schedule.energy_pj is None:
        return None
    hw = at_precision(hw, schedule.options.precision)  # ops at the step's precision, as compile resolved it
    facts = facts if facts is not None else timeline_facts(schedule, hw)
    ids = sorted(range(len(schedule.tasks)) if ran is None else set(ran))
    cycles = schedule.makespan_cycles if makespan_cycles is None else makespan_cycles
    makespan_s = cycles / hw.clock_hz
    items = (_unit_items(schedule, hw, ids) + _memory_items(schedule, hw, ids, port_bytes, facts)
             + _link_items(schedule, hw, set(ids), facts) + _static_items(hw, makespan_s))
    return EnergyBreakdown(tuple(items), makespan_s)
