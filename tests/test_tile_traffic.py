"""Operand buffers and the tile-level traffic model (cost/tile_traffic.py, cost/operand_traffic.py): re-fetch
counts per dataflow worked by hand, the compute/memory crossover when a buffer shrinks, and the numbers the
cost model reports per node."""
import copy

import pytest

import accelsim as A
from accelsim import ops as F
from accelsim.cost.model import node_cost
from accelsim.cost.systolic import gemm_cycles
from accelsim.cost.tile_traffic import BufferConfig, tile_traffic
from accelsim.errors import HwConfigError

BIG = 1 << 20


def _hw(dataflow: str = "os", rows: int = 8, cols: int = 8, **buffers) -> dict:
    """An int8 chip with one rows x cols array whose operand buffers fill over 4-byte/cycle channels from a
    fast SRAM (1000 B/cycle, never the bottleneck here)."""
    operand_buffers = dict(input_bytes=BIG, weight_bytes=BIG, output_bytes=BIG, bandwidth_bytes_per_cycle=4)
    operand_buffers.update(buffers)
    return {"name": "buffered", "clock_hz": "1 GHz", "bytes_per_element": {"float32": 1, "float64": 1},
            "chips": [{"name": "chip", "units": [
                {"name": "mxu", "ops": ["matmul", "conv2d"], "array": {"rows": rows, "cols": cols,
                                                                       "dataflow": dataflow},
                 "operand_buffers": operand_buffers, "reads": ["sram"], "writes": ["sram"]},
                {"name": "vpu", "categories": ["elementwise", "reduction", "data_movement"],
                 "vector": {"lanes": 8}, "reads": ["sram"], "writes": ["sram"]}],
                "memories": [{"name": "sram", "kind": "sram", "capacity_bytes": "64 MiB",
                              "bandwidth_bytes_per_cycle": 1000}]}]}


def _conv_cost(hw_dict: dict):
    g = A.Graph("conv")
    x = g.input("x", (1, 8, 16, 16))
    w = g.param("w", (16, 8, 3, 3))
    y = F.conv2d(x, w, stride=1, padding=1)
    hw = A.load_hw(hw_dict)
    return node_cost(hw, g, y.node, hw.chips[0].units[0])


def test_shrinking_the_weight_buffer_turns_a_conv_from_compute_to_memory_bound():
    """conv 8 -> 16 channels, 3x3, 16x16 input, pad 1, int8, on an 8x8 output-stationary array:
    GEMM view M = 16*16 = 256 output pixels, K = 8*3*3 = 72, N = 16 filters; FR = 256/8 = 32 row folds,
    FC = 16/8 = 2 column folds; a fold takes 8 + 8 + 72 - 2 = 86 cycles, 64 folds 5,504.
    The input buffer (1 MiB) holds the whole im2col stream, 256 x 72 = 18,432 bytes (9x the 2,048-byte raw
    input: the edge reads im2col rows), fetched once before the first MAC; the outputs (4,096 B) stay in the
    output buffer until the node ends. Fill and drain overlap the neighbouring nodes.
    - 4,096-byte weight buffer: its 2,048-byte active half (blocks of 41 B: 50 of them) holds the whole
      1,152-byte weight stream (29 blocks): fetched once, no stall: 5,504 cycles.
    - 256-byte weight buffer: a column fold's K x 8 = 576-byte tile no longer fits the 128-byte active half,
      so each of the 32 row folds of a column fold fetches it again (at least 64 x 576 bytes) over the
      4-byte/cycle channel, far beyond the compute: memory-bound.
    """
    compute = gemm_cycles(256, 72, 16, 8, 8, "os").compute_cycles
    assert compute == 5504
    fits = _conv_cost(_hw(weight_bytes=4096))
    assert (fits.bound, fits.compute_cycles, fits.stall_cycles, fits.cycles) == ("compute", 5504, 0, 5504)
    assert fits.bytes_read == 256 * 72 + 1152 and fits.bytes_written == 4096
    spills = _conv_cost(_hw(weight_bytes=256))
    assert (spills.bound, spills.compute_cycles) == ("memory", 5504)
    assert spills.bytes_read >= 256 * 72 + 64 * 576
    assert spills.cycles == spills.compute_cycles + spills.stall_cycles
    assert spills.cycles >= (spills.bytes_read - 256 * 72 - 128) // 4  # the weight moves at 4 B/cycle
    assert spills.level_bytes["memory"] == spills.bytes_read + spills.bytes_written
    # the array reads every fold's tiles from its buffers either way: (8 x 72 + 72 x 8 + 8 x 8) x 64 folds
    assert fits.buffer_bytes == spills.buffer_bytes == (576 + 576 + 64) * 64


def test_without_operand_buffers_nothing_changes():
    plain = _hw()
    del plain["chips"][0]["units"][0]["operand_buffers"]
    cost = _conv_cost(plain)
    assert cost.stall_cycles == 0 and cost.buffer_bytes == 0
    assert cost.cycles == 5504 and cost.level_bytes == {"memory": cost.bytes_read + cost.bytes_written}


@pytest.mark.parametrize("dataflow", ["os", "ws", "is"])
def test_everything_fits_reads_each_operand_once(dataflow):
    """64 x 48 @ 48 x 40 on 8x8: every operand's stream fills whole 8-wide tiles, so each is fetched once;
    os writes each output once, ws and is every one of the FR = 48 / 8 = 6 row folds' partial sums."""
    t = tile_traffic(1, 64, 48, 40, 8, 8, dataflow, 1000, 2, BufferConfig(BIG, BIG, BIG, 8.0))
    assert (t.input_fetch_elems, t.weight_fetch_elems, t.output_write_elems) == \
           (64 * 48, 48 * 40, 64 * 40 * (1 if dataflow == "os" else 6))
    assert t.total_cycles == t.compute_cycles == 1000


def test_ws_streamed_input_too_big_is_swept_at_least_once_per_column_fold():
    """ws: rows over K, columns over N: FC = ceil(40 / 8) = 5 sweeps of the 64 x 48 input, whose 3,072-byte
    stream does not fit a 100-byte active half; the stationary weights stream through once."""
    t = tile_traffic(1, 64, 48, 40, 8, 8, "ws", 1000, 1, BufferConfig(200, BIG, BIG, 8.0))
    assert t.input_fetch_elems >= 5 * 64 * 48 and t.weight_fetch_elems == 48 * 40


def test_ws_and_is_write_every_row_folds_partial_sums_whatever_the_output_buffer():
    """ws: FR = 48 / 8 = 6 row folds each send their 64 x 40 partial sums out (SCALE-Sim's accounting)."""
    for output_bytes in (1024, 1022, BIG):
        t = tile_traffic(1, 64, 48, 40, 8, 8, "ws", 1000, 1, BufferConfig(BIG, BIG, output_bytes, 8.0))
        assert t.output_write_elems == 6 * 64 * 40


def test_is_streams_the_weights_at_least_once_per_column_fold_of_the_inputs():
    """is: rows over K, columns over M: FC = 64 / 8 = 8 sweeps of the 48 x 40 weights when they do not fit."""
    t = tile_traffic(1, 64, 48, 40, 8, 8, "is", 1000, 1, BufferConfig(BIG, 200, BIG, 8.0))
    assert t.weight_fetch_elems >= 8 * 48 * 40 and t.input_fetch_elems == 64 * 48


def test_a_stream_that_wraps_around_the_window_is_fetched_again():
    """os, 32 x 8 @ 8 x 8 on a 4x8 array: 8 row folds sweep the left operand's 256-element stream once per
    column fold (1). Its fold tiles (8 x 4) overlap on 3 diagonals, and with a 40-byte buffer (20 active,
    blocks of 1: the window moves 20 elements at a time) each fold boundary steps back into a part of the
    stream the window has left: going forward again means round the whole circle. A buffer that holds the
    stream reads it once."""
    small = tile_traffic(1, 32, 8, 8, 4, 8, "os", 100, 1, BufferConfig(40, BIG, BIG, 1.0))
    assert small.input_fetch_elems > 2 * 32 * 8
    once = tile_traffic(1, 32, 8, 8, 4, 8, "os", 100, 1, BufferConfig(1024, BIG, BIG, 1.0))
    assert once.input_fetch_elems == 32 * 8


def test_single_buffered_waits_for_every_byte():
    """Without double buffering the whole buffer is active but nothing overlaps: compute + the busiest
    channel (here the 64 x 48 int8 input at 8 B/cycle = 384 cycles)."""
    t = tile_traffic(1, 64, 48, 40, 8, 8, "os", 1000, 1, BufferConfig(BIG, BIG, BIG, 8.0, double_buffered=False))
    assert t.total_cycles == 1000 + 384 and t.stall_cycles == 384


def test_a_gang_of_arrays_splits_the_traffic_over_its_channels():
    one = tile_traffic(1, 64, 48, 40, 8, 8, "os", 100, 1, BufferConfig(64, 64, 64, 1.0))
    four = tile_traffic(1, 64, 48, 40, 8, 8, "os", 100, 1, BufferConfig(64, 64, 64, 1.0), channels=4)
    assert one.input_fetch_elems == four.input_fetch_elems
    assert one.total_cycles > 100 and four.total_cycles < one.total_cycles / 3


def test_operand_buffers_need_an_array():
    bad = _hw()
    vpu = bad["chips"][0]["units"][1]
    vpu["operand_buffers"] = copy.deepcopy(bad["chips"][0]["units"][0]["operand_buffers"])
    with pytest.raises(HwConfigError, match=r"units\[1\].*operand_buffers.*give the unit an `array`"):
        A.load_hw(bad)


@pytest.mark.parametrize("key, value, expected", [
    ("input_bytes", 0, "input_bytes: expected a whole number"), ("weight_bytes", -5, "weight_bytes"),
    ("output_bytes", float("nan"), "output_bytes"), ("input_bytes", 2**70, "input_bytes"),
    ("bandwidth_bytes_per_cycle", 0, "bandwidth"), ("bandwidth_bytes_per_cycle", float("inf"), "bandwidth"),
    ("traffic", "exact", "traffic"), ("double_buffered", "yes", "double_buffered"),
    ("input_bytes", True, "input_bytes"),
])
def test_hostile_operand_buffer_values_are_refused_naming_the_key(key, value, expected):
    with pytest.raises(HwConfigError, match=expected):
        A.load_hw(_hw(**{key: value}))


def test_a_gemm_with_operand_buffers_compiles_and_simulates_end_to_end():
    hw = A.load_hw(_hw(weight_bytes=1151))
    g = A.Graph("conv")
    x = g.input("x", (1, 8, 16, 16))
    w = g.param("w", (16, 8, 3, 3))
    F.relu(F.conv2d(x, w, stride=1, padding=1))
    sched = A.compile(g, hw)
    result = A.simulate(sched, hw, graph=g)
    assert A.check(sched, graph=g, hw=hw).passed
    assert result.makespan_cycles >= 9233


def test_scalesim_traffic_replays_scalesim_for_the_node_and_tile_is_the_default():
    """The same conv through `traffic: scalesim`: SCALE-Sim's stall count on top of its compute rows, its
    DRAM words as the node's bytes (int8, so words = bytes)."""
    from accelsim.cost.scalesim_memory import scalesim_conv_traffic

    replay = _conv_cost(_hw(weight_bytes=1151, traffic="scalesim"))
    s = scalesim_conv_traffic(8, 16, 16, 16, 3, 3, 1, 1, 8, 8, "os", BIG, 1151, BIG, 4, 4, 4)
    assert replay.stall_cycles == s.stall_cycles
    assert replay.bytes_read == s.ifmap_dram_words + s.filter_dram_words
    assert replay.bytes_written == s.ofmap_dram_words
    assert replay.cycles == replay.compute_cycles + s.stall_cycles
    assert replay.compute_cycles == s.compute_cycles
    assert _conv_cost(_hw(weight_bytes=1151)) == _conv_cost(_hw(weight_bytes=1151, traffic="tile"))  # the default


def test_a_layer_too_large_for_the_scalesim_replay_is_a_mapping_error_naming_node_and_unit(monkeypatch):
    import accelsim.cost.scalesim_memory as replay
    from accelsim.errors import MappingError

    monkeypatch.setattr(replay, "MAX_DEMAND_ELEMENTS", 1000)
    replay._traffic.cache_clear()
    with pytest.raises(MappingError, match=r"conv2d node %\d+ .* on unit 'mxu'.*traffic 'tile'"):
        _conv_cost(_hw(traffic="scalesim", input_bytes=4096))


def test_fill_and_drain_are_reported_but_overlap_the_neighbouring_nodes():
    """is, 8x8 array, M=64, K=48, N=40 (int8), buffers that hold everything: before the first MAC the input
    buffer takes its whole 64 x 48 = 3,072-byte stream and the weight buffer its 48 x 40 = 1,920 bytes, each
    over its own 8-byte/cycle channel: fill = 3,072 / 8 = 384 cycles. The output buffer holds all
    FR x N x M = 6 x 40 x 64 = 15,360 partial sums when the last one is written: drain = 1,920 cycles.
    Neither is in the node's time, which is the compute's."""
    t = tile_traffic(1, 64, 48, 40, 8, 8, "is", 1000, 1, BufferConfig(BIG, BIG, BIG, 8.0))
    assert (t.fill_cycles, t.drain_cycles, t.total_cycles, t.stall_cycles) == (384, 1920, 1000, 0)


@pytest.mark.parametrize("args, buffers, expected", [
    (dict(m=0), {}, "m=0"), (dict(k=-3), {}, "k=-3"), (dict(n=2.5), {}, "n=2.5"), (dict(rows=True), {}, "rows=True"),
    (dict(elem_bytes=0), {}, "elem_bytes=0"), (dict(channels=0), {}, "channels=0"),
    (dict(compute_cycles=-1), {}, "compute_cycles"), (dict(compute_cycles=float("nan")), {}, "compute_cycles"),
    (dict(dataflow="rs"), {}, "dataflow"), ({}, dict(input_bytes=0), "input_bytes=0"),
    ({}, dict(channel_bytes_per_cycle=0.0), "channel_bytes_per_cycle"),
    ({}, dict(channel_bytes_per_cycle=float("inf")), "channel_bytes_per_cycle"),
    ({}, dict(channel_bytes_per_cycle=float("nan")), "channel_bytes_per_cycle"),
    (dict(im2col=(0, 3, 16)), {}, "im2col_channels=0"), (dict(im2col=(8, 3)), {}, "im2col"),
    (dict(im2col=(8, 3, -1)), {}, "im2col_out_w=-1"),
])
def test_hostile_python_arguments_to_tile_traffic_are_refused_naming_them(args, buffers, expected):
    call = dict(batch=1, m=64, k=48, n=40, rows=8, cols=8, dataflow="os", compute_cycles=1000, elem_bytes=1)
    call.update(args)
    config = dict(input_bytes=BIG, weight_bytes=BIG, output_bytes=BIG, channel_bytes_per_cycle=8.0)
    config.update(buffers)
    with pytest.raises(ValueError, match=expected):
        tile_traffic(**call, buffers=BufferConfig(**config))


def test_huge_layers_and_buffers_give_exact_integers_not_overflow():
    t = tile_traffic(10**6, 10**6, 10**6, 10**6, 8, 8, "ws", 10**20, 2, BufferConfig(2**60, 2**60, 2**60, 1e-3))
    assert t.input_fetch_elems == 10**18 and isinstance(t.total_cycles, int) and t.total_cycles > 10**20
