"""Schedules as plain data: what the static scheduler decided, serializable to JSON.

Time is integer cycles of the hardware clock. A task is one piece of work on one resource
instance: a graph node for one (micro-batch, replica), a gradient accumulation, an all-reduce,
or a transfer of a tensor between memories or chips.
"""
from __future__ import annotations

import hashlib
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from accelsim.graph.ir import Graph
from accelsim.hw.spec import HwSpec

TaskKind = Literal["node", "accumulate", "allreduce", "transfer"]
PER_STEP = -1
"""micro-batch index of tasks that run once per step (optimizer update, all-reduce)."""


class Data(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Task(Data):
    """One scheduled piece of work. `resource` names a unit kind on `chip` ("mxm"), a link
    ("link:0->1"), or "allreduce"; `instance` picks one of a unit kind's instances.

    kinds: "node" computes graph node `node` for (microbatch, replica); update-phase nodes run once
    per step (microbatch PER_STEP) on every replica. "accumulate" adds micro-batch `microbatch`'s
    gradient (node = the gradient node) into the running sum of micro-batches 0..microbatch-1.
    "allreduce" sums a gradient across replicas: one task per replica, all with the same interval.
    "transfer" moves node `node`'s output for (microbatch, replica) to another chip over a link."""

    id: int
    kind: TaskKind
    node: int  # the graph node it computes, accumulates, reduces or moves
    op: str
    phase: str
    microbatch: int
    replica: int
    stage: int
    chip: int
    resource: str
    instance: int
    start: int
    end: int
    deps: tuple[int, ...]
    bytes_moved: int = 0  # through its memory port (node, accumulate) or over its link
    port: str = ""  # the memory port it streams through ("chip0:sram"), or its link


class Tensor(Data):
    """Where one tensor lives: a memory instance ("chip0:sram", or a unit buffer "chip0:mxm.out"), an
    offset, and a live interval from its producer's start to its last reader's end. `task` is the
    producing task, or -1 for a leaf (an input per micro-batch; a parameter or constant per replica,
    live for the whole step)."""

    node: int
    microbatch: int
    replica: int
    task: int
    memory: str
    offset: int
    size_bytes: int
    start: int
    end: int


class Bounds(Data):
    """Lower bounds no schedule can beat; bound_cycles is the larger of the two."""

    critical_path_cycles: int
    resource_cycles: int
    resource: str  # the unit kind, link or memory port whose total work gives resource_cycles
    bound_cycles: int


class Options(Data):
    microbatches: int = 1
    data_parallel: int = 1
    pipeline_stages: int = 1


class Schedule(Data):
    version: int = 1
    graph_name: str
    graph_hash: str
    hw_name: str
    hw_hash: str
    clock_hz: float
    options: Options
    training: bool
    samples_per_step: int
    tasks: tuple[Task, ...]
    tensors: tuple[Tensor, ...]
    memory_capacity_bytes: dict[str, int]
    peak_memory_bytes: dict[str, int]
    makespan_cycles: int
    bounds: Bounds
    source: dict[str, Any] = {}  # how the graph was made (model, options, optimizer), to rebuild it

    @property
    def bound_ratio(self) -> float:
        return self.makespan_cycles / max(self.bounds.bound_cycles, 1)


def graph_hash(graph: Graph) -> str:
    """sha256 of everything that defines the computation: nodes, attributes, leaf initializers, outputs."""
    h = hashlib.sha256(graph.dump().encode())
    h.update(repr(sorted(graph.outputs.items())).encode())
    h.update(str(graph.seed).encode())
    return h.hexdigest()


def hw_hash(hw: HwSpec) -> str:
    return hashlib.sha256(hw.model_dump_json().encode()).hexdigest()
