"""Task kinds as a typed table: what each kind holds while it runs (so how a simulator acquires it and how its
time is reported), what it reads (so how the executor gathers its inputs), which values it needs, what it
computes and how plots name it. Every stage (validate, schedule, simulate, execute, report, plot) looks a
task's kind up here instead of switching on its name, so adding a kind is adding a record (and its name to
TaskKind) plus the planning code that emits it."""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Callable, Iterable, Literal, Sequence, get_args

import numpy as np

from accelsim.graph.ir import Graph, Node

Kernel = Callable[..., np.ndarray]
KernelFor = Callable[[str], Kernel]
TaskKind = Literal["node", "accumulate", "allreduce", "transfer", "tp_allreduce", "reduce_scatter", "all_gather",
                   "prefetch", "writeback"]
"""The kinds a schedule's task may have: the keys of TASK_KINDS (in the order pydantic names them in errors)."""


class Holds(Enum):
    """What a running task occupies. It says how the simulators acquire it, which line of the machine the
    scheduler and the validator book, and how its time is reported (metrics: busy time or communication).

    UNIT: an instance of a unit kind of its chip, one task at a time in turn (its time is the unit's busy
      time). LINK: the link from its chip to its out_chip, in turn, and every physical link of the route
      between them (hw/topology.py). COLLECTIVE: its share of its group's collective: every member (one
      per replica or rank) waits at the group's gate, and all start and end together. DMA: the DMA engine of
      a streamed placement class on its chip (hw/placement.py), one task at a time in turn; it moves bytes
      from the class's memory into its buffer and does no arithmetic (its time is data movement)."""

    UNIT = "unit"
    LINK = "link"
    COLLECTIVE = "collective"
    DMA = "dma"


class Reads(Enum):
    """What a task reads, which says how the executor gathers its inputs and which parts the validator
    expects its dependences to deliver.

    GRAPH_INPUTS: its graph node's inputs in the node's input order, leaves from memory and the rest from
      its dependences (a part of a node reads the slices of them it cuts); it computes its node's value.
    DEPENDENCES: its dependences' outputs as they are, in dependence order, each holding the same part as it.
    SCATTER: whole dependences, each cut to the rows part it holds (a reduce-scatter member).
    GATHER: every part of one cut, or (with no dependences) its group's members' leaf shards, put together
      whole (an all-gather member)."""

    GRAPH_INPUTS = "graph_inputs"
    DEPENDENCES = "dependences"
    SCATTER = "scatter"
    GATHER = "gather"


@dataclass(frozen=True)
class TaskKindDef:
    """Everything accelsim knows about one task kind.

    label: how plots and legends name it ("all-reduce").
    holds: what a running task occupies (Holds).
    reads: what it reads (Reads).
    needs: the graph nodes whose values its dependences must deliver (a validation rule).
    compute: its arithmetic on real arrays, given a kernel lookup, its graph node and its inputs.
    partial: may hold one part of its node's value (schedule/split.py): a node task computing a part,
      a transfer moving one, an accumulation of ZeRO gradient shards; all-reduces hold whole gradients.
    stages: its output is a staged copy of the head of a leaf it reads (a prefetch): it reads only those
      bytes of the leaf; its reader waits for it (an ordering edge, `after`), reads the staged bytes in the
      buffer and the rest of the leaf where the leaf lives (staged_bytes, leaf_read_bytes); its output is
      one slot of the buffer (a FIFO entry), held until its reader starts (the head is consumed first). It computes no value: the executor
      computes the reader from the leaf itself. A prefetch of a streamed output (a gradient or an activation)
      depends on its write-back and stages the head of that output likewise.
    writes_back: its output is its dependence's value copied into the memory its placement class lives in, by
      the class's DMA engine (a streamed gradient or activation, hw/placement.py); its readers read it there.
    """

    name: TaskKind
    label: str
    holds: Holds
    reads: Reads
    needs: Callable[[Graph, Node], tuple[int, ...]]
    compute: Callable[[KernelFor, Node, Sequence[np.ndarray]], np.ndarray]
    partial: bool
    stages: bool = False
    blocks_stream: bool = False
    """A GPU-like chip's one compute stream waits for it (hw/gpu_overheads.py): the framework issues it between
    two kernels and the next kernel starts after it (Megatron-LM's tensor-parallel all-reduces, SC21)."""
    writes_back: bool = False

    @property
    def busy(self) -> bool:
        """Its time is busy time of the unit it runs on (utilization, MAC rates); no other kind does arithmetic."""
        return self.holds is Holds.UNIT

    @property
    def communication(self) -> bool:
        """Its time is communication (reported by what it holds: a link, or a collective once per group)."""
        return self.holds is not Holds.UNIT

    @property
    def together(self) -> bool:
        """Its group's members are acquired together at one gate and run over one interval; otherwise each
        task takes its own turn on its unit instance or link."""
        return self.holds is Holds.COLLECTIVE

    @property
    def computes_node(self) -> bool:
        """It computes its graph node's value (or a part of it) from the node's inputs: its op is the node's,
        and its outputs are the step's values of that node."""
        return self.reads is Reads.GRAPH_INPUTS


def _graph_inputs(graph: Graph, node: Node) -> tuple[int, ...]:
    return tuple(i for i in node.inputs if not graph.nodes[i].is_leaf)


def _itself(graph: Graph, node: Node) -> tuple[int, ...]:
    return (node.id,)


def _itself_unless_leaf(graph: Graph, node: Node) -> tuple[int, ...]:
    """An all-gather of a parameter shard (ZeRO-3) reads leaves; one of an updated value, its parts."""
    return () if node.is_leaf else (node.id,)


def _nothing(graph: Graph, node: Node) -> tuple[int, ...]:
    return ()


def _no_value(kernel: KernelFor, node: Node, args: Sequence[np.ndarray]) -> np.ndarray:
    """A prefetch moves bytes: its readers compute from the leaf, so no value is written for it."""
    return np.zeros(0, dtype=np.uint8)


def _apply_op(kernel: KernelFor, node: Node, args: Sequence[np.ndarray]) -> np.ndarray:
    return np.asarray(kernel(node.op)(*args, **node.attrs), dtype=node.dtype)


def _add_all(kernel: KernelFor, node: Node, parts: Sequence[np.ndarray]) -> np.ndarray:
    """A sum in dependence order (micro-batch accumulation, or the replicas of an all-reduce)."""
    total = parts[0]
    for p in parts[1:]:
        total = np.asarray(kernel("add")(total, p), dtype=node.dtype)
    return np.asarray(total, dtype=node.dtype)


def _copy(kernel: KernelFor, node: Node, parts: Sequence[np.ndarray]) -> np.ndarray:
    return np.array(parts[0], dtype=node.dtype)


# In legend order: communication kinds appear in plot legends in this order.
TASK_KINDS: dict[str, TaskKindDef] = {k.name: k for k in (
    TaskKindDef("node", "node", Holds.UNIT, Reads.GRAPH_INPUTS, _graph_inputs, _apply_op, partial=True),
    TaskKindDef("accumulate", "accumulation", Holds.UNIT, Reads.DEPENDENCES, _itself, _add_all, partial=True),
    TaskKindDef("allreduce", "all-reduce", Holds.COLLECTIVE, Reads.DEPENDENCES, _itself, _add_all, partial=False),
    # a tensor-parallel all-reduce (ops/parallel.py): one member per rank, reading every rank's partial
    # value (its node's inputs, its dependences in rank order) and holding their sum (its op) on its chip; on a
    # GPU it is synchronous (Megatron-LM's f/g operators call torch.distributed.all_reduce in the autograd
    # function: the compute stream waits for it, so no kernel of its chip runs beside it)
    TaskKindDef("tp_allreduce", "tensor-parallel all-reduce", Holds.COLLECTIVE, Reads.DEPENDENCES, _graph_inputs,
                _apply_op, partial=False, blocks_stream=True),
    # ZeRO (compiler/planning/zero.py): one member per replica; member r holds rows part r of the sum of every
    # replica's gradient, or the whole value from every replica's part (all-gather)
    TaskKindDef("reduce_scatter", "reduce-scatter", Holds.COLLECTIVE, Reads.SCATTER, _itself, _add_all, partial=True),
    TaskKindDef("all_gather", "all-gather", Holds.COLLECTIVE, Reads.GATHER, _itself_unless_leaf, _copy,
                partial=False),
    TaskKindDef("transfer", "transfer (link)", Holds.LINK, Reads.DEPENDENCES, _itself, _copy, partial=True),
    # a streamed leaf's head staged in its DMA buffer for one reader (compiler/planning/prefetch.py)
    TaskKindDef("prefetch", "prefetch (DMA)", Holds.DMA, Reads.DEPENDENCES, _nothing, _no_value, partial=False,
                stages=True),
    # a streamed output written by its class's DMA engine from its producer's memory to the class's memory
    TaskKindDef("writeback", "write-back (DMA)", Holds.DMA, Reads.DEPENDENCES, _itself, _copy, partial=True,
                writes_back=True),
)}
assert set(TASK_KINDS) == set(get_args(TaskKind)), "TaskKind must name exactly the kinds of TASK_KINDS"


def busy_kinds() -> tuple[str, ...]:
    """Kinds whose time counts as a unit's busy time."""
    return tuple(k.name for k in TASK_KINDS.values() if k.busy)


Moved = tuple[str, int, int]
"""(kind, node, bytes moved) of a task: what staged_bytes and leaf_read_bytes read of it (a schedule's Task
gives bytes_moved, the planner's TaskSpec port_bytes)."""


def staged_bytes(preds: Iterable[Moved]) -> dict[int, int]:
    """Leaf node -> bytes of it that the prefetches among a task's predecessors `preds` staged in their buffers."""
    staged: dict[int, int] = {}
    for kind, node, moved in preds:
        if TASK_KINDS[kind].stages:
            staged[node] = staged.get(node, 0) + moved
    return staged


def leaf_read_bytes(task: Moved, leaf: int, size_bytes: int, staged: dict[int, int]) -> int:
    """Bytes a task reads of a leaf placed as `size_bytes` in its memory: a prefetch the tile it stages, a reader
    what its prefetches (`staged`, staged_bytes of its predecessors) did not stage, any other task all of it."""
    kind, _, moved = task
    if TASK_KINDS[kind].stages:
        return min(size_bytes, moved)
    return max(0, size_bytes - staged.get(leaf, 0))
