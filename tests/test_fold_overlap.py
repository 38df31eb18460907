"""Pipelined folds (`array.fold_overlap: stationary`): a double-buffered stationary operand lets the next
fold's tile shift in while the current fold streams (cost/systolic.run_cycles)."""
import copy
from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

import accelsim as A
from accelsim import ops as F
from accelsim.cost.model import node_cost
from accelsim.cost.systolic import fold_cycles, gemm_cycles, run_cycles

TOY_FILE = Path(__file__).parent / "data" / "toy_hw.yaml"  # a 4x4 WS array, 2 cycles of latency


def _toy(**array_keys) -> dict:
    d = copy.deepcopy(yaml.safe_load(TOY_FILE.read_text()))
    mxu = next(u for u in d["chips"][0]["units"] if "array" in u)
    mxu["array"].update(array_keys)
    return d


def test_two_row_folds_on_4x4_ws_short_stream_hide_only_part_of_the_preload():
    """K=8 on 4 rows: 2 folds; N=4; M=T=3. One fold: 4 preload + 4 + 4 + 3 - 2 = 13 cycles; back to back 26.
    Overlapped: fold 1's shift starts when fold 0's stream does (cycle 4) and ends in cycle 7, so its first
    element enters in cycle 8 = 4 + max(T=3, rows=4), not 4 + 3; its last sum leaves column 3 in cycle
    8 + 2 + 3 + 3 = 16: 17 cycles."""
    assert gemm_cycles(3, 8, 4, 4, 4, "ws").compute_cycles == 26
    cost = gemm_cycles(3, 8, 4, 4, 4, "ws", fold_overlap="stationary")
    assert (cost.compute_cycles, cost.folds, cost.macs) == (17, 2, 96)
    assert cost.utilization == pytest.approx(96 / (17 * 16))


def test_two_row_folds_on_4x4_ws_long_stream_hide_the_whole_preload():
    """M=T=10: one fold is 8 + 4 + 10 - 2 = 20 cycles, back to back 40. Overlapped, fold 1 streams right
    behind fold 0 (from cycle 4 + 10 = 14) and its last sum leaves in cycle 14 + 9 + 3 + 3 = 29: 30 cycles,
    i.e. 2 x 10 streamed rows + 4 preload + 4 + 4 - 2 fill/drain, paid once."""
    assert gemm_cycles(10, 8, 4, 4, 4, "ws").compute_cycles == 40
    assert gemm_cycles(10, 8, 4, 4, 4, "ws", fold_overlap="stationary").compute_cycles == 30


def test_three_folds_issue_every_max_of_stream_and_preload():
    """K=12: 3 folds of T=3 every max(3, 4) = 4 cycles after the first 13: 21; T=10: 20 + 2 x 10 = 40."""
    assert gemm_cycles(3, 12, 4, 4, 4, "ws", fold_overlap="stationary").compute_cycles == 21
    assert gemm_cycles(10, 12, 4, 4, 4, "ws", fold_overlap="stationary").compute_cycles == 40


def test_input_stationary_overlaps_like_weight_stationary_with_n_streaming():
    """IS holds K x M in the PEs and streams the N filters: M=4, K=8, N=3 is the first WS case transposed."""
    assert gemm_cycles(4, 8, 3, 4, 4, "is", fold_overlap="stationary").compute_cycles == 17


@pytest.mark.parametrize("dataflow, mkn", [("ws", (5, 4, 4)), ("is", (4, 4, 5))])
def test_a_single_fold_costs_what_scalesim_says(dataflow, mkn):
    piped = gemm_cycles(*mkn, 4, 4, dataflow, fold_overlap="stationary")
    assert piped.folds == 1 and piped.compute_cycles == gemm_cycles(*mkn, 4, 4, dataflow).compute_cycles == 15


def test_output_stationary_has_no_operand_to_double_buffer():
    with pytest.raises(ValueError, match="ws or is"):
        gemm_cycles(8, 3, 8, 4, 4, "os", fold_overlap="stationary")
    with pytest.raises(ValueError, match="fold_overlap"):
        run_cycles(2, 4, 4, 3, "ws", "weights")


@given(m=st.integers(1, 300), k=st.integers(1, 300), n=st.integers(1, 300), rows=st.integers(1, 64),
       cols=st.integers(1, 64), batch=st.integers(1, 3), dataflow=st.sampled_from(["ws", "is"]))
def test_overlap_is_never_slower_than_back_to_back_nor_faster_than_the_stream_plus_one_fill(
        m, k, n, rows, cols, batch, dataflow):
    serial = gemm_cycles(m, k, n, rows, cols, dataflow, batch)
    piped = gemm_cycles(m, k, n, rows, cols, dataflow, batch, fold_overlap="stationary")
    assert piped.folds == serial.folds and piped.macs == serial.macs
    assert piped.compute_cycles <= serial.compute_cycles
    # every fold streams its T elements through one array row at a time, and the last one still has
    # to cross the array: rows + cols - 2 cycles of skew at least once
    assert piped.compute_cycles >= piped.folds * piped.temporal + rows + cols - 2
    assert piped.compute_cycles == (fold_cycles(rows, cols, piped.temporal, dataflow)
                                    + (piped.folds - 1) * max(piped.temporal, rows))


def test_node_cost_uses_the_overlap_and_a_gang_overlaps_each_instances_share():
    """(16,16) @ (16,16) on a 4x4 WS array: 4 x 4 = 16 folds of T=16, one fold 8 + 4 + 16 - 2 = 26.
    Back to back 416; overlapped 26 + 15 x 16 = 266; a gang of 4 runs 4 folds each: 26 + 3 x 16 = 74."""
    hw = A.load_hw(_toy(fold_overlap="stationary"))
    g = A.Graph("t")
    y = F.matmul(g.input("a", (16, 16)), g.input("b", (16, 16)))
    mxu = next(u for u in hw.chips[0].units if u.array is not None)
    assert node_cost(hw, g, y.node, mxu).compute_cycles == 266
    gang = mxu.model_copy(update={"count": 4, "gang": True})
    assert node_cost(hw, g, y.node, gang).compute_cycles == 74


def test_a_config_with_the_option_compiles_to_a_shorter_step():
    fwd = A.models.build("mlp", batch=8, sizes=(64, 32, 16))
    graph = A.training_graph(fwd)
    serial = A.compile(graph, _toy())
    piped = A.compile(graph, _toy(fold_overlap="stationary"))
    assert piped.makespan_cycles < serial.makespan_cycles


def test_an_explicit_none_is_the_default_and_keeps_the_hardware_dump_and_hash():
    """Schedules compiled before the key existed record a hash of the hardware's dump; it must still match."""
    fwd = A.models.build("mlp", batch=8, sizes=(64, 32, 16))
    graph = A.training_graph(fwd)
    assert A.compile(graph, _toy(fold_overlap="none")).makespan_cycles == A.compile(graph, _toy()).makespan_cycles
    assert A.load_hw(_toy(fold_overlap="none")).model_dump_json() == A.load_hw(_toy()).model_dump_json()
    assert "fold_overlap" not in A.load_hw(_toy()).model_dump_json()
    assert "stationary" in A.load_hw(_toy(fold_overlap="stationary")).model_dump_json()


@pytest.mark.parametrize("array_keys, words", [
    ({"fold_overlap": "weights"}, ("array.fold_overlap", "'none'", "'stationary'", "weights")),
    ({"fold_overlap": True}, ("array.fold_overlap",)),
    ({"fold_overlap": "stationary", "dataflow": "os"}, ("array.fold_overlap", "'ws'", "'is'", "os")),
])
def test_a_bad_fold_overlap_is_refused_naming_the_key_and_the_choices(array_keys, words):
    fwd = A.models.build("mlp", batch=2, sizes=(16, 8, 4))
    with pytest.raises(A.AccelsimError) as err:
        A.compile(A.training_graph(fwd), _toy(**array_keys))
    assert all(w in str(err.value) for w in words), str(err.value)
