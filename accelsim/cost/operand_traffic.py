"""An array unit's operand buffers applied to one node: the node's GEMM view and its bytes in, the traffic
model the unit names (`operand_buffers.traffic`) out, in the units the cost model uses (bytes, cycles).

"tile" (cost/tile_traffic.py) is the predictive fold-level model of double-buffered operand buffers; "scalesim"
(cost/scalesim_memory.py) replays SCALE-Sim 3.0.0's memory system, element by element, for layers it can
describe (a GEMM, or a batch-1 conv with square strides), and falls back to "tile" for the others.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from accelsim.cost.tile_traffic import BufferConfig, tile_traffic
from accelsim.errors import MappingError
from accelsim.graph.ir import Node
from accelsim.hw.spec import HwSpec, Unit
from accelsim.ops.registry import get_op, numel


@dataclass(frozen=True, slots=True)
class OperandTraffic:
    """What the cost model needs: backing-memory bytes each way, stall cycles on top of the compute
    cycles, bytes between the array and its buffers, and whether the channels set the pace."""

    read_bytes: int
    written_bytes: int
    stall_cycles: int
    buffer_bytes: int
    memory_bound: bool


def _buffer_config(hw: HwSpec, unit: Unit) -> BufferConfig:
    b = unit.operand_buffers
    return BufferConfig(b.input_bytes, b.weight_bytes, b.output_bytes, b.bytes_per_cycle(hw.clock_hz),
                        b.double_buffered)


def _im2col(node: Node, shapes: tuple) -> tuple[int, int, int, int] | None:
    """A conv's im2col geometry (channels per group, kernel width, output width, stride), which sets where its left
    operand's pixels repeat (cost/tile_traffic.py); None for other ops."""
    if node.op != "conv2d":
        return None
    (_, c, _, _), (_, _, _, kw) = shapes[0], shapes[1]
    return c // node.attrs.get("groups", 1), kw, node.shape[-1], node.attrs["stride"][1]


def _tile(hw: HwSpec, node: Node, shapes: tuple, unit: Unit, compute_cycles: int, elem_bytes: int,
          gemm: tuple[int, int, int, int]) -> OperandTraffic:
    batch, m, k, n = gemm
    array = unit.array
    t = tile_traffic(batch, m, k, n, array.rows, array.cols, array.dataflow, compute_cycles, elem_bytes,
                     _buffer_config(hw, unit), channels=unit.count if unit.gang else 1, im2col=_im2col(node, shapes))
    return OperandTraffic(t.backing_read_elems * elem_bytes, t.output_write_elems * elem_bytes, t.stall_cycles,
                          t.buffer_access_elems * elem_bytes, t.channel_cycles > compute_cycles)


def _scalesim_layer(node: Node, shapes: tuple, gemm: tuple[int, int, int, int]) -> dict | None:
    """The layer as SCALE-Sim's topology describes it, or None when it cannot (batched GEMMs, grouped,
    dilated or batched convs, unequal strides or paddings, conv gradients)."""
    batch, m, k, n = gemm
    if node.op == "conv2d":
        (nb, c, h, w), (o, _, kh, kw) = shapes[0], shapes[1]
        a = node.attrs
        if nb == 1 and a.get("groups", 1) == 1 and tuple(a.get("dilation", (1, 1))) == (1, 1) \
                and a["stride"][0] == a["stride"][1] and a["padding"][0] == a["padding"][1]:
            return dict(kind="conv", c=c, h=h, w=w, o=o, kh=kh, kw=kw, stride=a["stride"][0],
                        padding=a["padding"][0])
        return None
    if node.op in ("matmul", "matmul_epilogue") and batch == 1:  # the fused op: the same GEMM (bias not modelled)
        return dict(kind="gemm", m=m, k=k, n=n)
    return None


def _scalesim(hw: HwSpec, node: Node, shapes: tuple, unit: Unit, compute_cycles: int, elem_bytes: int,
              layer: dict) -> OperandTraffic:
    from accelsim.cost.scalesim_memory import scalesim_conv_traffic, scalesim_gemm_traffic

    b = unit.operand_buffers
    # SCALE-Sim counts words; a word here is one element, each buffer holds capacity // elem_bytes of them
    words = [max(1, size // elem_bytes) for size in (b.input_bytes, b.weight_bytes, b.output_bytes)]
    bw_words = max(1, math.floor(b.bytes_per_cycle(hw.clock_hz) / elem_bytes))
    array = unit.array
    common = dict(rows=array.rows, cols=array.cols, dataflow=array.dataflow, ifmap_words=words[0],
                  filter_words=words[1], ofmap_words=words[2], ifmap_bw_words=bw_words,
                  filter_bw_words=bw_words, ofmap_bw_words=bw_words)
    kind = layer.pop("kind")
    try:
        s = (scalesim_gemm_traffic if kind == "gemm" else scalesim_conv_traffic)(**layer, **common)
    except ValueError as e:  # the replay's size guard: say which node and unit, and the way out
        raise MappingError(f"{node.op} node %{node.id} {node.name!r} on unit {unit.name!r}: {e} Use "
                           f"operand_buffers.traffic 'tile' for layers this large.") from None
    traffic_cycles = math.ceil(max(s.ifmap_dram_words, s.filter_dram_words, s.ofmap_dram_words) / bw_words)
    stall = s.stall_cycles  # SCALE-Sim's own count; its rows are the compute cycles of fold_overlap 'none'
    buffer_words = s.ifmap_sram_reads + s.filter_sram_reads + s.ofmap_sram_writes
    return OperandTraffic((s.ifmap_dram_words + s.filter_dram_words) * elem_bytes,
                          s.ofmap_dram_words * elem_bytes, stall, buffer_words * elem_bytes,
                          traffic_cycles > compute_cycles)


def operand_traffic(hw: HwSpec, node: Node, shapes: tuple, unit: Unit, compute_cycles: int,
                    elem_bytes: int) -> OperandTraffic:
    """Traffic of `node` through `unit`'s operand buffers (the unit must have an array and buffers)."""
    op = get_op(node.op)
    gemm = op.gemm(node.shape, *shapes, **node.attrs)
    if unit.operand_buffers.traffic == "scalesim" and not (unit.gang and unit.count > 1):
        layer = _scalesim_layer(node, shapes, gemm)
        if layer is not None:
            return _scalesim(hw, node, shapes, unit, compute_cycles, elem_bytes, layer)
    return _tile(hw, node, shapes, unit, compute_cycles, elem_bytes, gemm)
