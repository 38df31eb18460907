"""A ws/is array's install rate (`array.preload_rows_per_cycle`, k): a tile's rows are written k per cycle,
P = ceil(rows / k) cycles, instead of shifted in one row per cycle (cost/systolic.run_cycles)."""
import pytest
from hypothesis import given
from hypothesis import strategies as st

import accelsim as A
from accelsim import ops as F
from accelsim.cost.model import node_cost
from accelsim.cost.systolic import fold_cycles, gemm_cycles, preload_cycles, run_cycles
from test_fold_overlap import _toy  # the toy config (a 4x4 WS array) with array keys changed


def test_two_rows_per_cycle_halve_the_install_of_a_single_fold():
    """(3 x 4) @ (4 x 4) on a 4x4 WS array, one fold of T = 3: the install takes ceil(4/2) = 2 cycles
    instead of 4, so 2 + 4 + 4 + 3 - 2 = 11 cycles instead of 13; an os array installs nothing."""
    assert preload_cycles(4, "ws", 2) == 2 and preload_cycles(4, "ws", 3) == 2 and preload_cycles(4, "ws") == 4
    assert preload_cycles(4, "os", 1) == 0
    assert gemm_cycles(3, 4, 4, 4, 4, "ws").compute_cycles == 13
    assert gemm_cycles(3, 4, 4, 4, 4, "ws", preload_rows_per_cycle=2).compute_cycles == 11


def test_overlapped_folds_issue_every_max_of_stream_and_install():
    """K = 12 on 4 rows: 3 folds of T = 3. At 1 row per cycle folds issue every max(3, 4) = 4 cycles after
    the first 13: 21. At 4 rows per cycle the install is 1 cycle, so every max(3, 1) = 3 cycles after the
    first 1 + 4 + 4 + 3 - 2 = 10: 16, and the stream is the bound. Back to back: 3 x 10 = 30."""
    assert gemm_cycles(3, 12, 4, 4, 4, "ws", fold_overlap="stationary").compute_cycles == 21
    assert gemm_cycles(3, 12, 4, 4, 4, "ws", 1, "stationary", 4).compute_cycles == 16
    assert gemm_cycles(3, 12, 4, 4, 4, "ws", preload_rows_per_cycle=4).compute_cycles == 30


@given(rows=st.integers(1, 64), cols=st.integers(1, 64), t=st.integers(1, 200), folds=st.integers(1, 20),
       k=st.integers(1, 80), dataflow=st.sampled_from(["ws", "is"]))
def test_a_faster_install_never_costs_more_and_k_1_is_the_shift_chain(rows, cols, t, folds, k, dataflow):
    for overlap in ("none", "stationary"):
        fast = run_cycles(folds, rows, cols, t, dataflow, overlap, k)
        assert fast <= run_cycles(folds, rows, cols, t, dataflow, overlap, 1)
        assert run_cycles(folds, rows, cols, t, dataflow, overlap, 1) == run_cycles(folds, rows, cols, t, dataflow,
                                                                                     overlap)
    p = -(-rows // k)
    assert run_cycles(folds, rows, cols, t, dataflow, "stationary", k) == (
        fold_cycles(rows, cols, t, dataflow, k) + (folds - 1) * max(t, p))
    # the stream bounds the overlapped folds from below whatever the rate
    assert run_cycles(folds, rows, cols, t, dataflow, "stationary", k) >= folds * t


def test_node_cost_and_compile_use_the_rate_and_the_default_keeps_the_dump():
    """(16,16) @ (16,16), 16 folds of T = 16 on the toy's 4x4 WS array, overlapped: 26 + 15 x 16 = 266 at
    1 row per cycle; at 2 rows per cycle the first fold is 2 + 4 + 4 + 16 - 2 = 24, the rest still 16
    each (T > P): 264. Schedules compiled before the key existed keep their hardware hash."""
    g = A.Graph("t")
    y = F.matmul(g.input("a", (16, 16)), g.input("b", (16, 16)))
    for rate, cycles in ((1, 266), (2, 264)):
        hw = A.load_hw(_toy(fold_overlap="stationary", preload_rows_per_cycle=rate))
        mxu = next(u for u in hw.chips[0].units if u.array is not None)
        assert node_cost(hw, g, y.node, mxu).compute_cycles == cycles
    assert A.load_hw(_toy(preload_rows_per_cycle=1)).model_dump_json() == A.load_hw(_toy()).model_dump_json()
    assert "preload_rows_per_cycle" in A.load_hw(_toy(preload_rows_per_cycle=2)).model_dump_json()
    graph = A.training_graph(A.models.build("mlp", batch=8, sizes=(64, 32, 16)))
    assert (A.compile(graph, _toy(preload_rows_per_cycle=4)).makespan_cycles
            < A.compile(graph, _toy()).makespan_cycles)


@pytest.mark.parametrize("value, words", [
    (0, ("preload_rows_per_cycle", "1 to 65536")),
    (-3, ("preload_rows_per_cycle", "1 to 65536")),
    (2.5, ("preload_rows_per_cycle", "fraction")),
    (float("nan"), ("preload_rows_per_cycle",)),
    (float("inf"), ("preload_rows_per_cycle",)),
    (2**70, ("preload_rows_per_cycle", "65536")),
    (True, ("preload_rows_per_cycle",)),
    ("fast", ("preload_rows_per_cycle",)),
    ([8], ("preload_rows_per_cycle",)),
])
def test_a_bad_install_rate_is_refused_naming_the_key(value, words):
    with pytest.raises(A.AccelsimError) as err:
        A.load_hw(_toy(preload_rows_per_cycle=value))
    assert all(w in str(err.value) for w in words), str(err.value)


def test_an_output_stationary_array_refuses_an_install_rate():
    with pytest.raises(A.AccelsimError, match="preload_rows_per_cycle.*'os' array installs none"):
        A.load_hw(_toy(dataflow="os", preload_rows_per_cycle=2))


@pytest.mark.parametrize("k", [0, -1, 1.5, True, None, "2"])
def test_the_cost_functions_refuse_a_bad_rate_from_python(k):
    with pytest.raises(ValueError, match="preload_rows_per_cycle"):
        run_cycles(2, 4, 4, 3, "ws", "stationary", k)


@pytest.mark.parametrize("dataflow", ["xs", "", None, "OS"])
def test_an_unknown_dataflow_is_refused_by_the_install_and_the_fold(dataflow):
    with pytest.raises(ValueError, match="unknown dataflow"):
        preload_cycles(4, dataflow)
    with pytest.raises(ValueError, match="unknown dataflow"):
        fold_cycles(4, 4, 3, dataflow)
