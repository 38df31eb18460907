"""accelsim.cost.scalesim_memory against SCALE-Sim 3.0.0 (tests/data/scalesim_bandwidth.json), its hostile
inputs, and the window wrap-around that multiplies SCALE-Sim's DRAM reads."""
import json
from pathlib import Path

import pytest

from accelsim.cost.scalesim_memory import (MAX_DEMAND_ELEMENTS, ScaleSimTraffic, scalesim_conv_traffic,
                                           scalesim_gemm_traffic)

REFERENCE = json.loads((Path(__file__).parent / "data" / "scalesim_bandwidth.json").read_text())
CASES = {case["id"]: case for case in REFERENCE["cases"]}
# ScaleSimTraffic field -> reference field holding the same number
SAME_AS_REFERENCE = {
    "compute_cycles": "scalesim_compute_cycles", "stall_cycles": "scalesim_stall_cycles",
    "ifmap_dram_words": "scalesim_ifmap_dram_reads", "filter_dram_words": "scalesim_filter_dram_reads",
    "ofmap_dram_words": "scalesim_ofmap_dram_writes", "ifmap_sram_reads": "scalesim_ifmap_sram_reads",
    "filter_sram_reads": "scalesim_filter_sram_reads", "ofmap_sram_writes": "scalesim_ofmap_sram_writes",
    **{f"{operand}_dram_{end}_cycle": f"scalesim_{operand}_dram_{end}_cycle"
       for operand in ("ifmap", "filter", "ofmap") for end in ("start", "stop")},
}
BIG_WORDS = 1 << 20  # an SRAM that holds any operand used below


def _emulate(case: dict) -> ScaleSimTraffic:
    """The emulation of one reference case (SRAM kB of 1-byte words, one bandwidth for all three SRAMs)."""
    bandwidth = case["bandwidth_words_per_cycle"]
    buffers = (case["ifmap_sram_kb"] * 1024, case["filter_sram_kb"] * 1024, case["ofmap_sram_kb"] * 1024,
               bandwidth, bandwidth, bandwidth)
    if case["kind"] == "gemm":
        return scalesim_gemm_traffic(case["m"], case["k"], case["n"], case["rows"], case["cols"], case["dataflow"],
                                     *buffers)
    assert case["stride"][0] == case["stride"][1] and case["padding"][0] == case["padding"][1]
    return scalesim_conv_traffic(case["c"], case["h"], case["w"], case["o"], case["kh"], case["kw"],
                                 case["stride"][0], case["padding"][0], case["rows"], case["cols"],
                                 case["dataflow"], *buffers)


def _os_gemm(m: int, k: int, n: int, rows: int, cols: int, ifmap_words: int) -> ScaleSimTraffic:
    return scalesim_gemm_traffic(m, k, n, rows, cols, "os", ifmap_words, BIG_WORDS, BIG_WORDS, 4, 4, 4)


# All 49 run in about 10 s on one core, numba's compile (about 3 s) included, so none is marked slow.
@pytest.mark.parametrize("case_id", sorted(CASES))
def test_every_reported_number_equals_scalesim(case_id):
    case = CASES[case_id]
    got = _emulate(case)
    mismatches = {field: (getattr(got, field), case[ref]) for field, ref in SAME_AS_REFERENCE.items()
                  if getattr(got, field) != case[ref]}
    assert mismatches == {}
    assert got.total_cycles == case["scalesim_total_cycles"] + 1  # a count, SCALE-Sim reports the last index
    assert got.last_dram_write_cycle - got.first_dram_read_cycle == case["scalesim_total_cycles_incl_prefetch"]


def test_the_reference_covers_every_dataflow_and_both_layer_kinds():
    assert {(case["dataflow"], case["kind"]) for case in CASES.values()} == {
        (dataflow, kind) for dataflow in ("os", "ws", "is") for kind in ("gemm", "conv")}


def test_an_operand_that_fits_the_active_half_is_fetched_once_and_the_window_never_moves():
    got = _os_gemm(64, 32, 8, 8, 8, ifmap_words=2 * 64 * 32)  # active half = the whole 2,048-word ifmap
    assert got.ifmap_window_moves == 0
    assert got.ifmap_dram_words == 64 * 32  # 512 lines of 4 words
    assert got.ifmap_dram_start_cycle == -512 and got.ifmap_dram_stop_cycle == -1


def test_in_order_demand_moves_the_window_just_far_enough_to_pass_once():
    # One row fold: the demand walks the diagonal prefetch order front to back, so the window (50 sets of
    # ceil(3000/100) = 30 words, moving 50) crosses the 256*64 // 30 + 1 = 547 sets once.
    got = _os_gemm(256, 64, 8, 256, 8, ifmap_words=3000)
    sets, window = 256 * 64 // 30 + 1, 50
    assert got.ifmap_window_moves == -(-(sets - window) // window) == 10
    assert got.ifmap_dram_words == (375 + 10 * 375) * 4  # fill and each move: ceil(1500 / 4) lines of 4 words


def test_fold_boundaries_send_the_window_round_the_whole_circle_again():
    operand_words = 256 * 64
    one_row_fold = _os_gemm(256, 64, 8, 256, 8, ifmap_words=3200)
    row_folds = _os_gemm(256, 64, 8, 8, 8, ifmap_words=3200)  # 32 row folds, still one column fold
    smaller_sram = _os_gemm(256, 64, 8, 8, 8, ifmap_words=3000)
    # Without fold boundaries the operand is read about once; with them, a boundary that falls just behind
    # the window's start costs a full extra pass, and whether one does depends on where the window's edges
    # fall, so the larger SRAM reads twice what the smaller one does.
    assert one_row_fold.ifmap_dram_words < 1.1 * operand_words
    assert smaller_sram.ifmap_dram_words < 1.1 * operand_words
    assert row_folds.ifmap_dram_words > 2 * operand_words
    assert row_folds.ifmap_window_moves >= 2 * one_row_fold.ifmap_window_moves


def test_the_anchor_reads_its_prefetch_matrix_eighteen_times():
    got = _emulate(CASES["superres_conv2_32x32_os_64kB_10wpc"])
    prefetch_matrix_words = 128 * 576 * 32  # im2col: 128 row folds x K=576 x 32 array rows
    # Sets of ceil(65536 / 100) = 656 words: 2,359,296 // 656 + 1 = 3,597 sets; the window holds and moves
    # ceil(32768 / 656) = 50 of them, so a pass over the prefetch matrix is 3,597 / 50 moves.
    assert round(got.ifmap_window_moves * 50 / 3597) == 18
    assert 17.9 < got.ifmap_dram_words / prefetch_matrix_words < 18.1


@pytest.mark.parametrize("bad, message", [
    (dict(m=0), "m=0"), (dict(k=-3), "k=-3"), (dict(n=True), "n=True"), (dict(rows=2.0), "rows=2.0"),
    (dict(cols="8"), "cols='8'"), (dict(dataflow="rs"), "dataflow='rs'"), (dict(dataflow=None), "dataflow=None"),
    (dict(ifmap_words=1), "ifmap_words=1"), (dict(ofmap_bw_words=0), "ofmap_bw_words=0"),
])
def test_bad_gemm_arguments_are_named_with_their_value(bad, message):
    args = dict(m=16, k=16, n=16, rows=4, cols=4, dataflow="os", ifmap_words=64, filter_words=64,
                ofmap_words=64, ifmap_bw_words=4, filter_bw_words=4, ofmap_bw_words=4) | bad
    with pytest.raises(ValueError, match=message):
        scalesim_gemm_traffic(**args)


def test_every_bad_argument_is_reported_at_once():
    with pytest.raises(ValueError, match=r"m=0.*rows=-1.*filter_words=1.*dataflow='xs'"):
        scalesim_gemm_traffic(0, 4, 4, -1, 4, "xs", 64, 1, 64, 4, 4, 4)


@pytest.mark.parametrize("bad, message", [
    (dict(padding=-1), "padding=-1"), (dict(padding=1.5), "padding=1.5"), (dict(stride=0), "stride=0"),
    (dict(kh=9), "kernel kh=9"), (dict(c=False), "c=False"),
])
def test_bad_conv_arguments_are_named_with_their_value(bad, message):
    args = dict(c=2, h=6, w=6, o=4, kh=3, kw=3, stride=1, padding=1, rows=4, cols=4, dataflow="ws",
                ifmap_words=64, filter_words=64, ofmap_words=64, ifmap_bw_words=4, filter_bw_words=4,
                ofmap_bw_words=4) | bad
    with pytest.raises(ValueError, match=message):
        scalesim_conv_traffic(**args)


def test_a_bool_is_refused_even_after_the_equal_int_was_cached():
    args = [8, 8, 8, 1, 4, "os", 64, 64, 64, 4, 4, 4]
    scalesim_gemm_traffic(*args)
    args[3] = True
    with pytest.raises(ValueError, match="rows=True"):
        scalesim_gemm_traffic(*args)


@pytest.mark.parametrize("sizes", [(10**5, 10**5, 10**5, 32, 32), (64, 64, 64, 10**9, 4), (10**30, 1, 1, 1, 1)])
def test_layers_beyond_the_size_limit_are_refused_before_any_work(sizes):
    with pytest.raises(ValueError, match=rf"demand matrices hold [\d,]+ elements.*limit is {MAX_DEMAND_ELEMENTS:,}"):
        scalesim_gemm_traffic(*sizes, "ws", 64, 64, 64, 4, 4, 4)


def test_a_huge_sparse_conv_input_is_refused_too():
    with pytest.raises(ValueError, match="padded input"):
        scalesim_conv_traffic(1, 20_000, 20_000, 1, 1, 1, 20_000, 0, 4, 4, "os", 64, 64, 64, 4, 4, 4)


def test_strided_convs_keep_scalesims_extra_output_row():
    # 7 - 3 = 4 is not a multiple of stride 3: SCALE-Sim computes ceil((7 - 3 + 3) / 3) = 3 rows, not 2.
    got = scalesim_conv_traffic(1, 7, 7, 1, 3, 3, 3, 0, 16, 16, "os", BIG_WORDS, BIG_WORDS, BIG_WORDS, 4, 4, 4)
    assert got.ifmap_sram_reads == 3 * 3 * 9 and got.filter_sram_reads == 9
