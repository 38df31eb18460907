"""Every mapping on a unit with operand buffers is costed by the buffers' one traffic model,
cost/tile_traffic.py, on the GEMM the mapping puts on the array; orders that model has no notion of are
neither searched nor accepted."""
from __future__ import annotations

import functools
import math

import pytest

import accelsim as A
from accelsim.cost.tile_traffic import BufferConfig, tile_traffic
from accelsim.mapping.cost import mapping_compute_cycles, mapping_cost
from accelsim.mapping.dims import layer_dims
from accelsim.mapping.errors import MappingSpecError
from accelsim.mapping.fixed import im2col_mapping
from accelsim.mapping.gemm_view import traffic_view
from accelsim.mapping.record import check_mapping, Mapping
from accelsim.mapping.space import mapping_space

BUFFERS = {"input_bytes": 4096, "weight_bytes": 2048, "output_bytes": 2048, "bandwidth_bytes_per_cycle": 8}


def _hw(buffered: bool, dataflows: list[str] | None = None) -> A.HwSpec:
    mxu = {"name": "mxu", "ops": ["matmul", "conv2d"], "array": {"rows": 32, "cols": 32, "dataflow": "ws"},
           "reads": ["sram"], "writes": ["sram"]}
    if buffered:
        mxu["operand_buffers"] = BUFFERS
    if dataflows is not None:
        mxu["dataflows"] = dataflows
    return A.load_hw({"name": "small", "clock_hz": "1 GHz", "bytes_per_element": {"float32": 1, "float64": 1},
                      "chips": [{"name": "chip", "technology_nm": 45, "units": [mxu], "memories": [
                          {"name": "sram", "kind": "sram", "capacity_bytes": "64 MiB",
                           "bandwidth_bytes_per_cycle": 1000}]}]})


@functools.cache
def _first_conv():
    graph = A.models.build("resnet50", batch=1)
    return layer_dims(graph, next(n for n in graph.nodes if n.op == "conv2d"))


def _only_c(order=("FY", "FX", "cols")) -> Mapping:
    """ResNet-50's first conv with only C on the rows: FY x FX = 49 repeats of a 12,544 x 3 x 64 GEMM."""
    return Mapping("ws", ("C",), ("K",), (("OY", 112), ("OX", 112)), order)


def _direct(hw: A.HwSpec, view, compute: int, dataflow: str):
    b = hw.chips[0].units[0].operand_buffers
    config = BufferConfig(b.input_bytes, b.weight_bytes, b.output_bytes, b.bytes_per_cycle(hw.clock_hz),
                          b.double_buffered)
    return tile_traffic(view.batch, view.m, view.k, view.n, 32, 32, dataflow, compute, 1, config, im2col=view.im2col)


def test_a_mapping_off_im2col_is_costed_as_repeats_of_the_gemm_it_runs():
    """rows <- C: the GEMM on the array is 12,544 pixels x C=3 x K=64, repeated for each of the 49 taps,
    a plain left operand (its reduction is not im2col's C x FY x FX)."""
    hw = _hw(buffered=True)
    chip, unit, layer = hw.chips[0], hw.chips[0].units[0], _first_conv()
    geom = check_mapping(layer, _only_c(), 32, 32, ("ws",), "mxu")
    view = traffic_view(layer, _only_c(), geom)
    assert (view.batch, view.m, view.k, view.n, view.im2col) == (49, 112 * 112, 3, 64, None)
    cost = mapping_cost(hw, chip, unit, layer, _only_c())
    t = _direct(hw, view, mapping_compute_cycles(unit, _only_c(), geom), "ws")
    memory = cost.traffic[-1]
    assert (memory.read_bytes, memory.written_bytes) == (t.backing_read_elems, t.output_write_elems)
    assert cost.traffic[0].read_bytes == t.buffer_access_elems
    # the 48 taps the mapping adds (repeats beyond the layer's batch of 1) pay their buffer fills mid-layer
    added_fills = t.fill_cycles * 48 // 49
    assert cost.compute_cycles + cost.buffer_stall_cycles == max(t.total_cycles, t.channel_cycles + added_fills)
    assert t.output_write_elems == 49 * 112 * 112 * 64  # every tap's partial sums leave the array once


def test_the_fixed_point_keeps_im2col_geometry_and_a_split_reduction_or_row_drops_it():
    layer = _first_conv()
    fixed = im2col_mapping(layer, "ws")
    geom = check_mapping(layer, fixed, 32, 32, ("ws",), "mxu")
    assert traffic_view(layer, fixed, geom).im2col == (3, 7, 112, 2)  # stride 2
    split_row = Mapping("ws", ("C", "FY", "FX"), ("K",), (("OY", 112), ("OX", 56)), ("OX", "cols", "rows"))
    geom = check_mapping(layer, split_row, 32, 32, ("ws",), "mxu")
    view = traffic_view(layer, split_row, geom)
    assert (view.batch, view.m, view.k, view.im2col) == (2, 112 * 56, 147, None)


def test_an_order_the_traffic_model_does_not_know_is_refused_on_a_buffered_unit_only():
    layer = _first_conv()
    inside_out = _only_c(order=("cols", "FY", "FX"))
    plain = _hw(buffered=False)
    assert mapping_cost(plain, plain.chips[0], plain.chips[0].units[0], layer, inside_out).folds == 98
    hw = _hw(buffered=True)
    with pytest.raises(MappingSpecError) as e:
        mapping_cost(hw, hw.chips[0], hw.chips[0].units[0], layer, inside_out)
    message = str(e.value)
    assert "on unit 'mxu': order: [cols, FY, FX]" in message and "expected [FY, FX, cols]" in message
    assert "\n" not in message
    swapped = _only_c(order=("FX", "FY", "cols"))  # repeats of one GEMM: their order is the model's to ignore
    assert mapping_cost(hw, hw.chips[0], hw.chips[0].units[0], layer, swapped).cycles == \
        mapping_cost(hw, hw.chips[0], hw.chips[0].units[0], layer, _only_c()).cycles


@pytest.mark.parametrize("dims", [(1, 30, 50, 20), (2, 64, 96, 40)])
def test_every_point_of_a_buffered_space_is_costed_by_the_tile_model_of_its_view(dims):
    """Each candidate (all dataflows, row/column sets, stream tiles) has one order, and its bytes, buffer
    bytes and stalls are tile_traffic's on a GEMM view that covers the layer's MACs exactly."""
    batch, m, k, n = dims
    g = A.Graph("mm")
    a, b = g.input("a", (batch, m, k) if batch > 1 else (m, k)), g.param("b", (k, n))
    node = A.ops.matmul(a, b).node
    layer = layer_dims(g, node)
    hw = _hw(buffered=True, dataflows=["ws", "os", "is"])
    chip, unit = hw.chips[0], hw.chips[0].units[0]
    space = mapping_space(layer, 32, 32, ("ws", "os", "is"), buffered=True)
    points = list(space.enumerate())
    assert len(points) == space.size() == len(set(points))
    assert len({(p.dataflow, p.rows, p.cols, p.stream) for p in points}) == len(points)  # one order each
    for mapping in points:
        geom = check_mapping(layer, mapping, 32, 32, ("ws", "os", "is"), "mxu")
        view = traffic_view(layer, mapping, geom)
        assert view.batch * view.m * view.k * view.n == layer.macs
        cost = mapping_cost(hw, chip, unit, layer, mapping)
        t = _direct(hw, view, cost.compute_cycles, mapping.dataflow)
        assert (cost.traffic[-1].read_bytes, cost.traffic[-1].written_bytes, cost.traffic[0].read_bytes) == \
            (t.backing_read_elems, t.output_write_elems, t.buffer_access_elems)
        added = view.batch - layer.role_size("b")  # repeats the mapping adds pay their fills mid-layer
        busy = max(t.total_cycles, t.channel_cycles + (t.fill_cycles * added // view.batch if added > 0 else 0))
        assert cost.buffer_stall_cycles == busy - t.compute_cycles
        if added == 0:
            assert cost.buffer_stall_cycles == t.stall_cycles  # the layer's own GEMM: tile_traffic's, exactly
    assert any(math.prod(t for _, t in p.stream) < layer.role_size("m") for p in points if p.dataflow == "ws")
