"""Placement: where each class of tensor lives on a chip (the `placement` key of a chip in a hardware file),
resident in a memory or streamed from one through a DMA engine into an on-chip buffer.

The classes (memory_split.node_categories names the same tensors in a chip's peak):
- parameters: trainable and frozen parameter leaves; optimizer_state: the optimizer's state leaves. Either may
  be resident in `memory` or streamed from it (`stream`).
- step_results: outputs of a step kept to its end that are no parameter or optimizer update
  (schedule/levels.is_result: the loss, a model's outputs); by default written to the chip's backing memory.
- gradients: every tensor of a parameter's gradient (per micro-batch, accumulated, all-reduced, transferred).
- activations: every other forward and backward value a task writes (recomputed and transferred copies too),
  the gradients of activations included; inputs and constants (leaves) are placed as without a placement.
  A fusion group's internal values (between its tiles, GROUP_INTERNAL) are placed as without a placement too,
  at the activations' width: layer fusion keeps them on chip, and only a group's inputs and output (its concat)
  go where the activations placement says.
A resident output class is written by its producer to `memory` (at that memory's bandwidth and energy,
levels.write_cycles) and read by its consumers from there (levels.read_cycles); it waits for room there rather
than spill elsewhere. A step result is a step result first, whatever its node's class, and is never streamed (no
later task reads it): a `stream` for step_results is refused.
Streamed gradients and activations (a `stream` on the class): the producer writes its unit's own memory; the
class's DMA engine copies the value into `memory` (a write-back task, at the engine's bandwidth, its bytes
charged where read and written: compiler/planning/prefetch.py), and the producer's copy is freed; each reader
depends on the write-back, has the head staged in `buffer` like a leaf's (prefetch tasks depending on the
write-back) and holds its unit until the rest has streamed through the engine, so a late head stalls it. Such a
node is never split into parts; a gradient's micro-batch sums (accumulations) read the written-back copies and
keep their own where their unit writes.
A class may give its own storage width, `bytes_per_element` (1 to 16, the range of HwSpec.bytes_per_element:
int8 to a 128-bit format), e.g. Stream moves every tensor at its ONNX element type's width (32 bits for float32)
on an int8 machine. It sizes the class's tensors (memory plan, capacity), their writes and reads in their
memory, prefetches and transfers, and the energy of those bytes; the arithmetic (a node's FLOPs, its operand
traffic through its unit's port, and the numbers `check` computes) stays at the step's width. A leaf is sized
once for every chip, so the compiler refuses a leaf class's width that the chips do not all give alike, one
under a step precision (which sets the leaves' master and working copies) and one under ZeRO (whose shards
are cut at the step's width); likewise a gradients width under ZeRO.

Without a `placement` key a chip places every tensor as it always did (parameters and optimizer state in
the fastest memory with room, hw/levels.memory_order), and its description dumps (and hashes) as before.
A streamed class is read again for every task that reads it: a DMA engine of `bandwidth` copies the first
`prefetch_depth` tiles of each such read into `buffer` ahead of the reader (a prefetch task the scheduler
places, compiler/planning/prefetch.py); the rest streams from `memory` while the reader runs. A stream with a
`tile_shape` keeps each matrix-unit operand in `memory` as whole tiles (DmaStream.stored_bytes), so it
moves the padding of the edge tiles too.
"""
from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BeforeValidator, Field, ValidationInfo, model_validator
from pydantic_core import PydanticCustomError

from accelsim.hw.fields import (ArrayDim, BytesPerCycle, BytesPerElement, BytesPerSecond, CapacityBytes,
                                LatencyCycles, Spec)
from accelsim.hw.ranges import Range, check_name, in_range

LeafClass = Literal["parameters", "optimizer_state"]
"""The classes of leaf a placement names: trainable (and frozen) parameters, and the optimizer's state."""
LEAF_CLASSES: tuple[LeafClass, ...] = ("parameters", "optimizer_state")
OutputClass = Literal["gradients", "activations", "step_results"]
"""The classes of task output a placement names (module docstring)."""
OUTPUT_CLASSES: tuple[OutputClass, ...] = ("gradients", "activations", "step_results")
CLASSES: tuple[str, ...] = LEAF_CLASSES + OUTPUT_CLASSES
GROUP_INTERNAL = "group_internal"
"""The class the planner gives an activation that a fusion group both produces and consumes
(fusion_groups.group_internal_nodes): layer fusion keeps those between-tile values on chip, so no placement sends
them elsewhere (placed as without a placement: levels.first_memory), at the width of the activations' placement."""
STREAMED_CLASSES: tuple[str, ...] = LEAF_CLASSES + ("gradients", "activations")
"""The classes a placement may stream through a DMA engine (step results are read by no later task)."""
ON_CHIP = ("sram", "cache")
"""Memory kinds that can hold a stream's prefetch buffer."""
PREFETCH_DEPTH = Range(1, 1024, "tiles", integer=True, why=(
    "at least one tile must be staged ahead of its reader; 1024 tiles is far beyond any DMA queue (TPU v1's "
    "weight FIFO holds 4), and the buffer must hold them all"))

_Name = Annotated[str, BeforeValidator(check_name)]
Depth = Annotated[int, BeforeValidator(in_range(PREFETCH_DEPTH))]


class DmaStream(Spec):
    """A DMA engine that streams a class of tensors from its memory into an on-chip buffer, `prefetch_depth`
    tiles of `tile_bytes` ahead of the task that reads them. Give exactly one bandwidth."""

    buffer: _Name = Field(description="the on-chip memory (sram or cache) that holds the prefetched tiles")
    bandwidth_bytes_per_cycle: BytesPerCycle | None = Field(None, description="the DMA engine's bytes per cycle")
    bandwidth_bytes_per_s: BytesPerSecond | None = Field(None, description="the DMA engine's bytes per second")
    prefetch_depth: Depth = Field(description="tiles the engine may fetch ahead of their reader")
    tile_bytes: CapacityBytes = Field(description="bytes of one prefetched tile, e.g. '64 KiB'")
    latency_cycles: LatencyCycles = Field(0, description="cycles from a DMA request to its first byte")
    # dumped only when given, so a stream without it hashes as before the field existed
    tile_shape: tuple[ArrayDim, ArrayDim] | None = Field(None, exclude_if=lambda v: v is None, description=(
        "[rows, cols]: `memory` holds each matrix-unit operand (a leaf of rank 2 or more that a tensor op reads) "
        "as whole tiles of rows x cols elements (its first axis by its other axes, zero-padded at the edges), "
        "and the stream moves whole tiles (left out: a leaf's own bytes)"))

    @model_validator(mode="after")
    def _exactly_one_bandwidth(self) -> "DmaStream":
        if (self.bandwidth_bytes_per_cycle is None) == (self.bandwidth_bytes_per_s is None):
            raise ValueError("give exactly one of bandwidth_bytes_per_cycle and bandwidth_bytes_per_s")
        return self

    @property
    def buffer_bytes(self) -> int:
        """The buffer the stream needs: prefetch_depth tiles."""
        return self.prefetch_depth * self.tile_bytes

    def stored_bytes(self, shape: tuple[int, ...], elem_bytes: int) -> int:
        """Bytes a leaf of `shape` occupies in the stream's memory: with a tile_shape, a leaf of rank 2 or more
        as a matrix (first axis x the product of the others) padded to whole tiles; else its own bytes."""
        numel = math.prod(shape)
        if self.tile_shape is None or len(shape) < 2 or numel == 0:
            return numel * elem_bytes
        rows, cols = self.tile_shape
        padded_rows = -(-shape[0] // rows) * rows
        padded_cols = -(-(numel // shape[0]) // cols) * cols
        return padded_rows * padded_cols * elem_bytes

    def bytes_per_cycle(self, clock_hz: float) -> float:
        if self.bandwidth_bytes_per_cycle is not None:
            return self.bandwidth_bytes_per_cycle
        return self.bandwidth_bytes_per_s / clock_hz


class ClassPlacement(Spec):
    """Where one class of tensors lives: resident in `memory`, or streamed from it when `stream` is given; an
    output class may be stored at its own width (`bytes_per_element`, module docstring)."""

    memory: _Name = Field(description="the memory of the chip the tensors live in")
    stream: DmaStream | None = Field(None, description="stream them from `memory` through a DMA engine")
    # dumps only when given, so a placement without it hashes as before it existed
    bytes_per_element: BytesPerElement | None = Field(None, exclude_if=lambda b: b is None, description=(
        "bytes each element of the class is stored and moved in, e.g. 4 for 32-bit activations on an int8 "
        "machine (left out: the step's bytes, HwSpec.bytes_per_element)"))


class Placement(Spec):
    """Per class of tensor, where it lives; a class left out is placed as without a placement."""

    parameters: ClassPlacement | None = Field(None, description="weights and biases (and frozen parameters)")
    optimizer_state: ClassPlacement | None = Field(None, description="momentum and Adam moments")
    # the output classes dump only when given, so a placement of leaves alone hashes as before they existed
    gradients: ClassPlacement | None = Field(None, exclude_if=lambda p: p is None, description=(
        "parameters' gradients (per micro-batch, accumulated, all-reduced), resident or streamed"))
    activations: ClassPlacement | None = Field(None, exclude_if=lambda p: p is None, description=(
        "forward and backward values (activations and their gradients), resident or streamed"))
    step_results: ClassPlacement | None = Field(None, exclude_if=lambda p: p is None, description=(
        "outputs kept to the step's end (the loss, model outputs), resident"))

    def classes(self) -> dict[str, ClassPlacement]:
        """The classes given, by name, in CLASSES order."""
        return {c: getattr(self, c) for c in CLASSES if getattr(self, c) is not None}


def dma_resource(cls: str) -> str:
    """The scheduler's resource name of the DMA engine streaming class `cls` (one per chip and class)."""
    return f"dma.{cls}"


def _fits_chip(placement: Placement | None, info: ValidationInfo) -> Placement | None:
    """The memories a placement names are the chip's, a buffer is on chip and holds its tiles, and no unit has
    the name of a DMA engine. Runs after the chip's units and memories (declared before it) were validated."""
    if placement is None:
        return None
    memories = {m.name: m for m in info.data.get("memories") or []}
    units = {u.name for u in info.data.get("units") or []}
    problems: list[str] = []
    for cls, where in placement.classes().items():
        if where.memory not in memories:
            problems.append(f"{cls}.memory: no memory {where.memory!r} on this chip (memories: "
                            f"{', '.join(sorted(memories)) or 'none'})")
        s = where.stream
        if s is None:
            continue
        if cls not in STREAMED_CLASSES:
            problems.append(f"{cls}.stream: {cls} cannot be streamed (they are kept to the step's end, read by "
                            f"no later task); expected {cls} resident in {where.memory!r}: leave out `stream`")
            continue
        if dma_resource(cls) in units:
            problems.append(f"{cls}.stream: a unit is named {dma_resource(cls)!r}, the name of this "
                            f"class's DMA engine in schedules; rename the unit")
        buf = memories.get(s.buffer)
        if buf is None:
            problems.append(f"{cls}.stream.buffer: no memory {s.buffer!r} on this chip (memories: "
                            f"{', '.join(sorted(memories)) or 'none'})")
        elif s.buffer == where.memory:
            problems.append(f"{cls}.stream.buffer: {s.buffer!r} is also the memory the class streams "
                            f"from; expected another, on-chip memory")
        elif buf.kind not in ON_CHIP:
            problems.append(f"{cls}.stream.buffer: memory {s.buffer!r} is {buf.kind}, expected an "
                            f"on-chip memory ({' or '.join(ON_CHIP)}) to hold the prefetched tiles")
        elif s.buffer_bytes > buf.capacity_bytes:
            problems.append(f"{cls}.stream: prefetch_depth {s.prefetch_depth} x tile_bytes {s.tile_bytes} "
                            f"= {s.buffer_bytes} bytes, larger than buffer {s.buffer!r} ({buf.capacity_bytes} "
                            f"bytes); expected a depth or tile that fits")
    buffers = {w.stream.buffer: c for c, w in placement.classes().items() if w.stream is not None}
    for cls, where in placement.classes().items():
        if cls in OUTPUT_CLASSES and where.memory in buffers:
            problems.append(f"{cls}.memory: {where.memory!r} is the prefetch buffer of {buffers[where.memory]}'s "
                            f"stream, which holds that stream's tiles only; expected another memory")
    others = [(c, w.stream.buffer) for c, w in placement.classes().items() if w.stream is not None]
    if len({b for _, b in others}) < len(others):
        problems.append(f"streams share a buffer ({', '.join(f'{c}: {b}' for c, b in others)}); "
                        f"expected one buffer memory per stream")
    if problems:
        raise PydanticCustomError("hw_config", "{msg}", {"msg": "; ".join(problems)})
    return placement


ChipPlacement = Annotated[Placement | None, AfterValidator(_fits_chip), Field(
    None, exclude_if=lambda p: p is None, description=(
        "where parameters, optimizer state, gradients, activations and step results live: resident in a memory, "
        "or (all but step results) streamed through a DMA engine (left out: the fastest memory with room, "
        "step results in the backing memory, as before)"))]
"""The type of Chip.placement; left out, the chip's dump (and its hardware hash) is the one from before."""


def placement_of(chip: Any) -> dict[str, ClassPlacement]:
    """A chip's placed classes by name ({} without a placement)."""
    p = getattr(chip, "placement", None)
    return {} if p is None else p.classes()


def streams_of(chip: Any) -> dict[str, tuple[str, ClassPlacement]]:
    """DMA resource name -> (class, its placement) for each streamed class of a chip."""
    return {dma_resource(c): (c, w) for c, w in placement_of(chip).items() if w.stream is not None}


def output_placement(chip: Any, node_class: str | None, result: bool) -> ClassPlacement | None:
    """The class placement that decides a task's output: step_results' for a step result (`result`) where
    given, else its node's class's (gradients, activations; None: neither); None where the placement says
    nothing."""
    placed = placement_of(chip)
    where = placed.get("step_results") if result else None
    if where is None and node_class in OUTPUT_CLASSES:
        where = placed.get(node_class)
    return where


def output_home(chip: Any, node_class: str | None, result: bool, written_back: bool = False) -> str | None:
    """The memory a placement puts a task's output in (output_placement's memory); None where the placement
    says nothing (levels.first_memory decides, as without a placement). Of a streamed class (streamed_output),
    only the DMA engine's write-back (`written_back`) goes there: its producer writes its unit's memory."""
    where = output_placement(chip, node_class, result)
    if where is None or (where.stream is not None and not result and not written_back):
        return None
    return where.memory


def streamed_output(chip: Any, node_class: str | None, result: bool) -> ClassPlacement | None:
    """The placement of a task output that streams through its class's DMA engine (gradients or activations
    placed with a `stream`, a step result never: it stays where it is written), else None."""
    where = None if result else output_placement(chip, node_class, result)
    return where if where is not None and where.stream is not None else None


def output_elem_bytes(chip: Any, node_class: str | None, result: bool) -> int | None:
    """Bytes per element a placement stores a task's output in (output_placement's bytes_per_element); None:
    the step's bytes (hw/precision.tensor_elem_bytes)."""
    if node_class == GROUP_INTERNAL:  # kept on chip, stored as the activations it stands for
        where = placement_of(chip).get("activations")
    else:
        where = output_placement(chip, node_class, result)
    return None if where is None else where.bytes_per_element


def storage_widths(chips: Any) -> set[int]:
    """Every bytes_per_element the placements of `chips` give a class ({}: none)."""
    return {w.bytes_per_element for c in chips for w in placement_of(c).values() if w.bytes_per_element is not None}


def places_outputs(chip: Any) -> bool:
    """Whether a chip's placement names an output class (its tasks' outputs then go where it says)."""
    return any(c in OUTPUT_CLASSES for c in placement_of(chip))
