"""Execute a compiled schedule on real arrays, in timeline order, through byte arenas (Schedule -> values)."""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from accelsim.errors import ScheduleError
from accelsim.execute.arena import Arenas, Slot
from accelsim.graph.ir import NUMPY_BYTES, Graph
from accelsim.hw.spec import HwSpec
from accelsim.kernels.registry import get_kernel
from accelsim.schedule.plan import PER_STEP, Schedule, graph_hash



@dataclass
class Executed:
    """What the scheduled step computed: forward outputs per (micro-batch, replica), the averaged
    gradient each replica's update read, and every output at the end of the step, per replica."""

    outputs: dict[tuple[str, int, int], np.ndarray] = field(default_factory=dict)
    grads: dict[tuple[int, int], np.ndarray] = field(default_factory=dict)
    final: dict[tuple[str, int], np.ndarray] = field(default_factory=dict)
    corruptions: list[str] = field(default_factory=list)


def sample_index(schedule: Schedule, microbatch: int, replica: int) -> int:
    """Which input sample a (micro-batch, replica) processes: replica-major, as the reference does."""
    return replica * schedule.options.microbatches + microbatch


def execute(schedule: Schedule, graph: Graph, hw: HwSpec, backend: str) -> Executed:
    if graph_hash(graph) != schedule.graph_hash:
        raise ScheduleError(f"schedule of {schedule.graph_name!r} was compiled for another graph than "
                            f"{graph.name!r}; recompile with `accelsim compile`")
    scale = max(-(-NUMPY_BYTES[n.dtype] // hw.elem_bytes(n.dtype)) for n in graph.nodes)
    arenas = Arenas(schedule, scale)
    tasks = schedule.tasks
    steps = schedule.options.microbatches * schedule.options.data_parallel
    names: dict[int, list[str]] = defaultdict(list)
    for k, v in graph.outputs.items():
        names[v].append(k)
    out_slot: dict[int, Slot] = {}
    leaf_slot: dict[tuple[int, int, int, int], Slot] = {}
    for x in schedule.tensors:
        node = graph.nodes[x.node]
        label = f"tensor of {node.op} %{node.id} {node.name!r} (mb {x.microbatch}, replica {x.replica})"
        if x.task >= 0:
            out_slot[x.task] = Slot(x, label)
        else:
            leaf_slot[(x.node, x.microbatch, x.replica, int(x.memory.split(":")[0][4:]))] = Slot(x, label)
    grad_nodes = {i for n in graph.nodes if n.phase == "update" for i in n.inputs
                  if graph.nodes[i].phase == "backward"}
    kernels: dict[str, object] = {}
    result = Executed()
    readers_left: dict[int, int] = defaultdict(int)
    for t in tasks:
        for d in t.deps:
            readers_left[d] += 1

    def kern(op: str):
        if op not in kernels:
            kernels[op] = get_kernel(op, backend)
        return kernels[op]

    def read_task(d: int, reader: str) -> np.ndarray:
        node = graph.nodes[tasks[d].node]
        return arenas.read(out_slot[d], node.shape, node.dtype, reader)

    def leaf_value(node_id: int, mb: int, replica: int) -> np.ndarray:
        node = graph.nodes[node_id]
        if node.op == "input":
            return graph.input_value(node_id, sample_index(schedule, mb, replica))
        return graph.leaf_value(node_id)

    events = [(x.tensor.start, 0, key) for key, x in leaf_slot.items()]
    events += [(t.start, 1, t.id) for t in tasks]
    for _, kind, key in sorted(events, key=lambda e: (e[0], e[1], str(e[2]))):
        if kind == 0:
            node_id, mb, replica, _ = key
            value = leaf_value(node_id, mb, replica)
            arenas.write(leaf_slot[key], np.asarray(value, dtype=graph.nodes[node_id].dtype))
            continue
        t = tasks[key]
        node = graph.nodes[t.node]
        who = f"task {t.id} ({t.kind} {t.op} %{t.node}, mb {t.microbatch}, replica {t.replica})"
        if t.kind == "node":
            args = []
            by_node = {tasks[d].node: d for d in t.deps if out_slot.get(d) is not None
                       and out_slot[d].tensor.memory.startswith(f"chip{t.chip}:")}
            for i in node.inputs:
                src = graph.nodes[i]
                if src.is_leaf:
                    mb = t.microbatch if src.op == "input" else PER_STEP
                    key_leaf = (i, mb, t.replica, t.chip)
                    if key_leaf in leaf_slot:
                        args.append(arenas.read(leaf_slot[key_leaf], src.shape, src.dtype, who))
                    else:  # a constant or parameter without a placement of its own
                        args.append(np.asarray(leaf_value(i, t.microbatch, t.replica), dtype=src.dtype))
                    continue
                value = read_task(by_node[i], who)
                if t.phase == "update" and i in grad_nodes:
                    value = value / steps  # sums over micro-batches and replicas -> the step's mean gradient
                    result.grads[(i, t.replica)] = value
                args.append(value)
            value = np.asarray(kern(node.op)(*args, **node.attrs), dtype=node.dtype)
            if t.microbatch != PER_STEP:
                for name in names.get(t.node, ()):
                    result.outputs[(name, t.microbatch, t.replica)] = value.copy()
        elif t.kind == "accumulate":
            a, b = (read_task(d, who) for d in t.deps)
            value = np.asarray(kern("add")(a, b), dtype=node.dtype)
        elif t.kind == "allreduce":
            parts = [read_task(d, who) for d in t.deps]
            value = parts[0]
            for p in parts[1:]:
                value = np.asarray(kern("add")(value, p), dtype=node.dtype)
        else:  # transfer
            value = read_task(t.deps[0], who)
        if t.id in out_slot:
            arenas.write(out_slot[t.id], value)
    for t in tasks:  # every output as it stands at the end of the step
        if t.kind == "node" and t.microbatch == PER_STEP and t.id in out_slot:
            for name in names.get(t.node, ()):
                result.final[(name, t.replica)] = read_task(t.id, "the end of the step")
    result.corruptions = arenas.corruptions
    return result
