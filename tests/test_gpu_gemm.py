"""GPU GEMM tiles and waves (hw/gpu_gemm.py, cost/gpu_gemm.py): on a chip with `gpu_gemm` a GEMM on the gang
Tensor Core unit takes whole thread-block tiles in whole waves over the SMs, each tile at the sustained share
of an SM's peak or its operand bandwidth; the key is validated, and absent from every other chip's dump."""
import math

import pytest

import accelsim as A
from accelsim import ops as F
from accelsim.cost.model import graph_costs
from accelsim.hw.overrides import parse_assignments

PER_SM_MACS = 1024  # a100: 4 Tensor Cores of 16 x 16 MACs per SM
L2_LATENCY, L2_BYTES_PER_CYCLE, SMS = 200, 5120, 108  # a100_like's l2 memory; the blocks' first operands wait on it


def _a100(*sets: str) -> A.HwSpec:
    return A.load_hw("a100_like", overrides=parse_assignments(list(sets)))


def _matmul_cost(hw: A.HwSpec, m: int, k: int, n: int):
    g = A.Graph("mm", dtype="float32")
    g.output("c", F.matmul(g.input("a", (m, k)), g.input("b", (k, n))))
    (cost,) = graph_costs(hw, g)
    return cost


def _one_wave(tm: int, tn: int, k: int, fraction: float, running: int = SMS) -> float:
    """A wave of full tiles: the first operands' wait, the main loop, the fp16 epilogue store at the L2 share."""
    return L2_LATENCY + tm * tn * k / (PER_SM_MACS * fraction) + tm * tn * 2 / (L2_BYTES_PER_CYCLE / running)


def test_a_shape_of_whole_tiles_and_waves_runs_just_under_the_measured_best():
    """6912 x 16384 outputs are 27 x 128 = 3,456 tiles of 256 x 128: 32 whole waves over 108 SMs; the main loop at
    the measured best share of the peak, plus each tile's wait and store, lands within 3% under it."""
    hw = _a100()
    spec = hw.chips[0].gpu_gemm
    cost = _matmul_cost(hw, 6912, 2048, 16384)
    assert cost.compute_cycles == math.ceil(32 * _one_wave(256, 128, 2048, spec.tile_fraction))
    tflops = cost.flops / (cost.compute_cycles / hw.clock_hz) / 1e12
    assert 0.97 * 312 * spec.tile_fraction < tflops < 312 * spec.tile_fraction


def test_one_tile_more_than_the_sms_costs_a_second_wave():
    """With one tile shape, 108 tiles run in one wave and 109 in two: twice the cycles for 1% more work."""
    hw = _a100("chips.0.gpu_gemm.tiles=[[256, 128]]", "chips.0.gpu_gemm.tile_fraction=1")
    one = _matmul_cost(hw, 256 * 108, 4096, 128)
    two = _matmul_cost(hw, 256 * 108 + 1, 4096, 128)
    assert one.compute_cycles == math.ceil(_one_wave(256, 128, 4096, 1))
    assert two.compute_cycles == pytest.approx(2 * one.compute_cycles, abs=1)


def test_an_output_dimension_is_padded_to_a_whole_tile():
    """257 rows take two 256-row tiles, as 512 rows do; 1 x 108 tiles and 2 x 108 tiles at 108 SMs."""
    hw = _a100("chips.0.gpu_gemm.tiles=[[256, 128]]")
    assert _matmul_cost(hw, 257, 4096, 128 * 108).compute_cycles == \
        _matmul_cost(hw, 512, 4096, 128 * 108).compute_cycles


def test_a_small_tile_waits_on_its_operands_when_every_sm_runs_one():
    """108 tiles of 64 x 64 read 128 K operand elements per 4,096 K MACs: sharing the L2's 5,120 B/cycle (47.4 each),
    their operands, not their math, set the pace."""
    hw = _a100("chips.0.gpu_gemm.tile_fraction=1", "chips.0.gpu_gemm.tiles=[[64, 64]]")
    k = 8192
    share = L2_BYTES_PER_CYCLE / SMS
    expected = L2_LATENCY + (64 + 64) * k * 2 / share + 64 * 64 * 2 / share
    assert _matmul_cost(hw, 64 * 108, k, 64).compute_cycles == math.ceil(expected)
    assert expected > _one_wave(64, 64, k, 1)


def test_a_small_output_with_a_long_k_is_split_over_the_sms():
    """A 64 x 64 output is one tile of 108 SMs' worth of work; split-K runs it as 108 slices of K / 108 and sums
    their fp32 partial tiles, far faster than one block running the whole K."""
    hw = _a100("chips.0.gpu_gemm.tiles=[[64, 64]]", "chips.0.gpu_gemm.tile_fraction=1")
    k = 108 * 4096
    alone = L2_LATENCY + 64 * 64 * k / PER_SM_MACS + 64 * 64 * 2 / L2_BYTES_PER_CYCLE
    cost = _matmul_cost(hw, 64, k, 64)
    assert cost.compute_cycles < alone / 50
    share = L2_BYTES_PER_CYCLE / SMS
    one_wave_of_slices = L2_LATENCY + max(64 * 64 * 4096 / PER_SM_MACS, 128 * 4096 * 2 / share) + 64 * 64 * 4 / share
    reduction = 2 * 108 * 64 * 64 * 4 / L2_BYTES_PER_CYCLE
    assert cost.compute_cycles == math.ceil(one_wave_of_slices + reduction)


def test_batched_gemms_fill_waves_together():
    """A batch of 108 GEMMs of one 128 x 128 tile each is one wave, as one GEMM of 108 such tiles."""
    hw = _a100("chips.0.gpu_gemm.tiles=[[128, 128]]")
    g = A.Graph("bmm", dtype="float32")
    g.output("c", F.matmul(g.input("a", (108, 128, 512)), g.input("b", (108, 512, 128))))
    (batched,) = graph_costs(hw, g)
    assert batched.compute_cycles == _matmul_cost(hw, 128, 512, 128 * 108).compute_cycles


def test_a_chip_without_gpu_gemm_costs_and_dumps_as_before():
    hw = A.load_hw("groq_like")
    assert hw.chips[0].gpu_gemm is None and "gpu_gemm" not in hw.model_dump()["chips"][0]
    assert "gpu_gemm" in _a100().model_dump()["chips"][0]


def test_every_a100_config_declares_the_same_gemm_tiles():
    declared = {name: A.load_hw(name).chips[0].gpu_gemm
                for name in ("a100_like", "a100_x8", "a100_x64", "a100_superpod")}
    assert len(set(declared.values())) == 1 and None not in declared.values()
    assert declared["a100_like"].sms == 108


@pytest.mark.parametrize("key, value, expected", [
    ("sms", "nan", "got 'nan'"),
    ("sms", "-1", "expected a whole number from 1 to 100000 SMs"),
    ("sms", "0", "expected a whole number from 1 to 100000 SMs"),
    ("sms", "1e12", "expected a whole number from 1 to 100000 SMs"),
    ("sms", "1.5", "a fraction is not allowed"),
    ("sms", "many", "many"),
    ("tiles", "[[0, 128]]", "expected a whole number from 1 to 4096 elements"),
    ("tiles", "[[256, .inf]]", "4096"),
    ("tiles", "[[256]]", "tiles"),
    ("tiles", "[]", "at least 1"),
    ("tiles", "big", "tiles"),
    ("tile_fraction", "nan", "got 'nan'"),
    ("tile_fraction", "0", "expected a finite number from 0.01 to 1"),
    ("tile_fraction", "-0.5", "expected a finite number from 0.01 to 1"),
    ("tile_fraction", "2", "expected a finite number from 0.01 to 1"),
    ("operand_memory", "sram", "chip 'a100' has no memory 'sram' (memories: hbm, l2)"),
    ("operand_memory", "12", "name"),
])
def test_bad_gemm_tiles_are_refused_naming_the_key_and_the_value(key, value, expected):
    with pytest.raises(A.HwConfigError) as e:
        _a100(f"chips.0.gpu_gemm.{key}={value}")
    text = str(e.value)
    assert f"gpu_gemm.{key}" in text and expected in text
    assert "Traceback" not in text


def test_an_unknown_gemm_tiles_key_is_refused():
    with pytest.raises(A.HwConfigError, match="gpu_gemm.waves"):
        _a100("chips.0.gpu_gemm.waves=3")
