"""A layer run alone loads what its mapping keeps resident above the array before its first MAC
(mapping/onload.py): hand-checked resident tiles for each loop order, the isolated latency built from them,
and the schedule's overlapped cost left as it was."""
from __future__ import annotations

import math

import accelsim as A
from accelsim import ops as F
from accelsim.cost.tile_traffic import BufferConfig, tile_traffic
from accelsim.mapping.cost import mapping_compute_cycles, mapping_cost
from accelsim.mapping.dims import layer_dims
from accelsim.mapping.gemm_view import traffic_view
from accelsim.mapping.nest import loop_nest
from accelsim.mapping.record import Mapping, check_mapping

BANDWIDTH = 8  # bytes per cycle of the unit's memory


def _hw(buffers: dict | None = None, bandwidth: int = BANDWIDTH) -> A.HwSpec:
    mxu = {"name": "mxu", "ops": ["matmul", "conv2d"], "array": {"rows": 4, "cols": 4, "dataflow": "ws"},
           "dataflows": ["ws", "os"], "reads": ["sram"], "writes": ["sram"]}
    if buffers is not None:
        mxu["operand_buffers"] = buffers
    return A.load_hw({"name": "small", "clock_hz": "1 GHz", "bytes_per_element": {"float32": 1, "float64": 1},
                      "chips": [{"name": "chip", "technology_nm": 45, "units": [mxu], "memories": [
                          {"name": "sram", "kind": "sram", "capacity_bytes": "64 MiB",
                           "bandwidth_bytes_per_cycle": bandwidth}]}]})


def _gemm(m: int = 20, k: int = 12, n: int = 8):
    g = A.Graph("gemm")
    node = F.matmul(g.input("a", (m, k)), g.param("b", (k, n))).node
    return layer_dims(g, node)


def _cost(layer, mapping: Mapping, hw: A.HwSpec | None = None):
    hw = hw or _hw()
    return mapping_cost(hw, hw.chips[0], hw.chips[0].units[0], layer, mapping)


def test_ws_with_the_column_folds_outermost_holds_the_whole_input_before_the_first_mac():
    """[cols, rows]: every column fold re-reads the whole 20 x 12 input, so it is loaded first; the weights
    change every fold, so only the first fold's 4 x 4 tile is."""
    cost = _cost(_gemm(), Mapping("ws", ("K",), ("N",), (("M", 20),), ("cols", "rows")))
    assert (cost.resident.input_elems, cost.resident.weight_elems) == (20 * 12, 4 * 4)
    assert (cost.resident.input_reused_by, cost.resident.weight_reused_by) == ("cols", None)
    assert cost.onload_cycles == math.ceil((20 * 12 + 16) / BANDWIDTH)


def test_ws_with_the_row_folds_outermost_holds_one_row_folds_input():
    """[rows, cols]: the input is reused across the column folds inside one row fold: 20 x 4 of it."""
    cost = _cost(_gemm(), Mapping("ws", ("K",), ("N",), (("M", 20),), ("rows", "cols")))
    assert (cost.resident.input_elems, cost.resident.weight_elems) == (20 * 4, 4 * 4)
    assert cost.resident.input_reused_by == "cols"


def test_os_with_the_row_folds_outermost_holds_the_whole_weight():
    """os: rows <- M, cols <- N, K streamed; the weights (K x N) are re-read by every row fold of M."""
    cost = _cost(_gemm(), Mapping("os", ("M",), ("N",), (("K", 12),), ("rows", "cols")))
    assert (cost.resident.input_elems, cost.resident.weight_elems) == (4 * 12, 12 * 8)
    assert (cost.resident.input_reused_by, cost.resident.weight_reused_by) == ("cols", "rows")


def test_the_isolated_latency_adds_the_onloading_to_a_compute_bound_layer_and_not_to_a_memory_bound_one():
    mapping = Mapping("ws", ("K",), ("N",), (("M", 20),), ("cols", "rows"))
    fast = _cost(_gemm(), mapping, _hw(bandwidth=1000))
    assert fast.memory_cycles < fast.compute_cycles
    assert fast.isolated_cycles == fast.cycles + fast.onload_cycles
    slow = _cost(_gemm(), mapping, _hw(bandwidth=1))
    assert slow.onload_cycles + slow.compute_cycles < slow.memory_cycles  # the loaded bytes are part of the traffic
    assert slow.isolated_cycles == slow.cycles


def test_a_strided_1x1_convs_whole_resident_input_is_the_quarter_its_windows_read():
    g = A.Graph("down")
    node = F.conv2d(g.input("x", (1, 8, 8, 8)), g.param("w", (16, 8, 1, 1)), stride=2, padding=0).node
    layer = layer_dims(g, node)
    cost = _cost(layer, Mapping("ws", ("C",), ("K",), (("OY", 4), ("OX", 4)), ("cols", "rows")))
    assert cost.resident.input_elems == 8 * 4 * 4
    assert cost.resident.weight_elems == 4 * 4


def test_one_filter_tap_outermost_holds_one_taps_pixels():
    """[FY, FX, cols, rows] on a 3x3 stride-1 conv: the input resident under the column folds is one tap's
    window over the 6 x 6 outputs of C=4 channels."""
    g = A.Graph("conv")
    node = F.conv2d(g.input("x", (1, 4, 6, 6)), g.param("w", (8, 4, 3, 3)), stride=1, padding=1).node
    layer = layer_dims(g, node)
    cost = _cost(layer, Mapping("ws", ("C",), ("K",), (("OY", 6), ("OX", 6)), ("FY", "FX", "cols")))
    touched = 4 * 6 * 6  # padding 1 keeps the windows on the 6 x 6 input: every pixel is read
    whole_span = (6 - 1) + 3
    assert cost.resident.input_elems == math.ceil(touched * 6 * 6 / (whole_span * whole_span))
    assert cost.resident.input_reused_by == "cols"


def test_with_operand_buffers_the_onloading_is_their_initial_fill():
    buffers = {"input_bytes": 64, "weight_bytes": 32, "output_bytes": 32, "bandwidth_bytes_per_cycle": 2}
    hw = _hw(buffers)
    layer = _gemm()
    mapping = Mapping("ws", ("K",), ("N",), (("M", 20),), ("cols", "rows"))
    cost = _cost(layer, mapping, hw)
    unit = hw.chips[0].units[0]
    geom = check_mapping(layer, mapping, 4, 4, ("ws", "os"), "mxu")
    view = traffic_view(layer, mapping, geom)
    b = unit.operand_buffers
    t = tile_traffic(view.batch, view.m, view.k, view.n, 4, 4, "ws", mapping_compute_cycles(unit, mapping, geom), 1,
                     BufferConfig(b.input_bytes, b.weight_bytes, b.output_bytes, b.bytes_per_cycle(hw.clock_hz),
                                  b.double_buffered), im2col=view.im2col)
    assert t.fill_cycles > 0
    assert cost.onload_cycles == t.fill_cycles
    assert cost.isolated_cycles >= cost.cycles


def test_the_loop_nest_shows_what_the_layer_loads_before_its_first_mac():
    """The per-layer report's nest (mapping/nest.py) carries the resident tile, as the cost charges it."""
    layer = _gemm()
    mapping = Mapping("ws", ("K",), ("N",), (("M", 20),), ("cols", "rows"))
    nest = loop_nest(layer, mapping, 4, 4, ("ws", "os"), "mxu")
    assert nest.resident == _cost(layer, mapping).resident
    assert nest.to_dict()["resident"] == {"input_elems": 240, "weight_elems": 16, "input_reused_by": "cols",
                                          "weight_reused_by": None}
    assert nest.lines()[-1].startswith("loaded before the first MAC when run alone: input 240 elements")
