"""What a Megatron-LM step on A100s pays that a dataflow schedule need not: links at the rates NCCL reaches
(hwconfigs/a100_*.yaml [NT])."""
import pytest

import accelsim as A


@pytest.mark.parametrize("name", ["a100_x8", "a100_x64", "a100_superpod"])
def test_a100_links_run_at_the_rates_nccl_reaches(name):
    """0.8 of NVLink's 300 GB/s per GPU and direction, 0.92 of HDR's 25 GB/s per NIC: the [NT] figures."""
    hw = A.load_hw(name)
    assert hw.interconnect.bytes_per_cycle(hw.clock_hz) * hw.clock_hz == pytest.approx(0.8 * 300e9)
    if hw.interconnect.scale_out is not None:
        scale_out = hw.interconnect.scale_out
        assert scale_out.bytes_per_cycle(hw.clock_hz) * hw.clock_hz == pytest.approx(0.92 * 25e9)
