"""The planner's records: a task before it has a time (TaskSpec), the expanded step (Plan), and the view of
the planner that its hooks (ZeRO's, zero.py) are given, so the planner and its hooks do not import each other."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from accelsim.graph.ir import Graph, Node
from accelsim.hw.spec import Chip, HwSpec
from accelsim.schedule.identity import Index, MicroBatch, Phase
from accelsim.schedule.kinds import TaskKind
from accelsim.schedule.options import StepOptions
from accelsim.schedule.split import Part

Option = tuple[str, int, int]
"""(resource, instances, cycles): one resource a task may run on."""


@dataclass
class TaskSpec:
    """A task before it has a time: `options` are the resources it may run on and their costs. Its
    identity is schedule.identity.TaskIdentity's fields, declared again here (in the same order, with the
    same types) because the planner edits its tasks and a mutable dataclass cannot inherit a frozen one;
    the schedule's Task copies them with identity_of."""

    id: int
    kind: TaskKind
    node: Index
    op: str
    phase: Phase
    microbatch: MicroBatch
    replica: Index
    stage: Index
    chip: Index
    out_chip: int
    deps: list[int]  # tasks whose outputs it reads
    options: tuple[Option, ...]
    out_bytes: int
    port_bytes: int = 0  # bytes streamed through a memory port or a link while it runs
    keep: bool = False  # its output is a result of the step (a forward output, an update): never freed
    group: int = -1  # all-reduce tasks of one gradient share a group and are scheduled together
    reads: list[tuple[int, int]] = field(default_factory=list)  # leaf tensors on its chip: (node, mb)
    energy_pj: float = 0.0
    flops: int = 0  # arithmetic it does on a unit (a node's or an accumulation's FLOPs); 0 for communication
    after: list[int] = field(default_factory=list)  # ordering only: tasks it waits for but does not read
    lag: dict[int, int] = field(default_factory=dict)  # predecessor -> cycles between its end and this start
    part: Part | None = None  # which part of its node's output it computes or moves (None: all of it)
    span: tuple[int, ...] = ()  # a collective timed for one replica (symmetry.py): every member's chip
    stream_cycles: int = 0  # cycles it needs at least to stream the rest of leaves its prefetches staged
    partial_reads: tuple[tuple[int, int, int], ...] = ()  # inputs it reads part of: (node, read, whole) elements

    def part_fields(self) -> dict[str, int]:
        """Its part as the schedule's Task records it (split -1, part 0, parts 1: the whole node)."""
        if self.part is None:
            return {"split": -1, "part": 0, "parts": 1}
        return {"split": self.part.split, "part": self.part.index, "parts": self.part.parts}

    @property
    def preds(self) -> list[int]:
        """Every task it waits for: the ones it reads and the ordering edges."""
        return self.deps + self.after


@dataclass
class Plan:
    """The expanded step: tasks in a topological order (ids ascending), plus placement facts."""

    tasks: list[TaskSpec]
    chips: list[Chip]
    stage_of_node: list[int]
    chip_of: dict[tuple[int, int, int], int]  # (replica, stage, tensor-parallel rank) -> chip
    leaf_bytes: dict[int, int]
    node_names: list[str]
    has_energy: bool = False
    # ZeRO (compiler/planning/zero.py): leaf -> the bytes of each replica's shard; replica r holds rows part r only
    shards: dict[int, tuple[int, ...]] = field(default_factory=dict)
    # ZeRO 1-2 under mixed precision (zero.py): trainable parameter -> the bytes each replica holds of it, the
    # whole working copy and rows part r of its fp32 master
    masters: dict[int, tuple[int, ...]] = field(default_factory=dict)
    # tensor-parallel rank k's nodes -> their rank-0 twins (rank_twins.py); () when ranks are not copies
    rank_twins: tuple[dict[int, int], ...] = ()
    # leaf -> its placement class (prefetch.leaf_classes), when a chip has a placement; {} otherwise
    leaf_class: dict[int, str] = field(default_factory=dict)
    # non-leaf node -> its output class (prefetch.output_classes), when a chip places one; {} otherwise
    out_class: dict[int, str] = field(default_factory=dict)

    def leaf_size(self, node: int, replica: int) -> int:
        """Bytes of leaf `node` as placed for `replica`: the whole leaf, its ZeRO shard, or its working copy
        with its master's shard."""
        for by_replica in (self.shards, self.masters):
            if node in by_replica:
                return by_replica[node][replica]
        return self.leaf_bytes[node]


class PlannerView(Protocol):
    """What a planner hook reads of the planner (expand.Planner implements it)."""

    graph: Graph
    hw: HwSpec
    options: StepOptions
    chips: list[Chip]
    chip_of: dict[tuple[int, int, int], int]
    # (node, micro-batch, replica, rank) -> the task(s) holding the value (step_sums.py sets a step sum's)
    producer: dict[tuple[int, int, int, int], list[int]]

    def ranks_of(self, n: Node) -> range: ...

    def nbytes(self, node: Node) -> int:
        """Bytes of a node's whole tensor at its stored width (zero.py sizes shards from it)."""
        ...

    def accumulate(self, g: int, replica: int, rank: int) -> int:
        """Sum gradient `g` over micro-batches on its replica's chip of `rank`; the last sum's task id."""
        ...

    def rank_task(self, n: Node, mb: int, replica: int, rank: int,
                  gathered: frozenset[int] = frozenset()) -> list[TaskSpec]:
        """The task(s) computing `n` for one micro-batch, replica and rank (step_sums.py adds a step sum's)."""
        ...
