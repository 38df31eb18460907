"""TPU v1's Weight Memory holds weights as whole 256x256 tiles (hwconfigs/tpu_v1_like.yaml, placement
`tile_shape`): a weight streams its edge tiles' padding too, as Jouppi et al. (ISCA 2017) Section 7 says of
LSTM1's 600x600 matrix: "it takes 9 steps to tile 600x600, for a total of 18 us of time"."""
import pytest

import accelsim as A
from accelsim import ops as F
from accelsim.errors import HwConfigError
from accelsim.hw.overrides import parse_assignments

STREAM = "chips.0.placement.parameters.stream"
TILE = 256 * 256  # bytes of one int8 tile


def _stream(hw):
    return hw.chips[0].placement.parameters.stream


def test_a_tiled_stream_stores_a_matrix_as_whole_tiles_and_a_vector_as_itself():
    s = _stream(A.load_hw("tpu_v1_like"))
    assert s.tile_shape == (256, 256)
    assert s.stored_bytes((600, 600), 1) == 9 * TILE  # 3 x 3 tiles, 768 x 768
    assert s.stored_bytes((512, 256), 1) == 2 * TILE  # whole tiles: no padding
    assert s.stored_bytes((64, 3, 7, 7), 1) == TILE  # a conv weight as 64 x 147: one tile
    assert s.stored_bytes((257, 2), 2) == 2 * 2 * TILE  # two tile rows of one tile column, 2-byte elements
    assert s.stored_bytes((600,), 1) == 600  # a bias is no matrix unit operand
    untiled = s.model_copy(update={"tile_shape": None})
    assert untiled.stored_bytes((600, 600), 1) == 600 * 600


def test_the_tile_shape_is_checked_like_an_array_dimension():
    with pytest.raises(HwConfigError, match="tile_shape"):
        A.load_hw("tpu_v1_like", overrides=parse_assignments([f"{STREAM}.tile_shape=[0, 256]"]))


def test_lstm1s_600x600_product_streams_nine_tiles_in_the_papers_18_us():
    """(96 x 600) @ (600 x 600), LSTM1's batch: the weight leaf occupies 9 tiles of the Weight Memory and the
    product lasts as long as streaming them at 34 GB/s (Table 2), 9 x 64 KiB / 34 GB/s = 17.3 us; the paper's
    performance model says 18 us. Without the tile layout only the 360,000 weight bytes would stream (10.6 us)."""
    hw = A.load_hw("tpu_v1_like")
    g = A.Graph("lstm1_gate")
    w = g.param("w", (600, 600))
    y = F.matmul(g.input("x", (96, 600)), w)
    g.output("h", F.sigmoid(y))  # the product's output stays in the Unified Buffer (a step result goes to DRAM)
    sched = A.compile(g, hw, effort="fast")  # one product: no order to search
    leaf = [x for x in sched.tensors if x.task == -1 and x.node == w.node.id and x.memory == "weight_dram"]
    assert [x.size_bytes for x in leaf] == [9 * TILE]
    spans = A.simulate(sched, hw, graph=g).spans
    prefetches = [s for s in spans if s.kind == "prefetch"]
    product = next(s for s in spans if s.kind == "node" and s.node == y.node.id)
    assert len(prefetches) == 4  # the Weight FIFO's four tiles staged ahead; the other five stream during it
    product_s = (product.end - min(s.start for s in prefetches)) / hw.clock_hz
    stream_s = 9 * TILE / 34e9
    assert stream_s <= product_s <= 1.01 * stream_s < 18e-6


def test_only_the_matrix_units_operands_are_stored_as_tiles():
    """A (16, 16) weight occupies a whole 64 KiB tile when a matmul reads it, its own 256 bytes when only the
    activation unit does (a merged QKV's runtime concat, a scale added elementwise): the tile layout serves the
    matrix unit."""
    hw = A.load_hw("tpu_v1_like")
    g = A.Graph("two_weights")
    x = g.input("x", (16, 16))
    w, s = g.param("w", (16, 16)), g.param("s", (16, 16))
    g.output("y", F.relu(F.matmul(x, w) + s))
    sched = A.compile(g, hw, effort="fast")
    stored = {x.node: x.size_bytes for x in sched.tensors if x.task == -1 and x.memory == "weight_dram"}
    assert stored == {w.node.id: TILE, s.node.id: 16 * 16}
