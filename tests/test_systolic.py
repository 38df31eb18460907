import json
import math
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from accelsim.cost.systolic import DATAFLOWS, conv_as_gemm, gemm_cycles

REFERENCE = json.loads((Path(__file__).parent / "data" / "scalesim_cycles.json").read_text())


def _view(case: dict) -> tuple[int, int, int, int]:
    if case["kind"] == "gemm":
        return 1, case["m"], case["k"], case["n"]
    return conv_as_gemm(case["n"], case["c"], case["h"], case["w"], case["o"], case["kh"], case["kw"],
                        stride=tuple(case["stride"]), padding=tuple(case["padding"]))


@pytest.mark.parametrize("case", REFERENCE["cases"], ids=[case["id"] for case in REFERENCE["cases"]])
def test_matches_scalesim_compute_cycles_within_one_percent(case):
    batch, m, k, n = _view(case)
    ours = gemm_cycles(m, k, n, case["rows"], case["cols"], case["dataflow"], batch).compute_cycles
    # SCALE-Sim reports the 0-based index of the layer's last cycle; a count is one more.
    theirs = case["scalesim_total_cycles"] - case["scalesim_stall_cycles"] + 1
    assert ours == pytest.approx(theirs, rel=0.01)


def test_reference_covers_every_dataflow_and_the_required_arrays():
    cases = REFERENCE["cases"]
    assert len(cases) >= 24
    assert {case["dataflow"] for case in cases} == set(DATAFLOWS)
    arrays = {(case["rows"], case["cols"]) for case in cases}
    assert {(8, 8), (32, 32), (128, 128), (256, 256)} <= arrays
    assert any(rows != cols for rows, cols in arrays)


# ---------------------------------------------------------------- hand-checked, 4x4 array


def test_output_stationary_on_4x4():
    """OS maps M (output rows) on array rows, N on array cols, and streams K through every PE.

    M=4, K=3, N=4: ceil(4/4) * ceil(4/4) = 1 fold. PE (r, c) gets its first operands r + c cycles late;
    the far corner PE (3, 3) starts in cycle 6 and does K=3 MACs in cycles 6, 7, 8: 4 + 4 + 3 - 2 = 9.
    M=8, N=8: 2 x 2 = 4 folds of 9 cycles = 36. M=5, N=6 also needs 2 x 2 folds; the partly empty
    ones cost the same, so again 36.
    """
    one = gemm_cycles(4, 3, 4, rows=4, cols=4, dataflow="os")
    assert (one.compute_cycles, one.folds, one.macs) == (9, 1, 48)
    assert one.utilization == pytest.approx(48 / (9 * 16))
    assert (gemm_cycles(8, 3, 8, 4, 4, "os").compute_cycles, gemm_cycles(8, 3, 8, 4, 4, "os").folds) == (36, 4)
    assert gemm_cycles(5, 3, 6, 4, 4, "os").compute_cycles == 36


def test_weight_stationary_on_4x4():
    """WS maps K on array rows, N on array cols, and streams the M output rows through.

    M=5, K=4, N=4: 1 fold. 4 cycles shift the weights in; input row t enters array row r in cycle
    4 + t + r, and its sum leaves the bottom of column c in cycle 4 + t + 3 + c. The last (t=4, c=3)
    leaves in cycle 14, counting from 0: 2*4 + 4 + 5 - 2 = 15 cycles.
    K=8, N=8: 2 x 2 = 4 folds of 15 = 60. K=6, N=5 still needs 2 x 2 folds: 60.
    """
    one = gemm_cycles(5, 4, 4, rows=4, cols=4, dataflow="ws")
    assert (one.compute_cycles, one.folds, one.macs) == (15, 1, 80)
    assert (gemm_cycles(5, 8, 8, 4, 4, "ws").compute_cycles, gemm_cycles(5, 8, 8, 4, 4, "ws").folds) == (60, 4)
    assert gemm_cycles(5, 6, 5, 4, 4, "ws").compute_cycles == 60


def test_input_stationary_on_4x4():
    """IS maps K on array rows, M on array cols, and streams the N filters through.

    M=4, K=4, N=6: 1 fold. As for WS with T = N = 6: 2*4 + 4 + 6 - 2 = 16 cycles.
    M=5, K=7: ceil(7/4) * ceil(5/4) = 2 x 2 = 4 folds of 16 = 64.
    """
    one = gemm_cycles(4, 4, 6, rows=4, cols=4, dataflow="is")
    assert (one.compute_cycles, one.folds, one.macs) == (16, 1, 96)
    assert (gemm_cycles(5, 7, 6, 4, 4, "is").compute_cycles, gemm_cycles(5, 7, 6, 4, 4, "is").folds) == (64, 4)


def test_non_square_array_folds_rows_and_cols_separately():
    """2 rows x 4 cols, OS, M=3, K=2, N=4: ceil(3/2) * ceil(4/4) = 2 folds of 2 + 4 + 2 - 2 = 6: 12."""
    cost = gemm_cycles(3, 2, 4, rows=2, cols=4, dataflow="os")
    assert (cost.compute_cycles, cost.folds) == (12, 2)


def test_batch_runs_independent_gemms_fold_after_fold():
    """3 batched copies of the 1-fold, 9-cycle OS GEMM above: 3 folds, 27 cycles, 3x the MACs."""
    cost = gemm_cycles(4, 3, 4, rows=4, cols=4, dataflow="os", batch=3)
    assert (cost.compute_cycles, cost.folds, cost.macs) == (27, 3, 144)


def test_single_pe_does_one_mac_per_cycle():
    """A 1x1 OS array has no skew: K MACs per output, one output per fold: M*N folds of K cycles."""
    cost = gemm_cycles(2, 7, 3, rows=1, cols=1, dataflow="os")
    assert (cost.compute_cycles, cost.folds, cost.utilization) == (42, 6, 1.0)


# ---------------------------------------------------------------- conv as GEMM


def test_superres_conv2_im2col_view():
    """64->64 3x3 pad 1 on a 64x64 image: 4096 output pixels, a 64*9 window, 64 filters."""
    assert conv_as_gemm(1, 64, 64, 64, 64, 3, 3, padding=(1, 1)) == (1, 4096, 576, 64)


def test_strided_grouped_conv_im2col_view():
    """N=2, C=8, 9x9, O=4, 3x3, stride 2, pad 1, 2 groups: Ho = Wo = (9 + 2 - 3) // 2 + 1 = 5,
    so per group M = 2 * 25 = 50, K = 4 * 9 = 36, N = 2."""
    assert conv_as_gemm(2, 8, 9, 9, 4, 3, 3, stride=2, padding=1, groups=2) == (2, 50, 36, 2)


def test_dilation_widens_the_kernel_span():
    """A 3x3 kernel with dilation 2 spans 5 pixels: a 7x7 input gives 3x3 outputs."""
    assert conv_as_gemm(1, 1, 7, 7, 1, 3, 3, dilation=(2, 2)) == (1, 9, 9, 1)


# ---------------------------------------------------------------- invariants

sizes = st.integers(1, 300)
arrays = st.integers(1, 64)


@given(m=sizes, k=sizes, n=sizes, rows=arrays, cols=arrays, dataflow=st.sampled_from(DATAFLOWS),
       batch=st.integers(1, 4))
def test_never_beats_the_compute_bound_and_utilization_is_a_fraction(m, k, n, rows, cols, dataflow, batch):
    cost = gemm_cycles(m, k, n, rows, cols, dataflow, batch)
    assert cost.macs == m * k * n * batch
    assert cost.compute_cycles >= math.ceil(cost.macs / (rows * cols))
    assert 0 < cost.utilization <= 1


@given(m=sizes, k=sizes, n=sizes, rows=arrays, cols=arrays, dataflow=st.sampled_from(DATAFLOWS),
       axis=st.integers(0, 2), grow=st.integers(1, 300))
def test_cycles_never_decrease_when_the_gemm_grows(m, k, n, rows, cols, dataflow, axis, grow):
    bigger = [m, k, n]
    bigger[axis] += grow
    small = gemm_cycles(m, k, n, rows, cols, dataflow).compute_cycles
    assert gemm_cycles(*bigger, rows, cols, dataflow).compute_cycles >= small


# ---------------------------------------------------------------- bad inputs


@pytest.mark.parametrize("args", [
    (0, 4, 4, 4, 4, "os"), (4, -1, 4, 4, 4, "ws"), (4, 4, 0, 4, 4, "is"),
    (4, 4, 4, 0, 4, "os"), (4, 4, 4, 4, -2, "os"), (4.0, 4, 4, 4, 4, "os"),
], ids=["m0", "k_negative", "n0", "rows0", "cols_negative", "float_m"])
def test_non_positive_or_non_integer_sizes_raise(args):
    with pytest.raises(ValueError, match="positive integers"):
        gemm_cycles(*args)


def test_zero_batch_raises():
    with pytest.raises(ValueError, match="batch=0"):
        gemm_cycles(4, 4, 4, 4, 4, "os", batch=0)


def test_unknown_dataflow_names_the_known_ones():
    with pytest.raises(ValueError, match="unknown dataflow 'rs'; expected one of os, ws, is"):
        gemm_cycles(4, 4, 4, 4, 4, "rs")


@pytest.mark.parametrize("kwargs, message", [
    (dict(groups=3), "groups=3 must divide"),
    (dict(padding=-1), "padding must be >= 0"),
    (dict(stride=0), "stride_h=0"),
    (dict(kh=9), "exceeds padded input h=8"),
], ids=["groups", "padding", "stride", "kernel_too_big"])
def test_bad_conv_raises(kwargs, message):
    args = dict(n=1, c=4, h=8, w=8, o=4, kh=3, kw=3) | kwargs
    with pytest.raises(ValueError, match=message):
        conv_as_gemm(**args)
