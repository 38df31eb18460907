"""Execute a compiled schedule on real arrays, in timeline order, through byte arenas (Schedule, Graph,
HwSpec -> Executed). What each task reads and computes comes from its kind's record (schedule/kinds.py)."""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from accelsim.errors import ScheduleError
from accelsim.execute.arena import Arenas, Slot
from accelsim.execute.rounding import ROUNDED_PRECISIONS, round_to
from accelsim.graph.ir import NUMPY_BYTES, Graph, Node
from accelsim.hw.placement import storage_widths
from accelsim.hw.precision import at_precision, tensor_elem_bytes
from accelsim.hw.spec import HwSpec
from accelsim.kernels.registry import get_kernel
from accelsim.schedule.kinds import TASK_KINDS, Kernel, Reads
from accelsim.schedule.plan import PER_STEP, Schedule, Task, Tensor, graph_hash
from accelsim.schedule.split import Part, assemble, part_node, rows_shape, slice_inputs, take_part, take_rows

LeafKey = tuple[int, int, int, int]
"""(node, micro-batch or PER_STEP, replica, chip): one placed leaf tensor."""


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


class Executor:
    """One execution. Its state is explicit: the arenas, the slot of every task output and placed leaf,
    the kernels looked up so far, and what the step computed. A kind that reads its node's graph
    inputs computes the node's own value, so its outputs are the graph's outputs."""

    def __init__(self, schedule: Schedule, graph: Graph, hw: HwSpec, backend: str) -> None:
        self.schedule, self.graph, self.backend = schedule, graph, backend
        self.tasks = schedule.tasks
        hw = at_precision(hw, schedule.options.precision)  # tensors were placed at the step's bytes
        # a placement's narrower storage width (hw/placement.py) places outputs in fewer bytes than numpy's
        narrowest = min(storage_widths(hw.chips), default=None)
        scale = max(-(-NUMPY_BYTES[n.dtype] // min(tensor_elem_bytes(graph, n, hw), narrowest or 16))
                    for n in graph.nodes)
        # a bf16/fp16/fp8 step's forward and backward work reads and stores values of its format (its weights
        # through the working copy); update work runs in fp32 on the master weights and optimizer state
        precision = schedule.options.precision
        self.low_precision = precision if precision in ROUNDED_PRECISIONS else None
        self.arenas = Arenas(schedule, scale)
        self.out_slot: dict[int, Slot] = {}
        self.leaf_slot: dict[LeafKey, Slot] = {}
        for x in schedule.tensors:
            if x.task >= 0:
                self.out_slot[x.task] = Slot(x, self.label(x))
            else:
                self.leaf_slot[(x.node, x.microbatch, x.replica, x.chip)] = Slot(x, self.label(x))
        self.names: dict[int, list[str]] = defaultdict(list)
        for name, node_id in graph.outputs.items():
            self.names[node_id].append(name)
        self.gradients = set(graph.gradient_nodes())
        self.steps = schedule.options.microbatches * schedule.options.data_parallel
        self.kernels: dict[str, Kernel] = {}
        self.result = Executed()
        self.groups: dict[int, list[Task]] = defaultdict(list)  # collective group -> members, in replica order
        for t in schedule.tasks:
            if t.group >= 0:
                self.groups[t.group].append(t)
        # ZeRO: gradient -> (split, part) -> the step mean's rows part an update read (every replica reads its own)
        self.grad_parts: dict[int, dict[tuple[int, int], np.ndarray]] = defaultdict(dict)
        # how a task of each kind gathers its inputs (schedule/kinds.py, Reads), given the task and a reader label
        self.inputs_by: dict[Reads, Callable[[Task, str], list[np.ndarray]]] = {
            Reads.GRAPH_INPUTS: self.node_inputs, Reads.DEPENDENCES: self.dep_outputs,
            Reads.SCATTER: self.scattered, Reads.GATHER: self.gathered}

    def label(self, x: Tensor) -> str:
        node = self.graph.nodes[x.node]
        return f"tensor of {node.op} %{node.id} {node.name!r} (mb {x.microbatch}, replica {x.replica})"

    def kernel(self, op: str) -> Kernel:
        if op not in self.kernels:
            self.kernels[op] = get_kernel(op, self.backend)
        return self.kernels[op]

    def run(self) -> Executed:
        """Leaves are written when their placement starts, tasks run in start order (leaves first at a tie)."""
        events = [(x.tensor.start, 0, key) for key, x in self.leaf_slot.items()]
        events += [(t.start, 1, (t.id,)) for t in self.tasks]
        for _, is_task, key in sorted(events):
            if is_task:
                self.run_task(self.tasks[key[0]])
            else:
                self.write_leaf(key)
        self.finish()
        self.result.corruptions = self.arenas.corruptions
        return self.result

    def finish(self) -> None:
        """Every output as it stands at the end of the step, per replica: the whole value on the replica's
        chip (computed, or all-gathered under ZeRO), else (a ZeRO shard, each replica keeping its own rows
        part) the value the replicas' parts make together. Likewise the step-mean gradients updates read."""
        parts: dict[int, dict[int, int]] = defaultdict(dict)  # node -> part -> a task holding it (one per rank)
        for t in self.tasks:
            if t.microbatch != PER_STEP or t.id not in self.out_slot or t.node not in self.names:
                continue
            if t.phase == "backward":  # a gradient summed once per step (planning/step_sums.py): the update read it
                continue
            kind = TASK_KINDS[t.kind]
            if t.is_part and kind.computes_node and t.keep:
                parts[t.node].setdefault(t.part, t.id)
            elif not t.is_part and (kind.computes_node or kind.reads is Reads.GATHER):
                for name in self.names[t.node]:
                    self.result.final[(name, t.replica)] = self.read_output(t.id, "the end of the step")
        replicas = range(self.schedule.options.data_parallel)
        for node_id, held in parts.items():
            if sorted(held) == list(range(self.tasks[held[0]].parts)):
                value = self.read_value(list(held.values()), "the end of the step")
                for name in self.names[node_id]:
                    for r in replicas:
                        self.result.final.setdefault((name, r), value)
        for g, held in self.grad_parts.items():
            if sorted(part for _, part in held) == list(range(len(held))):
                split = next(iter(held))[0]
                value = assemble(self.graph, self.graph.nodes[g], split, [held[k] for k in sorted(held)])
                for r in replicas:
                    self.result.grads.setdefault((g, r), value)

    def leaf_value(self, node_id: int, microbatch: int, replica: int) -> np.ndarray:
        node = self.graph.nodes[node_id]
        if node.op == "input":
            value = self.graph.input_value(node_id, sample_index(self.schedule, microbatch, replica))
        else:
            value = self.graph.leaf_value(node_id)
        return np.asarray(value, dtype=node.dtype)

    def write_leaf(self, key: LeafKey) -> None:
        """A leaf's value, or the rows part of it a ZeRO shard holds."""
        node_id, microbatch, replica, _ = key
        slot = self.leaf_slot[key]
        value = self.leaf_value(node_id, microbatch, replica)
        if slot.tensor.parts > 1:
            value = take_rows(value, slot.tensor.part, slot.tensor.parts)
        self.arenas.write(slot, value)

    def computes(self, t: Task) -> Node:
        """The node as task `t` computes or holds it: the whole node, or one part of it."""
        node = self.graph.nodes[t.node]
        return part_node(self.graph, node, Part(t.split, t.part, t.parts)) if t.is_part else node

    def read_output(self, task_id: int, reader: str) -> np.ndarray:
        node = self.computes(self.tasks[task_id])
        return self.arenas.read(self.out_slot[task_id], node.shape, node.dtype, reader)

    def read_value(self, tasks: list[int], reader: str) -> np.ndarray:
        """A node's value from the task holding it, or from all its parts put back together."""
        if len(tasks) == 1:
            return self.read_output(tasks[0], reader)
        first = self.tasks[tasks[0]]
        ordered = sorted(tasks, key=lambda d: self.tasks[d].part)
        return assemble(self.graph, self.graph.nodes[first.node], first.split,
                        [self.read_output(d, reader) for d in ordered])

    def read_leaf(self, t: Task, node_id: int, reader: str) -> np.ndarray:
        """A leaf input of `t`'s node, from its tensor on `t`'s chip (an input of t's micro-batch; a
        parameter or constant of the step)."""
        src = self.graph.nodes[node_id]
        microbatch = t.microbatch if src.op == "input" else PER_STEP
        slot = self.leaf_slot.get((node_id, microbatch, t.replica, t.chip))
        if slot is None:  # a leaf nobody placed (the raw executor trusts its input; validation refuses this)
            return self.leaf_value(node_id, t.microbatch, t.replica)
        return self.read_slot(slot, reader)

    def read_slot(self, slot: Slot, reader: str) -> np.ndarray:
        """A placed leaf: the whole leaf, or the rows part a ZeRO shard holds."""
        x, src = slot.tensor, self.graph.nodes[slot.tensor.node]
        shape = rows_shape(src.shape, x.part, x.parts) if x.parts > 1 else src.shape
        return self.arenas.read(slot, shape, src.dtype, reader)

    def graph_inputs(self, t: Task, reader: str) -> tuple[list[np.ndarray], list[bool]]:
        """The node's inputs in graph order: leaves from memory, the rest from the dependences that
        deliver them on `t`'s chip; and for each whether it arrived as the slice a part reads already (a
        ZeRO shard, or the same part of another node). An update reading a gradient gets the step's mean:
        the gradient arrives summed over micro-batches and replicas."""
        node = self.graph.nodes[t.node]
        by_node: dict[int, list[int]] = defaultdict(list)
        for d in t.deps:
            if self.tasks[d].out_chip == t.chip and d in self.out_slot:
                by_node[self.tasks[d].node].append(d)
        args, sliced = [], []
        for i in node.inputs:
            if self.graph.nodes[i].is_leaf and i not in by_node:  # (a ZeRO-3 parameter arrives all-gathered)
                microbatch = t.microbatch if self.graph.nodes[i].op == "input" else PER_STEP
                slot = self.leaf_slot.get((i, microbatch, t.replica, t.chip))
                args.append(self.read_leaf(t, i, reader))
                sliced.append(slot is not None and slot.tensor.parts > 1)
                continue
            one = self.tasks[by_node[i][0]] if len(by_node[i]) == 1 else None
            value = self.read_value(by_node[i], reader)
            if t.phase == "update" and i in self.gradients:
                value = value / self.steps
                if one is not None and one.is_part:
                    self.grad_parts[i][(one.split, one.part)] = value
                else:
                    self.result.grads[(i, t.replica)] = value
            args.append(value)
            sliced.append(one is not None and one.is_part)
        return args, sliced

    def node_inputs(self, t: Task, reader: str) -> list[np.ndarray]:
        """The node's inputs in graph order (graph_inputs), cut to the slices a part of the node reads."""
        args, sliced = self.graph_inputs(t, reader)
        if t.is_part:
            args = slice_inputs(self.graph, self.graph.nodes[t.node], Part(t.split, t.part, t.parts), args, sliced)
        return args

    def dep_outputs(self, t: Task, reader: str) -> list[np.ndarray]:
        """Its dependences' outputs as they are, in dependence order."""
        return [self.read_output(d, reader) for d in t.deps]

    def scattered(self, t: Task, reader: str) -> list[np.ndarray]:
        """Its whole dependences' outputs, each cut to the part it holds (a reduce-scatter member)."""
        part = Part(t.split, t.part, t.parts)
        return [take_part(self.graph, self.graph.nodes[t.node], part, self.read_output(d, reader)) for d in t.deps]

    def gathered(self, t: Task, reader: str) -> list[np.ndarray]:
        """An all-gather's whole value: its dependences' parts, or its group members' leaf shards, in part order."""
        if t.deps:
            return [self.read_value(list(t.deps), reader)]
        shards = []
        for m in self.groups[t.group]:
            for node_id, mb in m.reads:
                slot = self.leaf_slot[(node_id, mb, m.replica, m.chip)]
                shards.append((slot.tensor.part, self.read_slot(slot, reader)))
        return [np.concatenate([v for _, v in sorted(shards, key=lambda s: s[0])], axis=0)]

    def run_task(self, t: Task) -> None:
        kind = TASK_KINDS[t.kind]
        part = f", part {t.part} of {t.parts}" if t.is_part else ""
        reader = f"task {t.id} ({t.kind} {t.op} %{t.node}{part}, mb {t.microbatch}, replica {t.replica})"
        args = self.inputs_by[kind.reads](t, reader)
        rounding = self.low_precision if t.phase != "update" else None
        if rounding is not None:
            args = [round_to(a, rounding) for a in args]
        value = kind.compute(self.kernel, self.computes(t), args)
        if rounding is not None:
            value = round_to(value, rounding)
        if kind.computes_node and t.microbatch != PER_STEP:
            for name in self.names.get(t.node, ()):
                self.result.outputs[(name, t.microbatch, t.replica)] = value.copy()
        if t.id in self.out_slot:
            self.arenas.write(self.out_slot[t.id], value)


def execute(schedule: Schedule, graph: Graph, hw: HwSpec, backend: str) -> Executed:
    """Run every task of `schedule` with `backend` kernels on real arrays, through its placements."""
    if graph_hash(graph) != schedule.graph_hash:
        raise ScheduleError(f"schedule of {schedule.graph_name!r} was compiled for another graph than "
                            f"{graph.name!r}; recompile with `accelsim compile`")
    return Executor(schedule, graph, hw, backend).run()
