"""Seed 001's dynamic runtime ("scheduler + worker threads") on a schedule's task DAG (Schedule,
HwSpec -> Result). Ready tasks enter a FIFO work queue per chip and any free unit instance or link
among a task's candidates takes the first it can run whose output can have its space now: a unit never
sits on a task waiting for buffer space. A collective starts once every member is ready. A transfer or
collective then takes every physical link it crosses (hw/topology.py, schedule/collectives.py), one
holder per link at a time, in one global order so no two wait on each other. Outputs go to the unit's
own memory if it has room, else the next level with room, paying the spill's transfer time as the
scheduler charges it (schedule/levels.py); leaves take memory from their first reader's release on.
Space follows the compiled order (sim/space.py): no output takes the space its micro-batch's
earlier-scheduled outputs still need, and waiting leaves are served first-scheduled first, so a step the
compiler fitted in memory does not deadlock by the runtime's own order within a micro-batch. Beyond that
order no compiled decision is used: no unit choice, placement or in-flight window, only the schedule's
tasks (dependences, candidates, reads, output sizes) and its leaf tensors' sizes. The memory held at the
end (parameters, optimizer state, step results) matches the static schedule's. The compiled in-flight
window is a static decision too, so the runtime ignores it: it follows the tasks' data dependences
(`deps`), not their ordering edges (`after`), and may admit more micro-batches than fit (a deadlock then
names its cycle of waits, sim/waits.py). Its durations, ports and memories are the scheduler's, so it
reproduces a compiled timeline where it has no choice to make (a free unit for every ready task); where it
has, its first-come order is its own: on a chip with one vector unit it may copy a fused group's second
staged weight before a tile's padded input, which the compiled priorities put first
(tests/test_fused_staged_sim.py)."""
from __future__ import annotations

from collections import defaultdict

import simpy

from accelsim.hw.spec import HwSpec
from accelsim.hw.topology import Link, topology_of
from accelsim.schedule.collectives import links_of_schedule
from accelsim.schedule.identity import identity_of
from accelsim.hw.placement import placement_of, places_outputs
from accelsim.schedule.kinds import TASK_KINDS, staged_bytes
from accelsim.schedule.levels import (aligned, chip_list, dma_buffers, first_memory, is_result, memory_order, port_loads,
                                      preferred_memory, read_cycles, write_cycles)
from accelsim.schedule.plan import PER_STEP, Schedule, Task, memory_label, resource_label
from accelsim.schedule.ports import Port, unit_ports
from accelsim.schedule.traffic import input_read_bytes
from accelsim.sim.machine import ChannelKey, Memories, deadlock, memory_ports, result, run_to_end, take_bandwidth
from accelsim.sim.space import SpaceGrants
from accelsim.sim.trace import Result, Span
from accelsim.sim.waits import WaitGraph

Server = tuple[int, str, int]
"""(chip, resource, out_chip): a unit kind of a chip (out_chip == chip) or the link chip -> out_chip."""
LeafKey = tuple[int, int, int, int]
"""(node, micro-batch or PER_STEP, replica, chip): one leaf tensor."""


class WorkQueueRuntime(WaitGraph):
    """One run. Its state is explicit: the environment, memories and ports, a work queue per chip,
    a `done` event per task, where each output and leaf was put, how many readers each still has,
    and the record of what ran (spans, bytes moved, what each blocked task is waiting for)."""

    def __init__(self, schedule: Schedule, hw: HwSpec) -> None:
        self.env = env = simpy.Environment()
        self.schedule, self.hw = schedule, hw
        self.tasks = tasks = schedule.tasks
        self.chips = chip_list(hw)
        self.order = {c: [(c, m.name) for m in memory_order(chip)] for c, chip in enumerate(self.chips)}
        self.ranked: dict[tuple[int, str | None], list[Port]] = {}  # target's memories, by (chip, first)
        self.memories = Memories(env, schedule)
        self.ports = memory_ports(env, hw)
        self.unit_port = unit_ports(self.chips)
        self.queued: dict[int, list[Task]] = {c: [] for c in range(len(self.chips))}  # the FIFO work queue per chip
        self.idle: dict[int, list[tuple[Server, simpy.Event]]] = {c: [] for c in range(len(self.chips))}
        # per task: the servers that can run it and its cycles there
        self.cycles_on: list[dict[Server, int]] = [
            {(t.chip, c.resource, t.out_chip): c.cycles for c in schedule.candidates[t.candidates]} for t in tasks]
        self.done = [env.event() for _ in tasks]
        self.readers_left: dict[int, int] = defaultdict(int)  # data readers: the runtime ignores `after`
        for t in tasks:
            for d in t.deps:
                self.readers_left[d] += 1
        self.members: dict[int, list[Task]] = defaultdict(list)
        for t in tasks:
            if TASK_KINDS[t.kind].together:
                self.members[t.group].append(t)
        self.leaf_bytes: dict[LeafKey, int] = {(x.node, x.microbatch, x.replica, x.chip): x.size_bytes
                                               for x in schedule.tensors if x.task < 0}
        self.leaves_of = [sorted({(node, mb, t.replica, t.chip) for node, mb in t.reads}) for t in tasks]
        self.leaf_readers_left: dict[LeafKey, int] = defaultdict(int)
        for keys in self.leaves_of:
            for key in keys:
                self.leaf_readers_left[key] += 1
        self.leaf_home: dict[LeafKey, simpy.Event] = {}  # succeeds with the memory the leaf was put in
        self.leaf_placer: dict[LeafKey, int] = {}  # the reader that puts the leaf in memory
        # a placement (hw/placement.py) fixes where a leaf lives: the runtime puts it where the schedule did
        self.leaf_memory: dict[LeafKey, str] = {(x.node, x.microbatch, x.replica, x.chip): x.memory
                                                for x in schedule.tensors
                                                if x.task < 0 and x.chip < len(self.chips)
                                                and placement_of(self.chips[x.chip])}
        # a placement of outputs (gradients, activations, step results) fixes where a task writes: the runtime
        # writes every output of such a chip where the schedule did
        self.out_memory: dict[int, str] = {x.task: x.memory for x in schedule.tensors
                                           if x.task >= 0 and x.chip < len(self.chips)
                                           and places_outputs(self.chips[x.chip])}
        # a reader waits for its prefetches (ordering edges the runtime keeps, unlike the in-flight window's)
        self.staging = [[a for a in t.after if TASK_KINDS[tasks[a].kind].stages] for t in tasks]
        self.space = SpaceGrants(env, self.memories, tasks, {t.id: self.homes_of(t) for t in tasks if t.out_bytes})
        self.placed: dict[int, Port] = {}
        self.freed: set[int] = set()  # tasks whose output was given back
        self.ready_at: dict[int, int] = {}
        self.short_of_space: dict[int, int] = {}  # when a free unit first found no space for the task's output
        self.spans: list[Span | None] = [None] * len(tasks)
        self.waiting: dict[int, str] = {t.id: "its inputs" for t in tasks}
        self.moved: dict[ChannelKey, int] = defaultdict(int)
        self.topology = topology_of(hw)
        self.transfer_links: dict[int, tuple[Link, ...]] = {}  # transfer task id -> its route's links
        self.group_links: dict[int, tuple[Link, ...]] = {}  # collective group -> the links it crosses
        for h in links_of_schedule(schedule, self.topology):
            first = tasks[h.tasks[0]]
            if TASK_KINDS[first.kind].together:
                self.group_links[first.group] = h.links
            else:
                self.transfer_links[first.id] = h.links
        self.link_servers = {link: simpy.Resource(env, capacity=1) for held in
                             (*self.transfer_links.values(), *self.group_links.values()) for link in held}

    def run(self) -> Result:
        servers: dict[Server, int] = {}
        for t in self.tasks:
            if not TASK_KINDS[t.kind].together:
                for c in self.schedule.candidates[t.candidates]:
                    servers[(t.chip, c.resource, t.out_chip)] = c.instances
        for server, instances in sorted(servers.items()):
            for i in range(instances):
                self.env.process(self.worker(server, i))
        for t in self.tasks:
            self.env.process(self.release(t))
        events = run_to_end(self.env)
        if self.waiting:
            raise deadlock(self.schedule, self.waiting, self.why_blocked())
        return result("dynamic", self.schedule, self.hw, self.spans, self.memories, self.moved, events)

    def target(self, chip: int, nbytes: int, first: str | None = None) -> Port:
        """`first` (the unit's own memory) if it has room now, else the first memory in the chip's
        order with room, else the last (and wait there): the scheduler's ranking. A DMA buffer holds only
        its engine's prefetches: it is `first` for them and never a choice for anything else."""
        ranked = self.ranked.get((chip, first))
        if ranked is None:
            buffers = dma_buffers(self.chips[chip])
            ranked = [(chip, first)] if first in buffers else \
                sorted((p for p in self.order[chip] if p[1] not in buffers), key=lambda p: p[1] != first)
            self.ranked[(chip, first)] = ranked
        return next((p for p in ranked if self.memories.free(p) >= nbytes), ranked[-1])

    def homes_of(self, t: Task) -> frozenset[Port]:
        """The memories the task's output may go to (output_memory's choices): where a placement of outputs fixes
        it; a DMA engine's buffer for its prefetches; else any memory of its chip but those buffers."""
        chip = self.chips[t.out_chip]
        if t.id in self.out_memory:
            return frozenset({(t.out_chip, self.out_memory[t.id])})
        buffers = dma_buffers(chip)
        firsts = {first_memory(chip, r, is_result(t.keep, t.phase)) for _, r, _ in self.cycles_on[t.id]}
        homes = {m for m in firsts if m in buffers}
        if firsts - homes:
            homes |= {m.name for m in memory_order(chip) if m.name not in buffers}
        return frozenset((t.out_chip, m) for m in homes)

    def hold_leaves(self, t: Task):
        """The first reader of a leaf puts it in memory; later readers wait until it is there."""
        for key in self.leaves_of[t.id]:
            if key not in self.leaf_home:
                self.leaf_home[key] = self.env.event()
                self.leaf_placer[key] = t.id
                nbytes = self.leaf_bytes[key]
                home = self.leaf_memory.get(key)
                mem = (t.chip, home) if home is not None else self.target(t.chip, nbytes)
                self.waiting[t.id] = f"{nbytes} B of space in {memory_label(*mem)} for leaf %{key[0]}"
                yield self.ask(t, mem, nbytes, output=False)
                self.leaf_home[key].succeed(mem)
            if not self.leaf_home[key].processed:  # another reader is still taking its space
                yield self.leaf_home[key]

    def release(self, t: Task):
        """Wait for the task's inputs, then hand it to its chip's queue or its collective."""
        yield self.env.all_of([self.done[d] for d in t.deps + tuple(self.staging[t.id])])
        yield from self.hold_leaves(t)
        self.ready_at[t.id] = int(self.env.now)
        queued = self.start_collective(t) if TASK_KINDS[t.kind].together else self.queue(t)
        if queued is not None:
            yield queued

    def queue(self, t: Task) -> simpy.Event:
        """Put a ready task at the end of its chip's work queue; the idle units look at it once the returned
        event is processed (as a SimPy store's put is)."""
        names = sorted({resource_label(r, c, o) for c, r, o in self.cycles_on[t.id]})
        self.waiting[t.id] = f"a free unit among {', '.join(names)} on chip{t.chip}"
        self.queued[t.chip].append(t)
        put = self.env.event()
        put.callbacks.append(lambda _: self.dispatch())
        return put.succeed()

    def dispatch(self) -> None:
        """Each idle unit instance or link, longest idle first, takes the first queued task it can run whose
        output can have its space now (sim/space.py); a task without space stays queued, so no unit sits on a
        task waiting for buffer space, which would keep off it the tasks that free that space. Repeats while
        a dispatch lets a waiting leaf or collective have its space (a micro-batch's kept bytes shrink)."""
        while self.dispatch_once() and self.space.serve():
            pass

    def dispatch_once(self) -> bool:
        """One pass of dispatch; whether it gave some task's output space."""
        placed = False
        cycles_on = self.cycles_on
        no_room: set[tuple[int, str]] = set()  # (task, resource) refused space since the last task was taken
        found_none: set[Server] = set()  # servers that found no task they could take since then

        def fits(t: Task, resource: str) -> bool:
            """has_space, answered from no_room where nothing has changed since it said no: the idle instances of
            one unit kind would otherwise each try every queued task again (quadratic in the queue's length when
            many micro-batches wait for space)."""
            if (t.id, resource) in no_room:
                return False
            if self.has_space(t, resource):
                return True
            no_room.add((t.id, resource))
            return False

        for chip, idle in self.idle.items():
            queued = self.queued[chip]
            if not idle or not queued:
                continue
            still_idle = []
            for server, got in idle:
                i = None if server in found_none else next((i for i, t in enumerate(queued)
                                                            if server in cycles_on[t.id] and fits(t, server[1])), None)
                if i is None:
                    found_none.add(server)  # its other idle instances would find none either
                    still_idle.append((server, got))
                    continue
                t = queued.pop(i)
                no_room.clear()
                found_none.clear()
                got.succeed(t)
                placed = placed or bool(t.out_bytes)
            self.idle[chip] = still_idle
        return placed

    def has_space(self, t: Task, resource: str) -> bool:
        """Whether the task's output has its space, taking it now if it can be granted (sim/space.py)."""
        if not t.out_bytes or t.id in self.placed:
            return True
        mem = self.output_memory(t, resource)
        if self.space.try_take(t, mem, t.out_bytes):
            self.placed[t.id] = mem
            return True
        self.waiting[t.id] = f"{t.out_bytes} B of space in {memory_label(*mem)}"
        self.short_of_space.setdefault(t.id, int(self.env.now))
        return False

    def ask(self, t: Task, mem: Port, nbytes: int, output: bool) -> simpy.Event:
        """Request space for a leaf or a collective's output (they hold no unit while they wait)."""
        granted = self.space.request(t, mem, nbytes, output)
        if self.space.refused:  # only a task refused space could be dispatched now
            self.dispatch()
        return granted

    def give(self, mem: Port, nbytes: int) -> None:
        self.space.give(mem, nbytes)
        if self.space.refused:
            self.dispatch()

    def start_collective(self, t: Task) -> None:
        """The first member starts its collective's process, which waits for every member's inputs."""
        if t.id == self.members[t.group][0].id:
            self.env.process(self.collective(t.group))

    def output_memory(self, t: Task, resource: str) -> Port:
        """Where the output goes: where a placement of outputs fixes it, else levels' ranking from the memory
        `resource` writes (a step result: the backing memory)."""
        home = self.out_memory.get(t.id)
        if home is not None:
            return (t.out_chip, home)
        first = first_memory(self.chips[t.out_chip], resource, is_result(t.keep, t.phase))
        return self.target(t.out_chip, t.out_bytes, first)

    def output_space(self, t: Task, resource: str):
        """A collective member waits for its output's space."""
        if not t.out_bytes:
            return
        mem = self.output_memory(t, resource)
        self.waiting[t.id] = f"{t.out_bytes} B of space in {memory_label(*mem)}"
        yield self.ask(t, mem, t.out_bytes, output=True)
        self.placed[t.id] = mem

    def spill_of(self, t: Task, resource: str) -> int:
        """Writing the output to a memory other than the unit's own costs its transfer time there,
        as the scheduler charges it (levels.write_cycles)."""
        where = self.placed.get(t.id)
        if where is None:
            return 0
        return write_cycles(self.chips[t.out_chip], resource, where[1], t.out_bytes, self.hw.clock_hz)

    def inputs_of(self, t: Task) -> list[tuple[str, int]]:
        """(memory, bytes) of where each of the task's dependences' outputs (and its prefetches' staged heads)
        and leaves was put; of a streamed leaf, what it reads where the leaf lives (traffic.input_read_bytes)."""
        staging = self.staging[t.id]
        staged = staged_bytes((self.tasks[a].kind, self.tasks[a].node, self.tasks[a].bytes_moved) for a in staging)
        me = (t.kind, t.node, t.bytes_moved, t.partial_reads)  # of a streamed output, the head is read in the buffer
        inputs = [(self.placed[d][1], input_read_bytes(me, self.tasks[d].node, aligned(self.tasks[d].out_bytes),
                                                       staged))
                  for d in set(t.deps) if d in self.placed]
        inputs += [(self.placed[a][1], self.tasks[a].bytes_moved) for a in staging if a in self.placed]
        leaves = [(self.leaf_home[k].value[1], input_read_bytes(me, k[0], self.leaf_bytes[k], staged))
                  for k in self.leaves_of[t.id]]
        return [x for x in inputs + leaves if x[1]]

    def worker(self, server: Server, instance: int):
        """One unit instance or link: runs the tasks dispatch gives it, forever. A unit task lasts
        and loads the memory ports as the scheduler charges them (levels.read_cycles, write_cycles,
        port_loads) for where its tensors were put."""
        env, waiting = self.env, self.waiting
        chip, resource, out_chip = server
        port_key = self.unit_port.get((chip, resource))
        own = preferred_memory(self.chips[chip], resource)
        cycles_on = self.cycles_on
        while True:
            got = env.event()
            self.idle[chip].append((server, got))
            self.dispatch()
            t = yield got
            t_unit = int(env.now)
            loads = {}
            cycles = cycles_on[t.id][server]
            if port_key is not None:
                inputs = self.inputs_of(t)
                cycles = max(cycles, read_cycles(self.chips[chip], port_key[1], inputs, self.hw.clock_hz))
                output = (self.placed[t.id][1], t.out_bytes) if t.id in self.placed else None
                loads = port_loads(port_key[1], t.bytes_moved, inputs, output, own)
            cycles += self.spill_of(t, resource)
            links = yield from self.take_links([t], self.transfer_links.get(t.id, ()))
            held = yield from take_bandwidth(self.ports, chip, loads, cycles, waiting, t.id)
            t_port = int(env.now)
            waiting.pop(t.id, None)
            yield env.timeout(cycles)
            for port, rate in held:
                port.put(rate)
            self.give_links(links)
            for memory, nbytes in loads.items():
                self.moved[(chip, out_chip, memory)] += nbytes
            if port_key is None:
                self.moved[(chip, out_chip, "")] += t.bytes_moved  # a link's bytes
            ready = self.ready_at[t.id]
            short = min(self.short_of_space.get(t.id, t_unit), t_unit)  # from then on it lacked space, not a unit
            self.finish(t, resource, instance, t_port, (("unit", short - ready), ("buffer_space", t_unit - short),
                                                        ("memory_port", t_port - t_unit)))

    def collective(self, group: int):
        """Every member starts once all members' inputs are ready and their outputs have space."""
        members = self.members[group]
        collective = self.schedule.candidates[members[0].candidates][0]
        yield self.env.all_of([self.done[d] for m in members for d in m.deps])
        for m in members:
            yield from self.output_space(m, collective.resource)
        links = yield from self.take_links(members, self.group_links.get(group, ()))
        start = int(self.env.now)
        yield self.env.timeout(collective.cycles)
        self.give_links(links)
        for m in members:
            self.finish(m, collective.resource, 0, start, (("unit", start - self.ready_at[m.id]),))

    def take_links(self, tasks: list[Task], links: tuple[Link, ...]):
        """Take `links` one by one in their sorted order (every holder does, so none waits on another
        holding a link it needs); returns the requests, for give_links."""
        held = []
        for link in sorted(links):
            request = self.link_servers[link].request()
            if not request.triggered:
                for t in tasks:
                    self.waiting[t.id] = f"its turn on {self.topology.label(link)}"
            yield request
            held.append((link, request))
        return held

    def give_links(self, held: list) -> None:
        for link, request in held:
            self.link_servers[link].release(request)

    def finish(self, t: Task, resource: str, instance: int, start: int, stalls: tuple[tuple[str, int], ...]) -> None:
        """Record the task's span, with its cycles between ready and start by cause, and release its inputs."""
        ready = self.ready_at[t.id]
        self.spans[t.id] = Span(**identity_of(t), task=t.id, resource=resource_label(resource, t.chip, t.out_chip),
                                instance=instance, ready=ready, start=start, end=int(self.env.now),
                                planned_start=ready, stalls=tuple((c, int(v)) for c, v in stalls if v))
        self.waiting.pop(t.id, None)
        self.done[t.id].succeed()
        self.release_inputs(t)

    def release_output(self, task_id: int) -> None:
        """Give back a task's output once nothing will read it; a step result stays to the end."""
        if task_id in self.placed and not self.tasks[task_id].keep:
            self.freed.add(task_id)
            self.give(self.placed[task_id], self.tasks[task_id].out_bytes)

    def release_inputs(self, t: Task) -> None:
        """Give back outputs after their last reader (an output nobody reads once written), and
        per-input leaves after theirs (parameters and optimizer state stay for the step)."""
        if not self.readers_left[t.id]:
            self.release_output(t.id)
        for d in t.deps:
            self.readers_left[d] -= 1
            if not self.readers_left[d]:
                self.release_output(d)
        for key in self.leaves_of[t.id]:
            self.leaf_readers_left[key] -= 1
            if self.leaf_readers_left[key] == 0 and key[1] != PER_STEP:
                self.give(self.leaf_home[key].value, self.leaf_bytes[key])


def run_work_queue(schedule: Schedule, hw: HwSpec) -> Result:
    return WorkQueueRuntime(schedule, hw).run()
