"""The cost of one mapping of one layer on one array unit: (HwSpec, Chip, Unit, LayerDims, Mapping) -> MappingCost.

Compute: the mapping's folds, each streaming T elements, run as cost/systolic.py runs a node's folds (fill,
drain, preload, the unit's fold overlap; a gang's instances split the folds). An os array keeps no
stationary operand to double-buffer, so under a unit's `fold_overlap: stationary` its os folds run one
after another. Operand buffers: their one traffic model, cost/tile_traffic.py, applied to the GEMM the
mapping puts on the array (mapping/gemm_view.py) gives the bytes fetched and written back, the stall
cycles, the array <-> buffer bytes and whether the channels set the pace, exactly as node_cost charges a
fixed-dataflow unit; then the unit's memory moves what the buffers fetch and write, at its bandwidth, and
the step's precision, a GPU's kernel overheads and its GEMM tiles and waves (cost/gpu_gemm.py, which set a
GPU's compute whatever the mapping) apply as in cost/model.py's node_cost (the fixed mapping's cycles are
node_cost's, exactly). Energy: cost/energy.py's per-op and per-byte figures on those counts.
Two latencies: `cycles`, what a schedule charges (a node's first loads overlap its predecessors), and
`isolated_cycles`, the layer run alone, which must first load what its mapping keeps resident above the
array (mapping/onload.py; with operand buffers, their initial fill) before the first MAC: latency + max(on-
loading + compute and stalls, the memory traffic), the on-loaded bytes being part of that traffic.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from accelsim.cost.energy import node_energy_pj
from accelsim.cost.gpu_gemm import chip_gemm_cycles
from accelsim.cost.kernel_overheads import kernel_cycles
from accelsim.cost.model import memory_cycles
from accelsim.cost.systolic import run_cycles
from accelsim.cost.tile_traffic import BufferConfig, tile_traffic
from accelsim.hw.precision import scaled_cycles
from accelsim.hw.spec import Chip, HwSpec, Unit
from accelsim.mapping.dims import OPERAND_ROLES, LayerDims
from accelsim.mapping.errors import MappingSpecError
from accelsim.mapping.gemm_view import check_traffic_order, traffic_view
from accelsim.mapping.onload import ResidentTile, resident_tile
from accelsim.mapping.record import DATAFLOW_ROLES, Geometry, Mapping, check_mapping

OPERANDS = ("input", "weight", "output")


@dataclass(frozen=True, slots=True)
class LevelTraffic:
    """Bytes moved at one level of the unit's hierarchy: "operand_buffers" (array <-> buffers) or
    "memory" (the unit's first reads/writes memory <-> the array or its buffers)."""

    level: str
    read_bytes: int
    written_bytes: int


@dataclass(frozen=True, slots=True)
class LevelTile:
    """The elements of each operand one iteration at a level holds: a fold's tiles at "operand_buffers",
    the whole layer at "memory"."""

    level: str
    input_elems: int
    weight_elems: int
    output_elems: int


@dataclass(frozen=True, slots=True)
class MappingCost:
    """Cycles, stalls, traffic and energy of one mapping; `cycles` is what the cost model would charge."""

    mapping: Mapping
    folds: int
    temporal: int
    compute_cycles: int  # folds x fold cycles, fill and drain included (cost/systolic.py)
    buffer_stall_cycles: int  # waiting on the operand buffers' channels (0 without operand buffers)
    memory_stall_cycles: int  # waiting on the unit's memory beyond compute and buffer stalls
    cycles: int  # latency + compute + both stalls: what a schedule charges (first loads overlap predecessors)
    onload_cycles: int  # loading the resident tile (or the operand buffers' initial fill) before the first MAC
    isolated_cycles: int  # the layer run alone: latency + max(onload + compute + buffer stalls, memory traffic)
    resident: ResidentTile  # what the mapping holds above the array before its first MAC (mapping/onload.py)
    array_utilization: float  # MACs / (compute cycles x PEs): the mapping's spatial and fold efficiency
    traffic: tuple[LevelTraffic, ...]
    tiles: tuple[LevelTile, ...]
    energy_pj: float | None
    memory_cycles: int = 0  # the unit's memory traffic at its bandwidth
    channels_bound: bool = False  # the operand buffers' channels, not the array, set the pace


def _array_context(unit: Unit) -> tuple[int, int, int]:
    array = unit.array
    if array is None:
        raise MappingSpecError(f"unit {unit.name!r} has no systolic array ({unit.compute_model} model); only array "
                               f"units are mapped")
    return array.rows, array.cols, unit.count if unit.gang else 1


def unit_dataflows(unit: Unit) -> tuple[str, ...]:
    """The dataflows a unit's array may run: its `dataflows` list, else its one `array.dataflow`."""
    _array_context(unit)
    return unit.dataflows if unit.dataflows is not None else (unit.array.dataflow,)


def mapping_compute_cycles(unit: Unit, mapping: Mapping, geom: Geometry) -> int:
    """The folds run one after another (or overlapped) on one array; a gang's instances split them."""
    array = unit.array
    ways = unit.count if unit.gang else 1
    overlap = "none" if mapping.dataflow == "os" else array.fold_overlap
    return run_cycles(-(-geom.folds // ways), array.rows, array.cols, geom.temporal, mapping.dataflow, overlap,
                      array.preload_rows_per_cycle if mapping.dataflow != "os" else 1)


@dataclass(frozen=True, slots=True)
class _Buffered:
    """What the operand buffers' traffic model charges one mapping (elements, cycles)."""

    read_elems: int  # fetched from the backing memory into the input and weight buffers
    written_elems: int  # written back from the output buffer
    buffer_elems: int  # array <-> buffers
    busy_cycles: int  # compute plus the buffers' stalls
    channels_bound: bool  # the busiest channel's traffic takes longer than the compute
    fill_cycles: int  # the buffers' initial fill before the first MAC (a schedule overlaps it with predecessors)


def _buffered(hw: HwSpec, unit: Unit, layer: LayerDims, mapping: Mapping, geom: Geometry, compute: int,
              elem: int) -> _Buffered:
    """cost/tile_traffic.py on the GEMM the mapping runs (mapping/gemm_view.py)."""
    check_traffic_order(layer, mapping, geom, unit.name)
    b = unit.operand_buffers
    rows, cols, ways = _array_context(unit)
    view = traffic_view(layer, mapping, geom)
    config = BufferConfig(b.input_bytes, b.weight_bytes, b.output_bytes, b.bytes_per_cycle(hw.clock_hz),
                          b.double_buffered)
    t = tile_traffic(view.batch, view.m, view.k, view.n, rows, cols, mapping.dataflow, compute, elem, config,
                     channels=ways, im2col=view.im2col)
    # tile_traffic overlaps every repeat's initial fill with neighbouring nodes, as it may a layer's own batch;
    # repeats the mapping adds (beyond the layer's batch role) are mid-layer, so their fills stream in the
    # node's time: without this a search picks splits for fills it is never charged for
    added = view.batch - layer.role_size("b")
    extra = t.fill_cycles * added // view.batch if config.double_buffered and added > 0 else 0
    channel = t.channel_cycles + extra
    return _Buffered(t.backing_read_elems, t.output_write_elems, t.buffer_access_elems,
                     max(t.total_cycles, channel), channel > compute, t.fill_cycles)


def _fold_tile(mapping: Mapping, geom: Geometry, rows: int, cols: int) -> LevelTile:
    """The elements of each operand one fold touches: the array's share of the rows and columns roles and
    the stream tile, over the roles that index the operand."""
    row_role, col_role, stream_role = DATAFLOW_ROLES[mapping.dataflow]
    extent = {row_role: min(rows, geom.spatial_rows), col_role: min(cols, geom.spatial_cols),
              stream_role: geom.temporal, "b": 1}
    return LevelTile("operand_buffers", *(math.prod(extent[r] for r in OPERAND_ROLES[op]) for op in OPERANDS))


def mapping_cost(hw: HwSpec, chip: Chip, unit: Unit, layer: LayerDims, mapping: Mapping) -> MappingCost:
    """Cost of `mapping` of `layer` on one instance of `unit` (all of them for a gang unit)."""
    rows, cols, ways = _array_context(unit)
    geom = check_mapping(layer, mapping, rows, cols, unit_dataflows(unit), unit.name)
    elem = hw.elem_bytes(layer.dtype)
    # a GPU-like chip's library tiles the GEMM its own way, whatever the mapping (cost/gpu_gemm.py, as node_cost)
    gemm = tuple(layer.role_size(role) for role in ("b", "m", "k", "n"))
    on_gpu = chip_gemm_cycles(hw, chip, unit, gemm, elem)
    compute = scaled_cycles(hw, unit, on_gpu if on_gpu is not None else mapping_compute_cycles(unit, mapping, geom))
    if unit.operand_buffers is None:
        read, written = layer.read_elems * elem, layer.written_elems * elem
        busy, buffer_elems, channels_bound = compute, 0, False
        fill = None  # no buffers: the resident tile streams from the unit's memory before the first MAC
        tile = LevelTile("operand_buffers", *(layer.operand_elems(op) if op != "input" else layer.input_elems
                                              for op in OPERANDS))
    else:
        buffered = _buffered(hw, unit, layer, mapping, geom, compute, elem)
        read, written = buffered.read_elems * elem, buffered.written_elems * elem
        busy, buffer_elems, channels_bound = buffered.busy_cycles, buffered.buffer_elems, buffered.channels_bound
        fill = buffered.fill_cycles  # the buffers' traffic model already knows what they hold first
        tile = _fold_tile(mapping, geom, rows, cols)
    memory = memory_cycles(hw, chip, unit, read, written)  # node_cost's: a GPU's HBM at its achievable fraction
    cycles = kernel_cycles(chip.gpu_overheads, hw.clock_hz, unit.latency_cycles + max(busy, memory, 1))
    resident = resident_tile(layer, mapping, geom, rows, cols)
    onload = memory_cycles(hw, chip, unit, resident.elems * elem, 0) if fill is None else fill
    isolated = kernel_cycles(chip.gpu_overheads, hw.clock_hz, unit.latency_cycles + max(onload + busy, memory, 1))
    traffic = ((LevelTraffic("operand_buffers", buffer_elems * elem, 0),) if buffer_elems else ()) + \
        (LevelTraffic("memory", read, written),)
    whole = LevelTile("memory", layer.input_elems, layer.operand_elems("weight"), layer.operand_elems("output"))
    energy = node_energy_pj(hw, chip, unit, layer.flops, read, written, buffer_elems * elem)
    utilization = layer.macs / (compute * rows * cols * ways)
    return MappingCost(mapping, geom.folds, geom.temporal, compute, busy - compute, max(0, memory - busy), cycles,
                       onload, isolated, resident, utilization, traffic, (tile, whole), energy, memory,
                       channels_bound)
