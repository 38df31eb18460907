"""The cost of one mapping of one layer on one array unit: (HwSpec, Chip, Unit, LayerDims, Mapping) -> MappingCost.

Compute: the mapping's folds, each streaming T elements, run as cost/systolic.py runs a node's folds (fill,
drain, preload, the unit's fold overlap; a gang's instances split the folds). An os array keeps no
stationary operand to double-buffer, so under a unit's `fold_overlap: stationary` its os folds run one
after another. Stalls: with operand buffers, each buffer's channel moves the traffic reuse analysis
(mapping/reuse.py) finds; double-buffered, only the first fold's tiles and the last output tile are exposed
and the rest overlaps compute (the busiest channel sets the pace when it is slower); then the unit's memory
moves what the buffers fetch and write, at its bandwidth. Energy: cost/energy.py's per-op and per-byte
figures on those counts.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from accelsim.cost.energy import node_energy_pj
from accelsim.cost.systolic import run_cycles
from accelsim.hw.spec import Chip, HwSpec, Unit
from accelsim.mapping.dims import LayerDims
from accelsim.mapping.errors import MappingSpecError
from accelsim.mapping.record import Geometry, Mapping, check_mapping
from accelsim.mapping.reuse import OPERANDS, OperandFetch, operand_fetches


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
    cycles: int  # latency + compute + both stalls
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


def _memory_cycles(hw: HwSpec, chip: Chip, unit: Unit, read_bytes: int, written_bytes: int) -> int:
    """Operands from the unit's first `reads` memory, results to its first `writes` memory (one shared port
    when they are the same memory and no buffer sits between), capped by its input/output buffers."""
    src, dst = chip.memory(unit.reads[0]), chip.memory(unit.writes[0])
    read_bw, write_bw = src.bytes_per_cycle(hw.clock_hz), dst.bytes_per_cycle(hw.clock_hz)
    if unit.input_buffer is not None:
        read_bw = min(read_bw, unit.input_buffer.bytes_per_cycle(hw.clock_hz))
    if unit.output_buffer is not None:
        write_bw = min(write_bw, unit.output_buffer.bytes_per_cycle(hw.clock_hz))
    if src.name == dst.name and unit.input_buffer is None and unit.output_buffer is None:
        return math.ceil((read_bytes + written_bytes) / read_bw)
    return max(math.ceil(read_bytes / read_bw), math.ceil(written_bytes / write_bw))


def _buffered(hw: HwSpec, unit: Unit, layer: LayerDims, mapping: Mapping, geom: Geometry, compute: int,
              elem: int) -> tuple[dict[str, OperandFetch], int, int, bool]:
    """(fetches per operand, cycles of compute plus buffer stalls, array <-> buffer elements, whether the
    busiest channel's whole traffic takes longer than the compute)."""
    b = unit.operand_buffers
    rows, cols, ways = _array_context(unit)
    capacity = {"input": b.input_bytes, "weight": b.weight_bytes, "output": b.output_bytes}
    active = {op: (capacity[op] // elem) // (2 if b.double_buffered else 1) for op in OPERANDS}
    fetch = operand_fetches(layer, mapping, geom, rows, cols, active)
    bandwidth = b.bytes_per_cycle(hw.clock_hz) * ways
    to_cycles = lambda elems: math.ceil(elems * elem / bandwidth)  # noqa: E731
    out = fetch["output"]
    channel = (fetch["input"].fetched_elems, fetch["weight"].fetched_elems,
               out.fetched_elems + (out.passes - 1) * out.view_elems)
    exposed = (min(fetch["input"].tile_elems, active["input"]), min(fetch["weight"].tile_elems, active["weight"]),
               min(out.tile_elems, out.view_elems))
    if b.double_buffered:
        fill, drain = max(to_cycles(exposed[0]), to_cycles(exposed[1])), to_cycles(exposed[2])
        busiest = max(to_cycles(max(0, total - part)) for total, part in zip(channel, exposed))
        total = fill + max(compute, busiest) + drain
    else:
        total = compute + max(to_cycles(elems) for elems in channel)
    accesses = geom.folds * sum(f.tile_elems for f in fetch.values())
    return fetch, total, accesses, max(to_cycles(elems) for elems in channel) > compute


def mapping_cost(hw: HwSpec, chip: Chip, unit: Unit, layer: LayerDims, mapping: Mapping) -> MappingCost:
    """Cost of `mapping` of `layer` on one instance of `unit` (all of them for a gang unit)."""
    rows, cols, ways = _array_context(unit)
    geom = check_mapping(layer, mapping, rows, cols, unit_dataflows(unit), unit.name)
    elem = hw.elem_bytes(layer.dtype)
    compute = mapping_compute_cycles(unit, mapping, geom)
    if unit.operand_buffers is None:
        read, written = layer.read_elems * elem, layer.written_elems * elem
        busy, buffer_elems, channels_bound = compute, 0, False
        tile = LevelTile("operand_buffers", *(layer.operand_elems(op) if op != "input" else layer.input_elems
                                              for op in OPERANDS))
    else:
        fetch, busy, buffer_elems, channels_bound = _buffered(hw, unit, layer, mapping, geom, compute, elem)
        out = fetch["output"]
        read = (fetch["input"].fetched_elems + fetch["weight"].fetched_elems + (out.passes - 1) * out.view_elems) * elem
        written = out.fetched_elems * elem
        tile = LevelTile("operand_buffers", *(fetch[op].tile_elems for op in OPERANDS))
    memory = _memory_cycles(hw, chip, unit, read, written)
    cycles = unit.latency_cycles + max(busy, memory, 1)
    traffic = ((LevelTraffic("operand_buffers", buffer_elems * elem, 0),) if buffer_elems else ()) + \
        (LevelTraffic("memory", read, written),)
    whole = LevelTile("memory", layer.input_elems, layer.operand_elems("weight"), layer.operand_elems("output"))
    energy = node_energy_pj(hw, chip, unit, layer.flops, read, written, buffer_elems * elem)
    utilization = layer.macs / (compute * rows * cols * ways)
    return MappingCost(mapping, geom.folds, geom.temporal, compute, busy - compute, max(0, memory - busy), cycles,
                       utilization, traffic, (tile, whole), energy, memory, channels_bound)
