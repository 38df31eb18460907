"""Schedules as plain data: what the static scheduler decided, serializable to JSON.

Time is integer cycles of the hardware clock. A task is one piece of work on one resource
instance: a graph node for one (micro-batch, replica), a gradient accumulation, an all-reduce,
or a transfer of a tensor between chips. The schedule is self-contained: it holds every fact the
simulator and the executor need (candidate resources, leaf reads, output sizes), so neither has
to re-run the scheduler's planning code or rebuild the model.
"""
from __future__ import annotations

import hashlib
from typing import Any, Iterator, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_serializer, model_validator

from accelsim.errors import GraphError
from accelsim.graph.ir import Graph
from accelsim.graph.provenance import MODEL_FILE, file_source
from accelsim.hw.spec import HwSpec
from accelsim.schedule.identity import PER_STEP, TaskIdentity
from accelsim.schedule.mappings import NodeMapping
from accelsim.schedule.options import StepOptions

LINK = "link"
"""The resource of a transfer: the link from `chip` to `out_chip`."""
COLLECTIVE = "allreduce"
"""The resource of a collective run as a ring (the name predates the other kinds): every participating
chip's share of the collective at once. Its physical links are derived from the hardware
(schedule/collectives.py), as a transfer's are from its chips (hw/topology.py)."""
COLLECTIVE_TREE = "allreduce_tree"
"""The resource of a collective run as a tree: the same per-chip share, other links."""
COLLECTIVES = (COLLECTIVE, COLLECTIVE_TREE)
FORMAT_VERSION = 3  # 3: tasks carry their FLOPs

NonNegInt = Field(ge=0)


class Data(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class Candidate(Data):
    """A resource a task may run on: a unit kind of its chip with `instances` interchangeable
    instances, the link, or the collective; and its cost there in cycles."""

    resource: str
    instances: int = Field(ge=1)
    cycles: int = Field(ge=1)


class Task(Data, TaskIdentity):
    """One scheduled piece of work on `resource` (a unit kind of `chip`, LINK, or one of COLLECTIVES: a
    collective's share of its chip, named by its algorithm). Its identity (which kind, graph node,
    micro-batch, ...) is TaskIdentity's fields, inherited, so the JSON keeps them flat beside the rest.

    kinds (see schedule/kinds.py): "node" computes graph node `node` for (microbatch, replica);
    update-phase nodes run once per step (microbatch PER_STEP) on every replica. "accumulate" adds
    micro-batch `microbatch`'s gradient (node = the gradient node) into the running sum of
    micro-batches 0..microbatch-1. "allreduce" sums a gradient across replicas: one task per replica,
    all in one `group` with the same interval. "transfer" moves its dependence's output from `chip`
    to `out_chip` over a link."""

    id: int = Field(ge=0)
    out_chip: int = Field(ge=0)  # where its output lives (a transfer: the destination chip)
    resource: str
    instance: int = Field(ge=0)
    start: int = Field(ge=0)
    end: int = Field(ge=0)
    deps: tuple[int, ...]  # tasks whose outputs it reads
    after: tuple[int, ...] = ()  # tasks it waits for without reading them (the in-flight window's edges)
    candidates: int = Field(ge=0)  # index into Schedule.candidates: where it could have run, at what cost
    reads: tuple[tuple[int, int], ...] = ()  # leaf tensors it reads on its chip: (node, microbatch or PER_STEP)
    out_bytes: int = Field(default=0, ge=0)  # its output in the hardware's bytes
    bytes_moved: int = Field(default=0, ge=0)  # through its memory port (node, accumulate) or over its link
    port: str = ""  # the memory of `chip` whose port it streams through ("" for links and collectives)
    keep: bool = False  # its output is a result of the step (a forward output, an update): never freed
    group: int = -1  # all-reduce tasks of one gradient share a group (the first member's id)
    energy_pj: float = Field(default=0.0, ge=0.0, allow_inf_nan=False)
    flops: int = Field(default=0, ge=0)  # arithmetic it does on a unit (node, accumulate); 0 for communication
    split: int = Field(default=-1, ge=-1)  # a part of its node: the index of the op's Split it is cut along; -1: whole
    part: int = Field(default=0, ge=0)  # which part (schedule/split.py), of `parts`
    parts: int = Field(default=1, ge=1)
    # inputs it reads only part of where they are placed (a slice's window, OpDef.input_reads): (input node,
    # elements read, elements of the input) each; left out of the JSON when empty (every input read whole)
    partial_reads: tuple[tuple[int, int, int], ...] = Field(default=(), exclude_if=lambda v: not v)

    @model_validator(mode="after")
    def _partial_reads_in_range(self) -> "Task":
        for node, read, whole in self.partial_reads:
            if not 0 <= read <= whole or whole < 1:
                raise ValueError(f"task {self.id}: partial_reads reads {read} of the {whole} elements of node {node}; "
                                 f"expected 0 <= elements read <= elements of the input, and at least one element")
        return self

    @model_validator(mode="after")
    def _part_in_range(self) -> "Task":
        if (self.split < 0) != (self.parts == 1) or self.part >= self.parts:
            raise ValueError(f"task {self.id}: part {self.part} of {self.parts} along split {self.split} is not a "
                             f"part (a whole task has split -1, part 0, parts 1; a part has split >= 0, "
                             f"0 <= part < parts, parts >= 2)")
        return self

    @property
    def is_part(self) -> bool:
        return self.parts > 1


class Tensor(Data):
    """Where one tensor lives: memory `memory` of chip `chip`, an offset, and a live interval from its
    producer's start to its last reader's end. `task` is the producing task, or -1 for a leaf (an
    input per micro-batch; a parameter or constant per replica, live for the whole step). A ZeRO leaf
    shard (compiler/planning/zero.py) holds rows part `part` of `parts` of its leaf (split.bounds along axis 0)."""

    node: int = Field(ge=0)
    microbatch: int = Field(ge=PER_STEP)
    replica: int = Field(ge=0)
    task: int = Field(ge=-1)
    chip: int = Field(ge=0)
    memory: str
    offset: int = Field(ge=0)
    size_bytes: int = Field(ge=1)
    start: int = Field(ge=0)
    end: int = Field(ge=0)
    part: int = Field(default=0, ge=0)
    parts: int = Field(default=1, ge=1)

    @model_validator(mode="after")
    def _shard_of_a_leaf(self) -> "Tensor":
        if self.part >= self.parts or (self.parts > 1 and self.task >= 0):
            raise ValueError(f"tensor of node {self.node} (task {self.task}): part {self.part} of {self.parts} is not "
                             "a shard (only a leaf, task -1, is placed as rows part 0 <= part < parts)")
        return self

    @model_serializer(mode="wrap")
    def _omit_whole(self, handler) -> dict[str, Any]:
        """Leave part and parts out for a whole tensor, so schedules without ZeRO keep their bytes."""
        data = handler(self)
        if self.parts == 1:
            data.pop("part", None)
            data.pop("parts", None)
        return data


class MemoryUse(Data):
    """One memory instance: its capacity and the peak of the bytes the schedule keeps in it."""

    chip: int = Field(ge=0)
    memory: str
    capacity_bytes: int = Field(ge=1)
    peak_bytes: int = Field(ge=0)


class Bounds(Data):
    """Lower bounds no schedule can beat; bound_cycles is the larger of the two."""

    critical_path_cycles: int = Field(ge=0)
    resource_cycles: int = Field(ge=0)
    resource: str  # the unit kind, link or memory port whose total work gives resource_cycles
    bound_cycles: int = Field(ge=0)


class SourcePass(Data):
    """One rewrite pass of Source.passes (graph.provenance.AppliedPass as data): a pass name and, for a
    sited pass restricted to some places, the ids of their anchor nodes in the graph it was given,
    ascending (None: everywhere it matched)."""

    name: str = Field(min_length=1)
    only: tuple[int, ...] | None = None

    @model_validator(mode="after")
    def _only_is_a_set_of_ids(self) -> "SourcePass":
        if self.only is not None and (not self.only or any(i < 0 for i in self.only)
                                      or list(self.only) != sorted(set(self.only))):
            raise ValueError(f"pass {self.name!r}: only must be node ids (>= 0), ascending and distinct, or null "
                             f"for everywhere; got {list(self.only)}")
        return self


class Source(Data):
    """How the graph was made: a zoo model with its options (or model MODEL_FILE with a model file's path and
    sha256), the training_graph settings for a training step (None: the inference graph), and the rewrite
    passes `optimize` then applied, in order. Enough to rebuild the graph (source.py) and check its
    hash."""

    model: str
    options: dict[str, Any]
    optimizer: dict[str, Any] | None = None
    passes: tuple[SourcePass, ...] = ()

    model_config = ConfigDict(extra="forbid", frozen=True, strict=False)

    @model_validator(mode="after")
    def _model_file_names_path_and_hash(self) -> "Source":
        """A graph read from a model file (model MODEL_FILE) records exactly the file's path and sha256."""
        if self.model == MODEL_FILE:
            extra = sorted(set(self.options) - {"path", "sha256", "loss"})
            if extra:
                raise ValueError(f"model file source: options are path, sha256 and loss, not {extra}")
            try:
                file_source(self.options.get("path"), self.options.get("sha256"), self.options.get("loss"))
            except GraphError as e:
                raise ValueError(str(e)) from None
        return self

    @property
    def model_file(self) -> tuple[str, str] | None:
        """(path, sha256) of the model file the graph was read from; None for a zoo model."""
        return (self.options["path"], self.options["sha256"]) if self.model == MODEL_FILE else None

    @model_serializer(mode="wrap")
    def _omit_no_passes(self, handler) -> dict[str, Any]:
        """Leave `passes` out when there are none, so schedules of unoptimized graphs keep their bytes."""
        data = handler(self)
        if not self.passes:
            data.pop("passes", None)
        return data


class ExactReport(Data):
    """What the exact mode (compile(..., exact=...)) proved about this schedule. `bound_cycles`: no
    schedule of the step is shorter (CP-SAT's bound on a relaxation without memory and port limits,
    or the schedule's own bounds where larger); `gap` = (makespan - bound) / makespan, 0 when
    `status` is "optimal". `list_makespan_cycles`: the list schedule it was seeded with.
    `time_limit_s`: CP-SAT's budget in its deterministic seconds (so the schedule is reproducible)."""

    status: Literal["optimal", "feasible"]
    bound_cycles: int = Field(ge=0)
    gap: float = Field(ge=0.0, le=1.0, allow_inf_nan=False)
    list_makespan_cycles: int = Field(ge=0)
    time_limit_s: float = Field(gt=0.0, allow_inf_nan=False)


class Schedule(Data):
    version: int = FORMAT_VERSION
    graph_name: str
    graph_hash: str
    hw_name: str
    hw_hash: str
    clock_hz: float = Field(gt=0, allow_inf_nan=False)
    options: StepOptions
    training: bool
    samples_per_step: int = Field(ge=1)
    candidates: tuple[tuple[Candidate, ...], ...]
    tasks: tuple[Task, ...]
    tensors: tuple[Tensor, ...]
    memories: tuple[MemoryUse, ...]
    makespan_cycles: int = Field(ge=0)
    bounds: Bounds
    energy_pj: float | None = Field(default=None, ge=0.0, allow_inf_nan=False)  # None: no energy figures in the hw
    source: Source | None = None
    exact: ExactReport | None = None  # None: list-scheduled only
    # what load_hw changed in the hardware named hw_name (hw/overrides.py): load_hw(hw_name, overrides=...)
    # rebuilds the hardware whose hash is hw_hash; None: none
    hw_overrides: dict[str, Any] | None = None
    # the whole hardware description, where hw_name (with hw_overrides) is not a bundled config that rebuilds
    # it (a user's own file): the schedule replays without the file (schedule/hardware.py); None: bundled
    hw_spec: dict[str, Any] | None = None
    # the mapping chosen for each (node, unit) of a unit that searches them (`mapping: search`), by (node, chip,
    # unit); None: no unit searched one
    mappings: tuple[NodeMapping, ...] | None = None

    @model_serializer(mode="wrap")
    def _omit_absent_fields(self, handler) -> dict[str, Any]:
        """Leave `exact`, `hw_overrides`, `hw_spec` and `mappings` out when None, so schedules compiled without
        them keep their bytes."""
        data = handler(self)
        for key in ("exact", "hw_overrides", "hw_spec", "mappings"):
            if getattr(self, key) is None:
                data.pop(key, None)
        return data

    @property
    def bound_ratio(self) -> float:
        return self.makespan_cycles / max(self.bounds.bound_cycles, 1)

    @property
    def memory_capacity_bytes(self) -> dict[str, int]:
        """Capacity per memory instance, keyed by its display label (memory_label)."""
        return {memory_label(m.chip, m.memory): m.capacity_bytes for m in self.memories}

    @property
    def peak_memory_bytes(self) -> dict[str, int]:
        """Peak bytes placed per memory instance, keyed by its display label (memory_label)."""
        return {memory_label(m.chip, m.memory): m.peak_bytes for m in self.memories}


def memory_label(chip: int, memory: str) -> str:
    """How reports and plots name a memory instance ("chip0:sram"); never parsed back."""
    return f"chip{chip}:{memory}"


def resource_label(kind_resource: str, chip: int, out_chip: int) -> str:
    """How reports and plots name a task's resource: a unit kind as is, a link as "link:0->1"."""
    return f"{LINK}:{chip}->{out_chip}" if kind_resource == LINK else kind_resource


def peak_bytes(intervals: list[tuple[int, int, int]]) -> int:
    """Largest sum of sizes live at once over (start, end, size) intervals; half-open, so at equal
    times frees come before allocations."""
    events = sorted([(s, size) for s, _, size in intervals] + [(e, -size) for _, e, size in intervals],
                    key=lambda ev: (ev[0], ev[1] > 0))
    peak = live = 0
    for _, delta in events:
        live += delta
        peak = max(peak, live)
    return peak


def live_by_column(events: list[tuple[int, int, int]], columns: int) -> Iterator[tuple[int, list[int]]]:
    """(cycle, live bytes per column) after each cycle's (cycle, column, +-bytes) events, in time order: a
    tensor lives over [start, end), so one that ends when another starts never coexists with it (as
    peak_bytes counts). The list is reused between yields: copy it to keep it."""
    events = sorted(events)
    live = [0] * columns
    i = 0
    while i < len(events):
        cycle = events[i][0]
        while i < len(events) and events[i][0] == cycle:
            live[events[i][1]] += events[i][2]
            i += 1
        yield cycle, live


def graph_hash(graph: Graph) -> str:
    """sha256 of everything that defines the computation: nodes, attributes, leaf initializers, outputs,
    and every constant's value (dtype, shape and bytes: a folded weight is a constant, and the listing
    shows only one-element values). Parameters and inputs enter by their initializers, never by the
    values a graph has drawn and cached."""
    h = hashlib.sha256(graph.dump().encode())
    h.update(repr(sorted(graph.outputs.items())).encode())
    h.update(str(graph.seed).encode())
    for n in graph.nodes:
        if n.op == "const":
            value = np.ascontiguousarray(graph.leaf_value(n.id))
            h.update(f"%{n.id} {value.dtype.str} {value.shape}".encode())
            h.update(value.tobytes())
    return h.hexdigest()


def hw_hash(hw: HwSpec) -> str:
    return hashlib.sha256(hw.model_dump_json().encode()).hexdigest()
