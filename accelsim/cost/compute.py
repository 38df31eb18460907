"""Compute cycles of a node on one unit, by the unit's compute model: (ComputeModel, NodeWork) -> cycles.

Everything else a compute model knows is a method of its class in hw/compute.py. Its timing lives here,
one function per class in CYCLES, because it is cost physics (an array's is the systolic fold model of
cost/systolic.py) and hw/ sits left of cost/ in the pipeline: cost/ imports hw/, never the reverse.
tests/test_compute_models.py checks that every class of the ComputeModel union has an entry.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from accelsim.cost.systolic import gemm_cycles, run_cycles
from accelsim.hw.compute import ComputeModel, ComputeModelBase, PerElement, Stream, SystolicArray, VectorLanes


@dataclass(frozen=True, slots=True)
class NodeWork:
    """What one node asks of a unit's datapath, in the measures the compute models time it by."""

    flops: int
    elements: int  # of the node's output
    bytes_moved: int  # the larger of the bytes it reads and writes
    gemm: tuple[int, int, int, int] | None  # (batch, m, k, n), the op's GEMM view; only for gemm_only models
    ways: int  # instances sharing the node: a gang unit's count, else 1


def _array_cycles(array: SystolicArray, work: NodeWork) -> int:
    """The node's folds, run back to back or overlapped (cost/systolic.py); a gang's arrays split them."""
    assert work.gemm is not None, "an array is only given ops with a GEMM view (cost/model.can_run)"
    batch, m, k, n = work.gemm
    sc = gemm_cycles(m, k, n, array.rows, array.cols, array.dataflow, batch, array.fold_overlap,
                     array.preload_rows_per_cycle)
    return run_cycles(math.ceil(sc.folds / work.ways), array.rows, array.cols, sc.temporal, array.dataflow,
                      array.fold_overlap, array.preload_rows_per_cycle)


def _vector_cycles(vector: VectorLanes, work: NodeWork) -> int:
    """Its flops over the lanes; data movement (no flops) still touches every element once."""
    return math.ceil(max(work.flops, work.elements) / (vector.lanes * vector.ops_per_lane_per_cycle * work.ways))


def _per_element_cycles(per_element: PerElement, work: NodeWork) -> int:
    return math.ceil(work.elements * per_element.cycles_per_element / work.ways)


def _stream_cycles(stream: Stream, work: NodeWork) -> int:
    """The larger of its reads and writes, streamed at the unit's rate."""
    return math.ceil(work.bytes_moved / (stream.bytes_per_cycle * work.ways))


CyclesOf = Callable[[Any, NodeWork], int]
"""(model, work) -> cycles, its first argument an instance of the class it is filed under."""

CYCLES: dict[type[ComputeModelBase], CyclesOf] = {
    SystolicArray: _array_cycles,
    VectorLanes: _vector_cycles,
    PerElement: _per_element_cycles,
    Stream: _stream_cycles,
}


def compute_cycles(model: ComputeModel, work: NodeWork) -> int:
    """Cycles `model`'s datapath spends on `work`, memory stalls excluded."""
    return CYCLES[type(model)](model, work)
