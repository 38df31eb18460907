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


def test_shrinking_the_weight_buffer_turns_a_conv_from_compute_to_memory_bound_at_the_worked_crossover():
    """conv 8 -> 16 channels, 3x3, 16x16 input, pad 1, int8, on an 8x8 output-stationary array:
    GEMM view M = 16*16 = 256 output pixels, K = 8*3*3 = 72, N = 16 filters; FR = 256/8 = 32 row folds,
    FC = 16/8 = 2 column folds; a fold takes 8 + 8 + 72 - 2 = 86 cycles, 64 folds 5,504.
    Column fold fc needs the weight tile K x 8 = 576 bytes for all 32 row folds. Double-buffered, the
    array works from half the weight buffer, so the tile stays resident iff weight_bytes >= 2 x 576 = 1,152.
    - 1,152 bytes: weights fetched once, 1,152 B = 288 cycles at 4 B/cycle; input (raw 2,048 B fits)
      512 cycles; outputs 4,096 B = 1,024 cycles: all below 5,504, compute-bound. Time = fill (first
      tiles, 576 B each: 144) + 5,504 + drain (last 8x8 output tile: 16) = 5,664.
    - 1,151 bytes (575 active): the tile is re-fetched every fold, 32 x 1,152 = 36,864 B = 9,216 cycles
      > 5,504: memory-bound. Time = fill 144 + ceil((36,864 - 575) / 4) = 9,073 + drain 16 = 9,233.
    """
    compute = gemm_cycles(256, 72, 16, 8, 8, "os").compute_cycles
    assert compute == 5504
    fits = _conv_cost(_hw(weight_bytes=1152))
    assert (fits.bound, fits.compute_cycles, fits.stall_cycles, fits.cycles) == ("compute", 5504, 160, 5664)
    assert fits.bytes_read == 2048 + 1152 and fits.bytes_written == 4096
    spills = _conv_cost(_hw(weight_bytes=1151))
    assert (spills.bound, spills.compute_cycles, spills.cycles) == ("memory", 5504, 9233)
    assert spills.stall_cycles == 9233 - 5504
    assert spills.bytes_read == 2048 + 32 * 1152
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
    t = tile_traffic(1, 64, 48, 40, 8, 8, dataflow, 1000, 2, BufferConfig(BIG, BIG, BIG, 8.0))
    assert (t.input_fetch_elems, t.weight_fetch_elems, t.output_write_elems, t.output_read_elems) == \
           (64 * 48, 48 * 40, 64 * 40, 0)


def test_ws_streamed_input_too_big_is_swept_once_per_column_fold():
    """ws: rows over K, columns over N: FC = ceil(40 / 8) = 5 sweeps of the 64 x 48 input."""
    t = tile_traffic(1, 64, 48, 40, 8, 8, "ws", 1000, 1, BufferConfig(2 * 64 * 48 - 2, BIG, BIG, 8.0))
    assert t.input_fetch_elems == 5 * 64 * 48 and t.weight_fetch_elems == 48 * 40


def test_ws_partial_sums_that_do_not_fit_go_out_and_come_back_once_per_row_fold():
    """ws: the M x 8 partial sums of a column fold (64 x 8 = 512) need 1,024 bytes double-buffered (int8);
    below that each of the FR = 48 / 8 = 6 row folds writes them and all but the first read them back."""
    fits = tile_traffic(1, 64, 48, 40, 8, 8, "ws", 1000, 1, BufferConfig(BIG, BIG, 1024, 8.0))
    assert (fits.output_write_elems, fits.output_read_elems) == (64 * 40, 0)
    spills = tile_traffic(1, 64, 48, 40, 8, 8, "ws", 1000, 1, BufferConfig(BIG, BIG, 1022, 8.0))
    assert (spills.output_write_elems, spills.output_read_elems) == (6 * 64 * 40, 5 * 64 * 40)


def test_is_streams_the_weights_once_per_column_fold_of_the_inputs():
    """is: rows over K, columns over M: FC = 64 / 8 = 8 sweeps of the 48 x 40 weights when they do not fit."""
    t = tile_traffic(1, 64, 48, 40, 8, 8, "is", 1000, 1, BufferConfig(BIG, 2 * 48 * 40 - 2, BIG, 8.0))
    assert t.weight_fetch_elems == 8 * 48 * 40 and t.input_fetch_elems == 64 * 48


def test_single_buffered_waits_for_every_byte():
    """Without double buffering the whole buffer is active but nothing overlaps: compute + the busiest
    channel (here the 64 x 48 int8 input at 8 B/cycle = 384 cycles)."""
    t = tile_traffic(1, 64, 48, 40, 8, 8, "os", 1000, 1, BufferConfig(BIG, BIG, BIG, 8.0, double_buffered=False))
    assert t.total_cycles == 1000 + 384 and t.stall_cycles == 384


def test_a_gang_of_arrays_splits_the_traffic_over_its_channels():
    one = tile_traffic(1, 64, 48, 40, 8, 8, "os", 100, 1, BufferConfig(BIG, BIG, BIG, 1.0))
    four = tile_traffic(1, 64, 48, 40, 8, 8, "os", 100, 1, BufferConfig(BIG, BIG, BIG, 1.0), channels=4)
    assert one.input_fetch_elems == four.input_fetch_elems
    assert four.total_cycles < one.total_cycles / 3


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
    assert _conv_cost(_hw(weight_bytes=1151)).cycles == 9233  # the default is the tile model


def test_a_layer_too_large_for_the_scalesim_replay_is_a_mapping_error_naming_node_and_unit(monkeypatch):
    import accelsim.cost.scalesim_memory as replay
    from accelsim.errors import MappingError

    monkeypatch.setattr(replay, "MAX_DEMAND_ELEMENTS", 1000)
    replay._traffic.cache_clear()
    with pytest.raises(MappingError, match=r"conv2d node %\d+ .* on unit 'mxu'.*traffic 'tile'"):
        _conv_cost(_hw(traffic="scalesim", input_bytes=4096))


def test_is_fill_waits_for_the_stationary_input_tile_and_the_streamed_weight_tile_in_their_own_buffers():
    """is, 8x8 array, M=64, K=48, N=40 (int8): the first fold needs an 8 x 8 input tile (64 B) in the input
    buffer and the 40 x 8 weight rows (320 B) it streams in the weight buffer. With a 128-byte input buffer
    (64 active) both fit: fill = max(64, 320) / 8 B/cycle = 40 cycles; the last output tile, 40 x 8 = 320 B,
    drains in 40. A 64-byte input buffer (32 active) exposes only 32 B of the input tile, still 40."""
    fits = tile_traffic(1, 64, 48, 40, 8, 8, "is", 1000, 1, BufferConfig(128, BIG, BIG, 8.0))
    assert (fits.fill_cycles, fits.drain_cycles) == (40, 40)
    small_weights = tile_traffic(1, 64, 48, 40, 8, 8, "is", 1000, 1, BufferConfig(BIG, 128, BIG, 8.0))
    assert small_weights.fill_cycles == 8  # 64 active weight bytes of the 320, and the whole 64 B input tile


@pytest.mark.parametrize("args, buffers, expected", [
    (dict(m=0), {}, "m=0"), (dict(k=-3), {}, "k=-3"), (dict(n=2.5), {}, "n=2.5"), (dict(rows=True), {}, "rows=True"),
    (dict(elem_bytes=0), {}, "elem_bytes=0"), (dict(channels=0), {}, "channels=0"),
    (dict(compute_cycles=-1), {}, "compute_cycles"), (dict(compute_cycles=float("nan")), {}, "compute_cycles"),
    (dict(dataflow="rs"), {}, "dataflow"), ({}, dict(input_bytes=0), "input_bytes=0"),
    ({}, dict(channel_bytes_per_cycle=0.0), "channel_bytes_per_cycle"),
    ({}, dict(channel_bytes_per_cycle=float("inf")), "channel_bytes_per_cycle"),
    ({}, dict(channel_bytes_per_cycle=float("nan")), "channel_bytes_per_cycle"),
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
