"""MFU and "% of peak" of a step at a precision (report.run_summary, hw/precision.peak_flops_per_s): measured
against the peak the hardware file declares for the precision the step runs at, not the compute model's own.

Oracle: the `peaks:` of a100_like's units, read from the file."""
from __future__ import annotations

import pytest

import accelsim as A
from accelsim.models.sizes import SMALL
from accelsim.step_flops import runs_tensor_ops


@pytest.fixture(scope="module")
def gpt2():
    return A.training_graph(A.models.build("gpt2", **SMALL["gpt2"]), optimizer="adam")


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_mfu_and_percent_of_peak_divide_by_the_step_precisions_declared_peak(gpt2, precision):
    hw = A.load_hw("a100_like")
    [chip] = hw.chips
    tensor_tflops = sum(u.peaks.at(precision) for u in chip.units if runs_tensor_ops(u))
    arithmetic_tflops = sum(u.peaks.at(precision) for u in chip.units if u.peaks is not None)
    assert tensor_tflops > 0 and arithmetic_tflops > tensor_tflops  # the Tensor Cores, then the CUDA cores too
    s = A.run_summary(A.compile(gpt2, hw, precision=precision, effort="fast"), hw, gpt2)
    assert s.peak_tflops_per_chip == pytest.approx(tensor_tflops, rel=1e-12)
    assert s.mfu == pytest.approx(s.model_tflops_per_chip / tensor_tflops, rel=1e-12)
    assert s.peak_tops == pytest.approx(arithmetic_tflops, rel=1e-12)
    assert s.mac_utilization == pytest.approx(s.achieved_tops / arithmetic_tflops, rel=1e-12)

