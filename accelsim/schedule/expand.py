"""Expand a graph into the task DAG a step executes: node tasks per (micro-batch, replica), gradient
accumulation over micro-batches, all-reduce over replicas, transfers between chips, with every
task's candidate resources and their costs (Graph, HwSpec, options -> list[TaskSpec])."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache

from accelsim.cost.model import capable_units, node_cost
from accelsim.errors import ScheduleError
from accelsim.graph.ir import Graph, Node
from accelsim.hw.spec import Chip, HwSpec
from accelsim.ops import add
from accelsim.ops.registry import numel
from accelsim.schedule.plan import PER_STEP, Options
from accelsim.schedule.stages import partition_stages


@dataclass
class TaskSpec:
    """A task before it has a time: `options` are (resource, instances, cycles) it may run on."""

    id: int
    kind: str
    node: int
    op: str
    phase: str
    microbatch: int
    replica: int
    stage: int
    chip: int
    out_chip: int
    deps: list[int]
    options: list[tuple[str, int, int]]
    out_bytes: int
    port_bytes: int = 0  # bytes streamed through a memory port or a link while it runs
    keep: bool = False  # its output is a result of the step (a forward output, an update): never freed
    group: int = -1  # all-reduce tasks of one gradient share a group and are scheduled together
    reads: list[tuple[int, int, int]] = field(default_factory=list)  # leaf tensors: (node, mb, replica)


@dataclass
class Plan:
    """The expanded step: tasks in a topological order (ids ascending), plus placement facts."""

    tasks: list[TaskSpec]
    chips: list[Chip]
    stage_of_node: list[int]
    chip_of: dict[tuple[int, int], int]  # (replica, stage) -> chip
    leaf_bytes: dict[int, int]
    node_names: list[str]


def chip_list(hw: HwSpec) -> list[Chip]:
    return [c for c in hw.chips for _ in range(c.count)]


def chip_map(n_chips: int, options: Options) -> dict[tuple[int, int], int]:
    """(replica, stage) -> chip: replicas side by side, stages of a replica on consecutive chips;
    with more replicas than chips allow, replicas share the chips' units."""
    d, p = options.data_parallel, options.pipeline_stages
    if p > n_chips:
        raise ScheduleError(f"pipeline_stages={p} needs {p} chips, but the hardware has {n_chips}")
    if p > 1 and d * p > n_chips:
        raise ScheduleError(f"data_parallel={d} x pipeline_stages={p} needs {d * p} chips, the hardware has {n_chips}")
    return {(r, s): (r * p + s) % n_chips for r in range(d) for s in range(p)}


def _hops(hw: HwSpec, a: int, b: int, n: int) -> int:
    if hw.interconnect is None or hw.interconnect.topology == "fully_connected":
        return 1
    return min(abs(a - b), n - abs(a - b))


def expand(graph: Graph, hw: HwSpec, options: Options, window: int | None = None) -> Plan:
    """`window`: the most micro-batches of a replica in flight at once (None: all of them)."""
    for key in ("microbatches", "data_parallel", "pipeline_stages"):
        if getattr(options, key) < 1:
            raise ScheduleError(f"{key} must be >= 1, got {getattr(options, key)}")
    chips = chip_list(hw)
    cmap = chip_map(len(chips), options)
    m, d = options.microbatches, options.data_parallel
    clock = hw.clock_hz
    link_bw = hw.interconnect.bytes_per_cycle(clock) if hw.interconnect else 0.0
    link_lat = hw.interconnect.link_latency_cycles if hw.interconnect else 0

    def nbytes(node: Node) -> int:
        return numel(node.shape) * hw.elem_bytes(node.dtype)

    @lru_cache(maxsize=None)
    def node_options(node_id: int, chip_idx: int) -> tuple[tuple[str, int, int], ...]:
        chip = chips[chip_idx]
        node = graph.nodes[node_id]
        return tuple((u.name, 1 if u.gang else u.count, node_cost(hw, graph, node, u, chip).cycles)
                     for u in capable_units(hw, graph, node, chip))

    @lru_cache(maxsize=None)
    def node_bytes(node_id: int) -> int:
        node = graph.nodes[node_id]
        unit = capable_units(hw, graph, node, chips[0])[0]
        c = node_cost(hw, graph, node, unit, chips[0])
        return c.bytes_read + c.bytes_written

    @lru_cache(maxsize=None)
    def add_options(shape: tuple[int, ...], dtype: str, chip_idx: int) -> tuple[tuple[str, int, int], ...]:
        g = Graph("accumulate", dtype="float64" if dtype == "float64" else "float32")
        s = add(g.input("a", shape), g.input("b", shape))
        return tuple((u.name, 1 if u.gang else u.count, node_cost(hw, g, s.node, u, chips[chip_idx]).cycles)
                     for u in capable_units(hw, g, s.node, chips[chip_idx]))

    compute = [n for n in graph.nodes if not n.is_leaf]
    serial = {n.id: min(c for _, _, c in node_options(n.id, 0)) for n in compute}
    stage = partition_stages(graph, serial, options.pipeline_stages)
    tasks: list[TaskSpec] = []

    def new(**kw) -> TaskSpec:
        t = TaskSpec(id=len(tasks), **kw)
        tasks.append(t)
        return t

    # producer[(node, mb, replica)] -> task id; transfers cached per (task, destination chip)
    producer: dict[tuple[int, int, int], int] = {}
    moved: dict[tuple[int, int], int] = {}

    def on_chip(src: int, chip: int) -> int:
        """The task whose output is task `src`'s tensor on `chip` (a transfer if it lives elsewhere)."""
        t = tasks[src]
        if t.out_chip == chip:
            return src
        if (src, chip) not in moved:
            nb = t.out_bytes
            cycles = math.ceil(nb / link_bw) + link_lat * _hops(hw, t.out_chip, chip, len(chips))
            tr = new(kind="transfer", node=t.node, op="transfer", phase=t.phase, microbatch=t.microbatch,
                     replica=t.replica, stage=t.stage, chip=t.out_chip, out_chip=chip, deps=[src],
                     options=[(f"link:{t.out_chip}->{chip}", 1, cycles)], out_bytes=nb, port_bytes=nb)
            moved[(src, chip)] = tr.id
        return moved[(src, chip)]

    results = set(graph.outputs.values())
    update_nodes = [n for n in compute if n.phase == "update"]
    grad_nodes = sorted({i for n in update_nodes for i in n.inputs if graph.nodes[i].phase == "backward"})

    def node_task(n: Node, mb: int, r: int, source_mb) -> TaskSpec:
        chip = cmap[(r, stage[n.id])]
        deps, reads = [], []
        for i in n.inputs:
            src = graph.nodes[i]
            if src.is_leaf:
                reads.append((i, mb if src.op == "input" else PER_STEP, r))
                continue
            deps.append(on_chip(producer[(i, source_mb(src), r)], chip))
        t = new(kind="node", node=n.id, op=n.op, phase=n.phase, microbatch=mb, replica=r, stage=stage[n.id],
                chip=chip, out_chip=chip, deps=sorted(set(deps)), options=list(node_options(n.id, chip)),
                out_bytes=nbytes(n), port_bytes=node_bytes(n.id), reads=reads,
                keep=n.id in results and n.phase != "backward")
        producer[(n.id, mb, r)] = t.id
        return t

    window = max(1, window or m)
    for r in range(d):
        sinks: dict[int, list[int]] = {}
        for mb in range(m):
            first = len(tasks)
            for n in compute:
                if n.phase != "update":
                    t = node_task(n, mb, r, lambda src, mb=mb: mb)
                    if not t.deps and mb >= window:
                        # at most `window` micro-batches in flight: start after micro-batch mb - window ends
                        t.deps = list(sinks[mb - window])
            has_succ = {d for t in tasks[first:] for d in t.deps}
            sinks[mb] = [t.id for t in tasks[first:] if t.id not in has_succ and t.microbatch == mb]
    # gradients: accumulate over micro-batches, then all-reduce over replicas
    for g in grad_nodes:
        gn = graph.nodes[g]
        finals = []
        for r in range(d):
            last = producer[(g, 0, r)]
            chip = tasks[last].out_chip
            for mb in range(1, m):
                acc = new(kind="accumulate", node=g, op="accumulate", phase="backward", microbatch=mb, replica=r,
                          stage=stage[g], chip=chip, out_chip=chip, deps=[last, producer[(g, mb, r)]],
                          options=list(add_options(gn.shape, gn.dtype, chip)), out_bytes=nbytes(gn),
                          port_bytes=3 * nbytes(gn))
                last = acc.id
            finals.append(last)
        if d > 1:
            group = len(tasks)
            ring_chips = {tasks[f].out_chip for f in finals}
            nb = nbytes(gn)
            if len(ring_chips) > 1:  # ring all-reduce: 2(d-1)/d of the bytes per link, 2(d-1) latencies
                cycles = math.ceil(2 * (d - 1) / d * nb / link_bw) + 2 * (d - 1) * link_lat
                moved = math.ceil(2 * (d - 1) / d * nb)
            else:  # replicas on one chip: d-1 on-chip additions
                cycles = (d - 1) * min(c for _, _, c in add_options(gn.shape, gn.dtype, tasks[finals[0]].out_chip))
                moved = 3 * (d - 1) * nb
            for r, f in enumerate(finals):
                chip = tasks[f].out_chip
                ar = new(kind="allreduce", node=g, op="allreduce", phase="backward", microbatch=PER_STEP, replica=r,
                         stage=stage[g], chip=chip, out_chip=chip, deps=sorted(finals), options=[("allreduce", 1, cycles)],
                         out_bytes=nb, port_bytes=moved, group=group)
                producer[(g, PER_STEP, r)] = ar.id
        else:
            producer[(g, PER_STEP, 0)] = finals[0]
    for r in range(d):
        for n in update_nodes:
            node_task(n, PER_STEP, r, lambda src: PER_STEP if src.phase in ("update",) or src.id in grad_nodes
                      else m - 1)
    leaf_bytes = {n.id: nbytes(n) for n in graph.nodes if n.is_leaf}
    return Plan(tasks, chips, stage, cmap, leaf_bytes, [n.name for n in graph.nodes])
