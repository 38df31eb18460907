"""A strided conv's im2col mapping costs what node_cost does through operand buffers: both hand the tile traffic
model (cost/tile_traffic.py) the conv's stride, so its im2col copies are found a stride apart in both."""
import dataclasses

import pytest

import accelsim as A
from accelsim import ops as F
from accelsim.cost.model import node_cost
from accelsim.mapping.cost import mapping_cost
from accelsim.mapping.dims import layer_dims
from accelsim.mapping.fixed import im2col_mapping


def _hw(dataflow: str) -> A.HwSpec:
    """An 8x8 array whose 512-byte input buffer holds a fraction of the conv's im2col stream."""
    mxu = {"name": "mxu", "ops": ["conv2d"], "array": {"rows": 8, "cols": 8, "dataflow": dataflow},
           "reads": ["sram"], "writes": ["sram"],
           "operand_buffers": {"input_bytes": 512, "weight_bytes": 512, "output_bytes": 512,
                               "bandwidth_bytes_per_cycle": 4}}
    return A.load_hw({"name": "small", "clock_hz": "1 GHz", "bytes_per_element": {"float32": 1, "float64": 1},
                      "chips": [{"name": "chip", "technology_nm": 45, "units": [mxu], "memories": [
                          {"name": "sram", "kind": "sram", "capacity_bytes": "64 MiB",
                           "bandwidth_bytes_per_cycle": 1000}]}]})


def _conv(stride: int):
    """A 3x3 conv of 2 channels on 24 x 24: 8 x 8 outputs at stride 3 (as many as the array has columns)."""
    g = A.Graph("conv")
    x = g.input("x", (1, 2, 24, 24))
    w = g.param("w", (16, 2, 3, 3))
    return g, F.conv2d(x, w, stride=stride, padding=0).node


@pytest.mark.parametrize("dataflow, stride", [("os", 2), ("ws", 2), ("is", 2), ("is", 3)])
def test_a_strided_conv_s_im2col_mapping_equals_node_cost(dataflow, stride):
    hw = _hw(dataflow)
    chip, unit = hw.chips[0], hw.chips[0].units[0]
    graph, conv = _conv(stride)
    layer = layer_dims(graph, conv)
    got = mapping_cost(hw, chip, unit, layer, im2col_mapping(layer, dataflow))
    want = node_cost(hw, graph, conv, unit, chip)
    assert (got.cycles, got.traffic[-1].read_bytes, got.traffic[0].read_bytes) == \
        (want.cycles, want.bytes_read, want.buffer_bytes)
    assert layer.stride == stride


def test_the_stride_reaches_the_traffic_model_an_input_stationary_conv_fetches_by_it():
    """is holds im2col tiles, where the stride decides which copies a tile's rows have: at stride 3 a 3x3
    kernel's windows share no pixel, so the conv fetches more than the same GEMM read with stride 1's copies
    (a 3 x 2 channel kernel row fits the 8 array rows: each pixel is found at its lowest copy)."""
    hw = _hw("is")
    chip, unit = hw.chips[0], hw.chips[0].units[0]
    graph, conv = _conv(3)
    layer = layer_dims(graph, conv)
    strided = mapping_cost(hw, chip, unit, layer, im2col_mapping(layer, "is"))
    as_stride_1 = mapping_cost(hw, chip, unit, dataclasses.replace(layer, stride=1), im2col_mapping(layer, "is"))
    assert strided.traffic[-1].read_bytes > as_stride_1.traffic[-1].read_bytes
