"""SCALE-Sim 3.0.0's USER-bandwidth reference (experiments/scalesim_bandwidth.py): consistent, covering, and
agreeing with accelsim's compute cycles."""
import json
from pathlib import Path

import pytest

from accelsim.cost.systolic import DATAFLOWS, conv_as_gemm, gemm_cycles

REFERENCE = json.loads((Path(__file__).parent / "data" / "scalesim_bandwidth.json").read_text())
CASES = REFERENCE["cases"]
IDS = [case["id"] for case in CASES]
SHAPE_FIELDS = {"gemm": {"m", "k", "n"},
                "conv": {"n", "c", "h", "w", "o", "kh", "kw", "stride", "padding"}}
OPERANDS = ("ifmap", "filter", "ofmap")


def _view(case: dict) -> tuple[int, int, int, int]:
    if case["kind"] == "gemm":
        return 1, case["m"], case["k"], case["n"]
    return conv_as_gemm(case["n"], case["c"], case["h"], case["w"], case["o"], case["kh"], case["kw"],
                        stride=tuple(case["stride"]), padding=tuple(case["padding"]))


def _scalesim_operand_words(case: dict) -> dict[str, int]:
    """Distinct words of each operand as SCALE-Sim lays them out (the conv input padded)."""
    batch, m, k, n = _view(case)
    if case["kind"] == "gemm":
        ifmap = m * k
    else:
        ifmap = (case["h"] + 2 * case["padding"][0]) * (case["w"] + 2 * case["padding"][1]) * case["c"]
    return {"ifmap": ifmap, "filter": batch * k * n, "ofmap": batch * m * n}


def test_reference_is_scalesim_3_in_user_bandwidth_mode_and_describes_every_field():
    assert REFERENCE["scalesim_version"] == "3.0.0"
    assert REFERENCE["interface_bandwidth"] == "USER"
    general = set(REFERENCE["fields"]) - set().union(*SHAPE_FIELDS.values())
    for case in CASES:
        assert case["kind"] in SHAPE_FIELDS, case["id"]
        expected = general | SHAPE_FIELDS[case["kind"]]
        assert set(case) == expected, f"{case['id']}: missing or extra {sorted(set(case) ^ expected)}"
    assert len(set(IDS)) == len(IDS)


def test_reference_covers_dataflows_sram_sizes_bandwidths_arrays_and_layers():
    assert len(CASES) >= 40
    assert {case["dataflow"] for case in CASES} == set(DATAFLOWS)
    sram_kb = {case[f"{operand}_sram_kb"] for case in CASES for operand in OPERANDS}
    assert min(sram_kb) == 64 and max(sram_kb) == 1024 and len(sram_kb) >= 4
    bandwidths = {case["bandwidth_words_per_cycle"] for case in CASES}
    assert min(bandwidths) == 4 and max(bandwidths) == 64 and len(bandwidths) >= 4
    assert len({(case["rows"], case["cols"]) for case in CASES}) >= 2
    assert {case["kind"] for case in CASES} == {"gemm", "conv"}
    for dataflow in DATAFLOWS:  # every dataflow meets both ends of both ranges
        mine = [case for case in CASES if case["dataflow"] == dataflow]
        assert {64, 1024} <= {case["ifmap_sram_kb"] for case in mine}, dataflow
        assert {4, 64} <= {case["bandwidth_words_per_cycle"] for case in mine}, dataflow


def test_issue_anchor_superres_conv2_os_64kB_at_10_words_per_cycle_takes_4_24M_cycles():
    """The issue's number: conv2 (64 -> 64, 3x3, 64x64 image) on a 32x32 output-stationary array."""
    anchor = [case for case in CASES if case["kind"] == "conv" and case["c"] == 64 and case["o"] == 64
              and (case["rows"], case["cols"], case["dataflow"]) == (32, 32, "os")
              and case["ifmap_sram_kb"] == case["filter_sram_kb"] == case["ofmap_sram_kb"] == 64
              and case["bandwidth_words_per_cycle"] == 10]
    assert len(anchor) == 1
    assert anchor[0]["scalesim_total_cycles"] == pytest.approx(4.24e6, rel=0.005)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_total_cycles_are_compute_plus_stalls(case):
    # SCALE-Sim's total is the last cycle's 0-based index, so the count is one more.
    assert case["scalesim_total_cycles"] + 1 >= case["scalesim_compute_cycles"]
    assert case["scalesim_total_cycles"] + 1 == case["scalesim_compute_cycles"] + case["scalesim_stall_cycles"]
    assert case["scalesim_total_cycles_incl_prefetch"] >= case["scalesim_total_cycles"]


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_dram_traffic_covers_each_operand_at_least_once(case):
    unique = _scalesim_operand_words(case)
    assert case["scalesim_ifmap_dram_reads"] >= unique["ifmap"]
    assert case["scalesim_filter_dram_reads"] >= unique["filter"]
    assert case["scalesim_ofmap_dram_writes"] >= unique["ofmap"]
    assert case["scalesim_ofmap_sram_writes"] >= unique["ofmap"]
    # The drain of the last outputs ends after the array wrote them.
    assert case["scalesim_ofmap_dram_stop_cycle"] >= case["scalesim_total_cycles"]


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_accelsim_compute_cycles_equal_scalesim_stall_free_cycles(case):
    batch, m, k, n = _view(case)
    ours = gemm_cycles(m, k, n, case["rows"], case["cols"], case["dataflow"], batch).compute_cycles
    assert ours == case["scalesim_compute_cycles"]
