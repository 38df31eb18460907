"""What each task of a schedule reads and writes where, from the tensors' placement: the facts the
validator checks durations and port bandwidth with and the simulator's static replay meters ports
with (the scheduler derives the same from its own placement, levels.port_loads)."""
from __future__ import annotations

from accelsim.hw.spec import HwSpec
from accelsim.schedule.kinds import TASK_KINDS, leaf_read_bytes, staged_bytes
from accelsim.schedule.levels import chip_list, memory_of, port_loads, preferred_memory
from accelsim.schedule.plan import Schedule
from accelsim.schedule.ports import unit_ports

Placed = tuple[str, int]
"""(memory name, bytes)."""
PartialReads = tuple[tuple[int, int, int], ...]
"""A task's partial_reads: (input node, elements read, elements of the input) each."""


def read_bytes(partial_reads: PartialReads, node: int, size_bytes: int) -> int:
    """Bytes a task reads of input `node` placed as `size_bytes`: its share of them when it reads only part of the
    input (`partial_reads`, OpDef.input_reads: a slice's window, rounded up), else all of them. The scheduler,
    the validator and both simulators charge an input's memory port with this, so a fused tile's slice moves its
    band of rows, not the group's whole input."""
    for n, read, whole in partial_reads:
        if n == node:
            return -(-size_bytes * read // whole)
    return size_bytes


Reader = tuple[str, int, int, PartialReads]
"""(kind, node, bytes moved, partial_reads) of a task reading its inputs (a schedule's Task gives bytes_moved, the
planner's TaskSpec port_bytes)."""


def input_read_bytes(task: Reader, node: int, size_bytes: int, staged: dict[int, int]) -> int:
    """Bytes `task` is charged for reading input `node` (a leaf, or a dependence's output by its node) placed as
    `size_bytes`: its share of the input (read_bytes: a slice's window) less what its prefetches staged in their
    buffers (`staged`, kinds.staged_bytes; a prefetch itself: the tile it stages, kinds.leaf_read_bytes). The
    scheduler's durations, the validator's port checks and both simulators' port loads all charge an input with
    this one rule: were any of them to compose it differently, a compiled schedule would be refused by the
    validator or replayed to another makespan than the one compiled."""
    kind, reader, moved, partial_reads = task
    return leaf_read_bytes((kind, reader, moved), node, read_bytes(partial_reads, node, size_bytes), staged)


def placed_io(schedule: Schedule, hw: HwSpec) -> tuple[list[list[Placed]], list[Placed | None]]:
    """Per task: its inputs (its dependences' outputs and its leaves, each at its placed memory and
    size; tensors in memories its chip lacks are left out for the validator to report) and its
    output as (memory, out_bytes), or None."""
    chips = chip_list(hw)
    where: dict[tuple, Placed] = {}
    for x in schedule.tensors:
        key = ("out", x.task) if x.task >= 0 else ("leaf", x.node, x.microbatch, x.replica, x.chip)
        where[key] = (x.memory, x.size_bytes)
    inputs: list[list[Placed]] = []
    outputs: list[Placed | None] = []
    tasks = schedule.tasks
    any_staging = any(TASK_KINDS[t.kind].stages for t in tasks)
    for t in tasks:
        chip = chips[t.chip] if t.chip < len(chips) else None
        # a streamed leaf or output: a prefetch reads its head, its reader (after it) the head in the buffer
        # and the rest where the leaf or the write-back's output lives (input_read_bytes)
        staging = [a for a in set(t.after) if a < len(tasks) and TASK_KINDS[tasks[a].kind].stages] if any_staging else []
        keys = [("out", d) for d in set(t.deps) | set(staging)]
        keys += [("leaf", node, mb, t.replica, t.chip) for node, mb in set(t.reads)]
        placed = [(k, where[k]) for k in keys
                  if k in where and chip is not None and memory_of(chip, where[k][0]) is not None]
        if any_staging:  # a staged tile is read as the bytes it holds, not its slot
            staged = staged_bytes((tasks[a].kind, tasks[a].node, tasks[a].bytes_moved) for a in staging)
            me = (t.kind, t.node, t.bytes_moved, t.partial_reads)
            placed = [(k, (m, input_read_bytes(me, k[1], b, staged) if k[0] == "leaf"
                           else tasks[k[1]].bytes_moved if k[1] in staging
                           else input_read_bytes(me, tasks[k[1]].node, b, staged)))
                      for k, (m, b) in placed]
        elif t.partial_reads:
            placed = [(k, (m, read_bytes(t.partial_reads, k[1] if k[0] == "leaf" else tasks[k[1]].node, b)))
                      for k, (m, b) in placed]
        inputs.append([p for _, p in placed if p[1]])
        x = where.get(("out", t.id))
        known = x is not None and t.out_chip < len(chips) and memory_of(chips[t.out_chip], x[0]) is not None
        outputs.append((x[0], t.out_bytes) if known else None)
    return inputs, outputs


def task_loads(schedule: Schedule, hw: HwSpec,
               io: tuple[list[list[Placed]], list[Placed | None]]) -> list[dict[str, int]]:
    """Per task, the bytes it moves through each memory port of its chip (levels.port_loads), given
    `io` = placed_io(schedule, hw)."""
    chips = chip_list(hw)
    ports = unit_ports(chips)
    inputs, outputs = io
    loads = []
    for t in schedule.tasks:
        port = ports.get((t.chip, t.resource))
        loads.append({} if port is None else port_loads(port[1], t.bytes_moved, inputs[t.id], outputs[t.id],
                                                        preferred_memory(chips[t.chip], t.resource)))
    return loads
