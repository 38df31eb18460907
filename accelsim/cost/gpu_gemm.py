"""A GEMM's compute cycles on a GPU-like chip's Tensor Core unit (hw/gpu_gemm.py): (GpuGemm, unit, GEMM view,
operand rate) -> cycles, tile and wave quantization included.

NVIDIA's "Matrix Multiplication Background User's Guide" (Deep Learning Performance documentation): a GEMM
kernel splits the output into thread-block tiles of a few fixed shapes (256x128 and 128x256 the most
efficient, down to 64x64), padding each output dimension up to a whole tile ("tile quantization"), and runs
the tiles in waves of one block per SM ("wave quantization": a last, partial wave costs a whole wave); a small
tile reuses each operand byte over fewer products, so it needs more bandwidth per flop. Here:

    cycles = min over the library's tiles (tm, tn) of  waves x tile_cycles,
    waves = ceil(batch x ceil(M / tm) x ceil(N / tn) / sms),
    tile_cycles = max(tm x tn x K / (SM MACs per cycle x tile_fraction),             the main loop's math,
                      (tm + tn) x K x element bytes / (operand rate / running blocks))  its operand tiles,

the running blocks being min(tiles, sms), which share the operand memory's bandwidth. The cheapest tile
stands for the library's heuristic choice (ties: the tile listed first).
"""
from __future__ import annotations

import math

from accelsim.cost.kernel_overheads import streaming_bytes_per_cycle
from accelsim.hw.gpu_gemm import GpuGemm
from accelsim.hw.spec import Chip, HwSpec, Unit


def sm_macs_per_cycle(gpu_gemm: GpuGemm, unit: Unit) -> float:
    """One SM's share of the unit's MACs per cycle at its own precision (all its instances over the SMs)."""
    return unit.model.peak_ops_per_cycle() / 2 * unit.count / gpu_gemm.sms


def tile_cycles(gpu_gemm: GpuGemm, unit: Unit, gemm: tuple[int, int, int, int], tile: tuple[int, int],
                elem_bytes: int, operand_bytes_per_cycle: float) -> float:
    """Cycles the GEMM `gemm` = (batch, M, K, N) takes with `tile` (rows x columns of the output)."""
    batch, m, k, n = gemm
    tm, tn = tile
    tiles = batch * math.ceil(m / tm) * math.ceil(n / tn)
    waves = math.ceil(tiles / gpu_gemm.sms)
    math_cycles = tm * tn * k / (sm_macs_per_cycle(gpu_gemm, unit) * gpu_gemm.tile_fraction)
    share = operand_bytes_per_cycle / min(tiles, gpu_gemm.sms)
    operand_cycles = (tm + tn) * k * elem_bytes / share
    return waves * max(math_cycles, operand_cycles)


def gpu_gemm_cycles(gpu_gemm: GpuGemm, unit: Unit, gemm: tuple[int, int, int, int], elem_bytes: int,
                    operand_bytes_per_cycle: float) -> int:
    """The GEMM's cycles with the library's cheapest tile (whole cycles, rounded up; at least 1)."""
    best = min(tile_cycles(gpu_gemm, unit, gemm, tile, elem_bytes, operand_bytes_per_cycle)
               for tile in gpu_gemm.tiles)
    return max(1, math.ceil(best))


def chip_gemm_cycles(hw: HwSpec, chip: Chip, unit: Unit, gemm: tuple[int, int, int, int] | None,
                     elem_bytes: int) -> int | None:
    """gpu_gemm_cycles for a GEMM on a gang unit (one kernel over every SM) of a chip with `gpu_gemm:`; None
    elsewhere (the unit's own compute model times it)."""
    if chip.gpu_gemm is None or gemm is None or not unit.gang:
        return None
    memory = chip.memory(chip.gpu_gemm.operand_memory)
    rate = streaming_bytes_per_cycle(chip.gpu_overheads, memory, hw.clock_hz)
    return gpu_gemm_cycles(chip.gpu_gemm, unit, gemm, elem_bytes, rate)
