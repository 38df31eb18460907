"""The simulated machine both modes share: capacity-limited memories with an occupancy log, memory
ports metered in milli-bytes per cycle, the bytes each port and link moved, and the Result built
from what ran. Memories and ports are keyed by typed (chip, memory) pairs."""
from __future__ import annotations

import simpy

from accelsim import metrics
from accelsim.errors import AccelsimError
from accelsim.hw.spec import HwSpec
from accelsim.hw.topology import topology_of
from accelsim.schedule.levels import chip_list, memory_of
from accelsim.schedule.plan import Schedule, Task, memory_label
from accelsim.schedule.ports import MILLI, Port, port_capacities, port_rate
from accelsim.sim.energy import timeline_energy
from accelsim.sim.trace import Channel, MemoryTrace, Result, Span

ChannelKey = tuple[int, int, str]
"""(chip, out_chip, memory): a memory's port (out_chip == chip), or the link chip -> out_chip (memory "")."""


class SimulationError(AccelsimError):
    """The simulated machine deadlocked (e.g. buffers too small for the work in flight)."""


class Memories:
    """One SimPy container of free bytes per memory instance, with a log of the bytes in use."""

    def __init__(self, env: simpy.Environment, schedule: Schedule) -> None:
        self.env = env
        self.capacity: dict[Port, int] = {(m.chip, m.memory): m.capacity_bytes for m in schedule.memories}
        self.stores = {p: simpy.Container(env, capacity=c, init=c) for p, c in self.capacity.items()}
        self.log: dict[Port, list[tuple[int, int]]] = {p: [(0, 0)] for p in self.capacity}

    def used(self, mem: Port) -> int:
        return self.capacity[mem] - int(self.stores[mem].level)

    def free(self, mem: Port) -> int:
        return int(self.stores[mem].level)

    def take(self, mem: Port, nbytes: int):
        """A SimPy process step: wait until `nbytes` are free in `mem`, then hold them."""
        yield self.stores[mem].get(nbytes)
        self._note(mem)

    def take_now(self, mem: Port, nbytes: int) -> None:
        """Hold `nbytes` of `mem` at once: the caller (sim/space.py) has checked that they are free."""
        assert self.free(mem) >= nbytes, (mem, nbytes, self.free(mem))
        self.stores[mem].get(nbytes)
        self._note(mem)

    def give(self, mem: Port, nbytes: int) -> None:
        self.stores[mem].put(nbytes)
        self._note(mem)

    def _note(self, mem: Port) -> None:
        log, now = self.log[mem], int(self.env.now)
        if log[-1][0] == now:
            log[-1] = (now, self.used(mem))
        else:
            log.append((now, self.used(mem)))

    def traces(self) -> tuple[MemoryTrace, ...]:
        return tuple(MemoryTrace(c, m, self.capacity[(c, m)], tuple(self.log[(c, m)])) for c, m in self.capacity)


def memory_ports(env: simpy.Environment, hw: HwSpec) -> dict[Port, simpy.Container]:
    """(chip, memory) -> its port's bandwidth in integer milli-bytes per cycle (schedule/ports.py):
    exact arithmetic, so returning a share never overfills the port."""
    return {p: simpy.Container(env, capacity=cap, init=cap) for p, cap in port_capacities(hw, chip_list(hw)).items()}


def take_bandwidth(ports: dict[Port, simpy.Container], chip: int, loads: dict[str, int], cycles: int,
                   waiting: dict[int, str], task_id: int, contention: bool = True):
    """Take each port's share of a task's `loads` (memory -> bytes, levels.port_loads) for `cycles`, at the
    rate the scheduler books (ports.port_rate), waiting where a port is full; with `contention` off,
    take none. Returns the (port, rate) pairs held, for the caller to put back when the task ends."""
    held = []
    for memory, nbytes in loads.items():
        port = ports[(chip, memory)]
        rate = port_rate(nbytes, cycles, port.capacity)
        if contention and rate:
            waiting[task_id] = f"{rate / MILLI:.1f} B/cycle of bandwidth on port {memory_label(chip, memory)}"
            yield port.get(rate)
            held.append((port, rate))
    return held


def run_to_end(env: simpy.Environment) -> int:
    """Run until no event is left, counting processed events (the simulator's unit of work)."""
    events = 0
    step = env.step
    while True:
        try:
            step()
        except simpy.core.EmptySchedule:
            return events
        events += 1


def describe(t: Task) -> str:
    return f"task {t.id} ({t.kind} {t.op} %{t.node}, mb {t.microbatch}, replica {t.replica}, chip{t.chip})"


def deadlock(schedule: Schedule, waiting: dict[int, str], why: str = "") -> SimulationError:
    """The error for tasks still blocked when no event is left: `why` (a paragraph naming the cycle of waits,
    where the runtime found one), then each blocked task with what it waits for."""
    lines = [f"  {describe(schedule.tasks[t])}: waiting for {what}" for t, what in sorted(waiting.items())[:12]]
    more = f"\n  ... and {len(waiting) - 12} more" if len(waiting) > 12 else ""
    cause = f"\n{why}\n" if why else "\n"
    return SimulationError(f"simulation of {schedule.graph_name} deadlocked with {len(waiting)} task(s) blocked:"
                           + cause + "\n".join(lines) + more)


def channels(hw: HwSpec, moved: dict[ChannelKey, int]) -> tuple[Channel, ...]:
    """Every port and link that moved bytes, with its peak bandwidth in bytes per cycle (a chip pair's:
    its route's slowest link, hw/topology.py)."""
    chips = chip_list(hw)
    topo = topology_of(hw)
    out = []
    for (chip, out_chip, memory), nbytes in sorted(moved.items()):
        if not nbytes:
            continue
        if memory:
            bandwidth = memory_of(chips[chip], memory).bytes_per_cycle(hw.clock_hz)
        else:
            bandwidth = topo.route(chip, out_chip).bytes_per_cycle if topo is not None else 0.0
        out.append(Channel(chip, out_chip, memory, nbytes, bandwidth))
    return tuple(out)


def result(mode: str, schedule: Schedule, hw: HwSpec, spans: list[Span | None], memories: Memories,
           moved: dict[ChannelKey, int], events: int) -> Result:
    ran = tuple(s for s in spans if s is not None)
    makespan = max((s.end for s in ran), default=0)
    chans = channels(hw, moved)
    energy = timeline_energy(schedule, hw, (s.task for s in ran), makespan_cycles=makespan,
                             port_bytes={(c.chip, c.memory): c.bytes_moved for c in chans if c.memory})
    return Result(
        mode=mode, graph_name=schedule.graph_name, hw_name=hw.name, clock_hz=hw.clock_hz,
        samples_per_step=schedule.samples_per_step, spans=ran,
        makespan_cycles=makespan, compiled_makespan_cycles=schedule.makespan_cycles,
        memories=memories.traces(), channels=chans,
        unit_instances=metrics.unit_instances(hw, (s.chip for s in ran)), events=events,
        energy_pj=None if energy is None else energy.total_pj, energy=energy)
