"""Cost model: (node, unit) -> cycles, bytes, bound and utilization, from the op registry and the
hardware description alone (one source of truth for each).

cycles = unit pipeline latency + max(compute cycles + stall cycles, memory-traffic cycles), as a kernel on a
GPU-like chip (cost/kernel_overheads.py: plus the tail, at least the launch; HBM at its achievable fraction;
a GEMM's compute by its thread-block tiles and waves, cost/gpu_gemm.py).
Stall cycles come from an array unit's operand buffers (cost/operand_traffic.py); without them a node
moves each operand byte once and never stalls. Energy is flops and bytes at the effective figures of
cost/energy.py.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from accelsim.cost.compute import NodeWork, compute_cycles
from accelsim.cost.energy import node_energy_pj
from accelsim.cost.gpu_gemm import chip_gemm_cycles
from accelsim.cost.kernel_overheads import kernel_cycles, reread_bytes, streaming_bytes_per_cycle
from accelsim.cost.operand_traffic import operand_traffic
from accelsim.errors import MappingError
from accelsim.graph.ir import Graph, Node
from accelsim.hw.precision import compute_elem_bytes, compute_scale, scaled_cycles, tensor_elem_bytes
from accelsim.hw.spec import Chip, HwSpec, Unit
from accelsim.ops.registry import get_op, numel


@dataclass(frozen=True, slots=True)
class NodeCost:
    """The cost of one node on one instance of a unit kind (on all of them for a gang unit)."""

    node: int
    op: str
    unit: str
    flops: int
    bytes_read: int
    bytes_written: int
    compute_cycles: int
    memory_cycles: int
    latency_cycles: int
    cycles: int
    utilization: float  # flops / (cycles * the unit's peak ops per cycle); datapath busy fraction otherwise
    bound: str  # "compute" or "memory"
    energy_pj: float | None
    stall_cycles: int = 0  # array cycles spent waiting for operand buffers (0 without operand buffers)
    buffer_bytes: int = 0  # bytes the array moves in and out of its operand buffers (0 without them)
    overhead_cycles: int = 0  # of `cycles`, what the kernel's launch and tail add (0 off GPU-like chips)

    @property
    def level_bytes(self) -> dict[str, int]:
        """Bytes moved at each level of the hierarchy: the operand buffers (if any) and the unit's memory."""
        out = {"operand_buffers": self.buffer_bytes} if self.buffer_bytes else {}
        out["memory"] = self.bytes_read + self.bytes_written
        return out

    @property
    def arithmetic_intensity(self) -> float:
        """FLOPs per byte moved (seed 002's AI = #ops / #bytes)."""
        moved = self.bytes_read + self.bytes_written
        return self.flops / moved if moved else math.inf


def _shapes(graph: Graph, node: Node) -> tuple[tuple[int, ...], ...]:
    return tuple(graph.nodes[i].shape for i in node.inputs)


def node_features(graph: Graph, node: Node) -> dict[str, Any]:
    """What a unit's `when:` may constrain: the node's attributes plus op-derived facts (conv kernel)."""
    op = get_op(node.op)
    feats = dict(node.attrs)
    if op.features is not None:
        feats.update(op.features(node.shape, *_shapes(graph, node), **node.attrs))
    return feats


def _same(a: Any, b: Any) -> bool:
    norm = lambda v: [norm(x) for x in v] if isinstance(v, (list, tuple)) else v  # noqa: E731
    return norm(a) == norm(b)


def can_run(unit: Unit, graph: Graph, node: Node) -> bool:
    """A unit runs a node if it lists the op or its category, its `when:` matches, and a gemm_only
    compute model (an array) only takes ops with a GEMM view."""
    op = get_op(node.op)
    if node.op not in unit.ops and op.category not in unit.categories:
        return False
    if unit.model.gemm_only and op.gemm is None:
        return False
    if unit.when:
        feats = node_features(graph, node)
        return all(k in feats and _same(feats[k], v) for k, v in unit.when.items())
    return True


def capable_units(hw: HwSpec, graph: Graph, node: Node, chip: Chip | None = None) -> list[Unit]:
    """Units of `chip` (default: the first) that can run `node`; raises MappingError if none."""
    chip = chip or hw.chips[0]
    units = [u for u in chip.units if can_run(u, graph, node)]
    if not units:
        names = "; ".join(f"{u.name} runs {', '.join(u.ops + list(u.categories))}"
                          + (f" when {u.when}" if u.when else "") for u in chip.units)
        raise MappingError(f"no unit of {hw.name} (chip {chip.name!r}) can execute {node.op} node %{node.id} "
                           f"{node.name!r} (category {get_op(node.op).category}, {node_features(graph, node)}); "
                           f"units: {names}{_category_hint(chip, node)}")
    return units


def _category_hint(chip: Chip, node: Node) -> str:
    """How to cover a node whose op units list others of its category by name but not it: typically a
    training step's gradient op on a unit given `ops: [matmul, conv2d]`, which `categories:` would cover."""
    category = get_op(node.op).category
    listing = [u for u in chip.units if category not in u.categories and node.op not in u.ops
               and any(get_op(o).category == category for o in u.ops)]
    if not listing:
        return ""
    kind = " a gradient op of the backward pass, and" if node.phase == "backward" else ""
    names = " and ".join(u.name for u in listing)
    return (f". {node.op} is{kind} a {category} op: {names} list{'s' * (len(listing) == 1)} {category} ops by "
            f"name but not it; `categories: [{category}]` on {names} runs every {category} op, the gradient "
            f"ops of a training step included (or add {node.op} to its ops)")


def peak_ops_per_cycle(unit: Unit) -> float:
    """One instance's, from its compute model: 2 per MAC for an array, lanes x ops for a vector unit, 0 for
    the others (hw/compute.py)."""
    return unit.model.peak_ops_per_cycle()


def memory_cycles(hw: HwSpec, chip: Chip, unit: Unit, bytes_read: int, bytes_written: int) -> int:
    """Operands stream in from the unit's first `reads` memory (through its input buffer, if it has
    one) and results out to its first `writes` memory; one shared port when both are the same memory."""
    clock = hw.clock_hz
    src, dst = chip.memory(unit.reads[0]), chip.memory(unit.writes[0])
    read_bw = streaming_bytes_per_cycle(chip.gpu_overheads, src, clock)
    write_bw = streaming_bytes_per_cycle(chip.gpu_overheads, dst, clock)
    if unit.input_buffer is not None:
        read_bw = min(read_bw, unit.input_buffer.bytes_per_cycle(clock))
    if unit.output_buffer is not None:
        write_bw = min(write_bw, unit.output_buffer.bytes_per_cycle(clock))
    if src.name == dst.name and unit.input_buffer is None and unit.output_buffer is None:
        return math.ceil((bytes_read + bytes_written) / read_bw)
    return max(math.ceil(bytes_read / read_bw), math.ceil(bytes_written / write_bw))


def node_cost(hw: HwSpec, graph: Graph, node: Node, unit: Unit, chip: Chip | None = None) -> NodeCost:
    """Cost of `node` on one instance of `unit` (which must be able to run it)."""
    chip = chip or hw.chips[0]
    op = get_op(node.op)
    shapes = _shapes(graph, node)
    elem = compute_elem_bytes(hw, node)
    flops = int(op.flops(node.shape, *shapes, **node.attrs))
    bytes_read = int(op.read_elems(node.shape, *shapes, **node.attrs)) * elem
    # what its tensor holds per element: an update writing a weight writes its fp32 master and the cast copy
    bytes_written = int(op.written_elems(node.shape, *shapes, **node.attrs)) * tensor_elem_bytes(graph, node, hw)
    model = unit.model
    gemm = op.gemm(node.shape, *shapes, **node.attrs) if model.gemm_only else None
    ways = unit.count if unit.gang else 1  # a gang's instances split the node's work
    on_gpu = chip_gemm_cycles(hw, chip, unit, gemm, elem)  # a GPU's thread-block tiles and waves (cost/gpu_gemm.py)
    compute = on_gpu if on_gpu is not None else compute_cycles(
        model, NodeWork(flops, numel(node.shape), max(bytes_read, bytes_written), gemm, ways))
    compute = scaled_cycles(hw, unit, compute)  # the unit's rate at the step's precision
    stall = buffer_bytes = 0
    channels_bound = False  # the operand buffers' channels, not the array, set the pace
    if unit.operand_buffers is not None:
        traffic = operand_traffic(hw, node, shapes, unit, compute, elem)
        bytes_read, bytes_written = traffic.read_bytes, traffic.written_bytes
        stall, buffer_bytes = traffic.stall_cycles, traffic.buffer_bytes
        channels_bound = traffic.memory_bound
    passes = op.passes(node.shape, *shapes, **node.attrs) if op.passes is not None else None
    bytes_read += reread_bytes(chip, passes, elem)  # a span too large for the L2 is read once per phase
    memory = memory_cycles(hw, chip, unit, bytes_read, bytes_written)
    work = unit.latency_cycles + max(compute + stall, memory, 1)
    cycles = kernel_cycles(chip.gpu_overheads, hw.clock_hz, work)
    peak = model.peak_ops_per_cycle() * ways / compute_scale(hw, unit)  # the peak at the step's precision
    utilization = flops / (cycles * peak) if peak else compute / cycles
    energy = node_energy_pj(hw, chip, unit, flops, bytes_read, bytes_written, buffer_bytes, node.phase)
    return NodeCost(node.id, node.op, unit.name, flops, bytes_read, bytes_written, compute, memory,
                    unit.latency_cycles, cycles, min(utilization, 1.0),
                    "compute" if compute >= memory and not channels_bound else "memory", energy, stall, buffer_bytes,
                    cycles - work)


def best_cost(hw: HwSpec, graph: Graph, node: Node, chip: Chip | None = None) -> NodeCost:
    """The cheapest capable unit for `node` (ties: the unit listed first)."""
    costs = [node_cost(hw, graph, node, u, chip) for u in capable_units(hw, graph, node, chip)]
    return min(costs, key=lambda c: c.cycles)


def graph_costs(hw: HwSpec, graph: Graph) -> list[NodeCost]:
    """Best-unit cost of every non-leaf node, in node order."""
    if not isinstance(hw, HwSpec) or not isinstance(graph, Graph):
        raise MappingError(f"graph_costs(hw, graph) needs an HwSpec (from A.load_hw) and a Graph, got "
                           f"{type(hw).__name__} and {type(graph).__name__}")
    return [best_cost(hw, graph, n) for n in graph.nodes if not n.is_leaf]
