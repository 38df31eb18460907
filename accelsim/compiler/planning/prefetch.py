"""Streamed placement classes as DMA tasks (hw/placement.py -> TaskSpecs): for every node task that reads
a leaf of a streamed class, a prefetch on the chip's DMA engine for that class stages the leaf's head (at most
prefetch_depth tiles) in the stream's buffer before the reader starts; the reader depends on it and streams
the rest from the class's memory while it runs, at the DMA engine's bandwidth at most. A streamed output
(gradients, activations) is first written back by its class's engine from its producer's memory into the
class's memory (a write-back task), and its readers' prefetches stage it from there likewise. Also the
storage width of each class (its `bytes_per_element`), which sizes every tensor the plan places."""
from __future__ import annotations

import math

from accelsim.cost.energy import memory_pj_per_byte
from accelsim.graph.ir import Graph, Node
from accelsim.errors import HwConfigError, ScheduleError
from accelsim.fusion_groups import group_internal_nodes
from accelsim.hw.placement import (GROUP_INTERNAL, LEAF_CLASSES, ClassPlacement, dma_resource, output_elem_bytes,
                                   placement_of, places_outputs, streamed_output)
from accelsim.hw.precision import tensor_bytes, tensor_elem_bytes
from accelsim.memory_split import node_categories
from accelsim.ops.registry import get_op
from accelsim.hw.spec import Chip, HwSpec
from accelsim.schedule.identity import PER_STEP
from accelsim.schedule.kinds import TASK_KINDS
from accelsim.schedule.levels import is_result, spill_cycles


def leaf_classes(graph: Graph) -> dict[int, str]:
    """Leaf node -> its placement class: a trainable or frozen parameter is "parameters", a non-trainable
    parameter that only update nodes read (momentum, Adam's moments) is "optimizer_state". Inputs and
    constants have no class (they are placed as without a placement)."""
    readers: dict[int, set[str]] = {}
    for n in graph.nodes:
        for i in n.inputs:
            readers.setdefault(i, set()).add(n.phase)
    out = {}
    for n in graph.nodes:
        if n.op != "param":
            continue
        state = not n.trainable and readers.get(n.id, set()) == {"update"}
        out[n.id] = "optimizer_state" if state else "parameters"
    return out


def output_classes(graph: Graph) -> dict[int, str]:
    """Non-leaf node -> its output placement class (hw/placement.py): "gradients" for a parameter's gradient
    node, "activations" for every other forward or backward node (memory_split.node_categories, which names
    the same tensors in a chip's peak). Update nodes have none (placed as without a placement); a graph
    without an optimizer (inference) has activations only. An activation that a fusion group both produces and
    consumes is GROUP_INTERNAL instead (kept on chip, hw/placement.py)."""
    if graph.optimizer is None:
        out = {n.id: "activations" for n in graph.nodes if not n.is_leaf and n.phase != "update"}
    else:
        out = {i: c for i, c in node_categories(graph).items()
               if c in ("gradients", "activations") and not graph.nodes[i].is_leaf}
    for i in group_internal_nodes(graph):
        if out.get(i) == "activations":
            out[i] = GROUP_INTERNAL
    return out


def leaf_widths(hw: HwSpec, chips: list[Chip]) -> dict[str, int]:
    """Leaf class -> the bytes_per_element its placement gives (hw/placement.py). A leaf is sized once for every
    chip, so a width must be given alike by every chip, and not under a step precision (which sizes the leaves'
    master and working copies itself); refused otherwise, naming the chips."""
    out: dict[str, int] = {}
    for cls in LEAF_CLASSES:
        given = {c.name: getattr(placement_of(c).get(cls), "bytes_per_element", None) for c in chips}
        widths = set(given.values())
        if widths == {None}:
            continue
        if len(widths) > 1:
            said = ", ".join(f"{name}: {w if w is not None else 'none'}" for name, w in sorted(given.items()))
            raise HwConfigError(f"placement {cls}.bytes_per_element differs between chips ({said}); a leaf is "
                                f"sized once for every chip: expected every chip to give the same width, or none")
        if hw.step_precision is not None:
            raise HwConfigError(f"placement {cls}.bytes_per_element {widths.pop()} on chip(s) "
                                f"{', '.join(sorted(given))} under step precision {hw.step_precision}, which sizes "
                                f"parameters and optimizer state itself; expected no precision, or no width")
        out[cls] = widths.pop()
    return out


class Prefetcher:
    """The placement classes of one plan: the bytes each tensor is stored as (its class's width, whole tiles of a
    tiled stream), and the prefetch and write-back tasks of the streamed classes: which stream on which chip, and
    at what cost."""

    def __init__(self, graph: Graph, hw: HwSpec, chips: list[Chip]) -> None:
        self.graph, self.hw, self.chips = graph, hw, chips
        self.classes = leaf_classes(graph)
        self.any = any(placement_of(c) for c in chips)
        # non-leaf node -> its output class, when a chip places an output class; {} otherwise (the common case)
        self.out_classes = output_classes(graph) if any(places_outputs(c) for c in chips) else {}
        # leaves a tensor op (the matrix unit's ops) reads: the ones a tiled stream stores as whole tiles
        self.matrix_operands = {i for n in graph.nodes if not n.is_leaf and get_op(n.op).category == "tensor"
                                for i in n.inputs if graph.nodes[i].is_leaf}
        self.leaf_widths = leaf_widths(hw, chips)

    def _at_width(self, node: Node, nbytes: int, width: int | None) -> int:
        """`nbytes` of `node` at the step's width (tensor_elem_bytes) restated at `width` bytes per element (None:
        as they are): the one place a placement's storage width rescales a tensor's bytes, so a leaf's size, its
        tiles and a stored output all follow the same arithmetic."""
        if width is None:
            return nbytes
        return nbytes // tensor_elem_bytes(self.graph, node, self.hw) * width

    def leaf_bytes(self, leaf: Node, nbytes: int) -> int:
        """`nbytes` of a leaf at the step's width, at its class's width where the placement gives one."""
        return self._at_width(leaf, nbytes, self.leaf_widths.get(self.classes.get(leaf.id)))

    def nbytes(self, node: Node) -> int:
        """Bytes of a node's whole tensor: at the step's width, a leaf at its placement class's."""
        nbytes = tensor_bytes(self.graph, node, self.hw)
        if node.is_leaf and self.leaf_widths:
            return self.leaf_bytes(node, nbytes)
        return nbytes

    def placed_leaf_bytes(self, leaf: Node) -> int:
        """Bytes a leaf occupies where it is placed (a streamed class may keep it as whole tiles: tiled_leaf_bytes)."""
        return self.tiled_leaf_bytes(leaf, self.nbytes(leaf))

    def refuse_widths_under_zero(self, zero: int) -> None:
        """ZeRO (stage `zero`) cuts its shards of gradients, parameters and optimizer state at the step's width: a
        placement's storage width for those classes is refused under it."""
        widths = {(c.name, cls): w for c in self.chips for cls in ("gradients", "parameters", "optimizer_state")
                  if (w := getattr(placement_of(c).get(cls), "bytes_per_element", None)) is not None}
        if widths:
            said = ", ".join(f"{cls} {w} on {chip}" for (chip, cls), w in sorted(widths.items()))
            raise ScheduleError(f"ZeRO stage {zero} shards gradients, parameters and optimizer state "
                                f"at the step's width, but the placement stores them at bytes_per_element ({said});"
                                f" expected zero 0, or no bytes_per_element on those classes")

    def stream(self, chip: int, leaf: int) -> tuple[str, ClassPlacement] | None:
        """(DMA resource, placement) when `leaf` streams on `chip`, else None."""
        cls = self.classes.get(leaf)
        where = placement_of(self.chips[chip]).get(cls) if cls is not None and self.any else None
        if where is None or where.stream is None:
            return None
        return dma_resource(cls), where

    def tiled_leaf_bytes(self, leaf: Node, nbytes: int) -> int:
        """Bytes leaf `leaf` (`nbytes` of its own at its class's width: leaf_bytes) occupies where it is placed: a
        matrix-unit operand (a leaf a tensor op reads) as its class's stream stores it (hw/placement.DmaStream.
        stored_bytes: whole tiles, each element at the class's width, where the stream has a tile_shape), any other
        leaf `nbytes`. A class streamed by chips that lay it out differently takes the largest (the plan sizes a
        leaf once)."""
        cls = self.classes.get(leaf.id)
        if cls is None or not self.any or leaf.id not in self.matrix_operands:
            return nbytes
        elem = self.leaf_bytes(leaf, tensor_elem_bytes(self.graph, leaf, self.hw))  # one element, at its width
        stored = [w.stream.stored_bytes(leaf.shape, elem) for c in self.chips
                  if (w := placement_of(c).get(cls)) is not None and w.stream is not None]
        return max(stored, default=nbytes)

    def stored_bytes(self, chip: int, node: Node, keep: bool, nbytes: int | None = None) -> int:
        """Bytes of a task output holding `node`'s value on `chip` (`nbytes`: of a part of it at the step's width;
        None: the whole tensor) at the width of its output class's placement where one is given (hw/placement.py;
        `keep`: the task keeps its value as a step result, levels.is_result)."""
        nbytes = self.nbytes(node) if nbytes is None else nbytes
        if not self.out_classes:
            return nbytes
        width = output_elem_bytes(self.chips[chip], self.out_classes.get(node.id), is_result(keep, node.phase))
        return self._at_width(node, nbytes, width)

    def out_stream(self, chip: int, node: int, result: bool) -> tuple[str, ClassPlacement] | None:
        """(DMA resource, placement) when node `node`'s output streams on `chip` (placement.streamed_output)."""
        cls = self.out_classes.get(node)
        where = streamed_output(self.chips[chip], cls, result) if cls is not None else None
        return None if where is None else (dma_resource(cls), where)

    def write_back(self, new, producer, stream: tuple[str, ClassPlacement]):
        """The write-back task (made with `new(**fields)`) of a streamed output: the class's DMA engine copies
        `producer`'s output from the memory its unit wrote into the class's memory, at the engine's bandwidth
        (its latency first); its readers depend on it and read the copy there (or its prefetched head)."""
        resource, where = stream
        nbytes = producer.out_bytes
        cycles = where.stream.latency_cycles + math.ceil(nbytes / where.stream.bytes_per_cycle(self.hw.clock_hz))
        c = self.chips[producer.chip]
        return new(kind="writeback", node=producer.node, op="writeback", phase=producer.phase,
                   microbatch=producer.microbatch, replica=producer.replica, stage=producer.stage, chip=producer.chip,
                   out_chip=producer.chip, deps=[producer.id], options=((resource, 1, max(1, cycles)),),
                   out_bytes=nbytes, port_bytes=0, part=producer.part,
                   energy_pj=nbytes * (memory_pj_per_byte(c, c.memory(where.memory)) or 0.0))

    def stage(self, new, tasks: list, reads: list[tuple[int, int]], common: dict, deps: list[int] = ()
              ) -> tuple[list[int], int, int]:
        """Prefetch tasks (made with `new(**fields)`; `tasks` the plan's so far) for the streamed leaves among a
        reader's `reads` and for the streamed outputs among its dependences `deps` (their write-back tasks),
        `common` the reader's identity fields: one per tile of each head, as many as the buffer's prefetch_depth
        slots allow for the reader's leaves and values together. Each holds one slot of the buffer (a FIFO
        entry: tile_bytes, the last tile too) and moves its tile's bytes; a value's depends on its write-back.
        The reader waits for them (ordering edges: its value is computed from the leaf or the write-back's copy
        itself, so the executor reads no staged copy). Returns their ids and the cycles the reader needs at least
        to stream the rest through the DMA engines (a class's tensors one after another, the classes' engines in
        parallel): of the leaves, and of the values."""
        if not self.any:
            return [], 0, 0
        values = tuple(tasks[d] for d in deps if TASK_KINDS[tasks[d].kind].writes_back)
        sizes = {i: self.placed_leaf_bytes(self.graph.nodes[i]) for i, _ in reads}
        chip = common["chip"]
        ids: list[int] = []
        rest: dict[tuple[bool, str], int] = {}  # (a value?, engine) -> cycles
        slots: dict[str, int] = {}  # slots the reader's earlier tensors left: all its tiles are held at once
        heads = []  # (stream, node, bytes, its write-back or None)
        for leaf, mb in reads:
            s = self.stream(chip, leaf) if mb == PER_STEP else None
            if s is not None:
                heads.append((s, leaf, sizes[leaf], None))
        for wb in values:
            s = self.out_stream(chip, wb.node, False)
            if s is not None and wb.chip == chip:
                heads.append((s, wb.node, wb.out_bytes, wb.id))
        for (resource, where), node, size, wb in heads:
            stream = where.stream
            per_cycle = stream.bytes_per_cycle(self.hw.clock_hz)
            tiles = min(slots.setdefault(resource, stream.prefetch_depth), -(-size // stream.tile_bytes))
            slots[resource] -= tiles
            for i in range(tiles):
                moved = min(stream.tile_bytes, size - i * stream.tile_bytes)
                cycles = stream.latency_cycles + math.ceil(moved / per_cycle)
                t = new(kind="prefetch", node=node, op="prefetch", phase=common["phase"],
                        microbatch=common["microbatch"], replica=common["replica"], stage=common["stage"], chip=chip,
                        out_chip=chip, deps=[] if wb is None else [wb], options=((resource, 1, max(1, cycles)),),
                        out_bytes=stream.tile_bytes, port_bytes=moved,
                        reads=[(node, PER_STEP)] if wb is None else [], energy_pj=self.energy_pj(chip, where, moved))
                ids.append(t.id)
            staged = min(size, tiles * stream.tile_bytes)
            key = (wb is not None, resource)
            rest[key] = rest.get(key, 0) + math.ceil((size - staged) / per_cycle)
        return ids, max((c for (v, _), c in rest.items() if not v), default=0), max(
            (c for (v, _), c in rest.items() if v), default=0)

    def streams_slower(self, chip: int, reads: list[tuple[int, int]]) -> bool:
        """Whether a leaf among `reads` streams through a DMA engine slower than the memory it lives in: its
        reader then waits for the engine longer than reading the leaf from that memory takes (levels.read_cycles,
        what the validator and the simulators charge), so the reader's candidates must carry the stream."""
        for leaf, mb in reads:
            s = self.stream(chip, leaf) if mb == PER_STEP else None
            if s is None:
                continue
            stream, size = s[1].stream, self.placed_leaf_bytes(self.graph.nodes[leaf])
            memory = self.chips[chip].memory(s[1].memory)
            if math.ceil(size / stream.bytes_per_cycle(self.hw.clock_hz)) > spill_cycles(memory, size,
                                                                                            self.hw.clock_hz):
                return True
        return False

    def energy_pj(self, chip: int, where: ClassPlacement, nbytes: int) -> float:
        """Reading `nbytes` in the class's memory and writing them in its buffer (0 where a figure is missing)."""
        c = self.chips[chip]
        per_byte = [memory_pj_per_byte(c, c.memory(m)) for m in (where.memory, where.stream.buffer)]
        return nbytes * sum(p or 0.0 for p in per_byte)


def streaming(options: tuple, cycles: int) -> tuple:
    """A reader's candidates lasting at least `cycles`, the streaming of the rest of the outputs it reads
    through their DMA engines (hw/placement.py): it holds its unit until they have arrived, so a late prefetch
    stalls it, and the schedule's candidates say so (the validator and the simulators replay them)."""
    return options if not cycles else tuple((r, n, max(c, cycles)) for r, n, c in options)
