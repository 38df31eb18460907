"""A GEMM's compute cycles on a GPU-like chip's Tensor Core unit (hw/gpu_gemm.py): (GpuGemm, unit, GEMM view,
operand rate) -> cycles, tile and wave quantization included.

NVIDIA's "Matrix Multiplication Background User's Guide" (Deep Learning Performance documentation): a GEMM
kernel splits the output into thread-block tiles of a few fixed shapes (256x128 and 128x256 the most
efficient, down to 64x64), padding each output dimension up to a whole tile ("tile quantization"), and runs
the tiles in waves of one block per SM ("wave quantization": a last, partial wave costs a whole wave); a small
tile reuses each operand byte over fewer products, so it needs more bandwidth per flop. Here:

    cycles = min over the library's tiles (tm, tn) of  waves x tile_cycles,
    waves = ceil(batch x ceil(M / tm) x ceil(N / tn) / sms),
    tile_cycles = the operand memory's latency                                          the first operands,
                  + max(tm x tn x K / (SM MACs per cycle x tile_fraction),           the main loop's math,
                        (tm + tn) x K x element bytes / (operand rate / running blocks)) its operand tiles,
                  + tm x tn x element bytes / (operand rate / running blocks)           the epilogue's store,

the running blocks being min(tiles, sms), which share the operand memory's bandwidth. An output of fewer
tiles than SMs (a weight gradient: a small output, a long K) leaves SMs idle, so libraries split K over
several blocks and sum their fp32 partial tiles ("split-K", CUTLASS's efficient_gemm.md, "Parallelized
Reductions"): K / s deep tiles, s times as many, plus a reduction that writes and reads every partial tile
at the operand memory's rate; s runs over the powers of two below one full wave and the
splits that fill it. The cheapest (tile, s)
stands for the library's heuristic choice (ties: the tile listed first, then the fewest slices).
"""
from __future__ import annotations

import functools
import math

from accelsim.cost.kernel_overheads import streaming_bytes_per_cycle
from accelsim.hw.gpu_gemm import GpuGemm
from accelsim.hw.spec import Chip, HwSpec, Unit

PARTIAL_BYTES = 4  # a split-K slice's partial sums are fp32 (the Tensor Cores accumulate in fp32)


def sm_macs_per_cycle(gpu_gemm: GpuGemm, unit: Unit) -> float:
    """One SM's share of the unit's MACs per cycle at its own precision (all its instances over the SMs)."""
    return unit.model.peak_ops_per_cycle() / 2 * unit.count / gpu_gemm.sms


def tile_cycles(gpu_gemm: GpuGemm, sm_macs: float, gemm: tuple[int, int, int, int], tile: tuple[int, int],
                elem_bytes: int, operand_bytes_per_cycle: float, splits: int = 1, latency_cycles: int = 0) -> float:
    """Cycles the GEMM `gemm` = (batch, M, K, N) takes with `tile` (rows x columns of the output) on SMs of
    `sm_macs` MACs per cycle each (sm_macs_per_cycle), its K split into `splits` slices (split-K: each slice's
    blocks write fp32 partial tiles, summed by a reduction); each block first waits `latency_cycles` for its
    first operand tiles."""
    batch, m, k, n = gemm
    tm, tn = tile
    outputs = batch * math.ceil(m / tm) * math.ceil(n / tn)
    tiles = outputs * splits
    depth = math.ceil(k / splits)
    waves = math.ceil(tiles / gpu_gemm.sms)
    math_cycles = tm * tn * depth / (sm_macs * gpu_gemm.tile_fraction)
    share = operand_bytes_per_cycle / min(tiles, gpu_gemm.sms)
    operand_cycles = (tm + tn) * depth * elem_bytes / share
    # the epilogue stores the finished tile after the main loop (fp32 partial sums when K is split)
    store_cycles = tm * tn * (elem_bytes if splits == 1 else PARTIAL_BYTES) / share
    reduction = 0.0 if splits == 1 else 2 * tiles * tm * tn * PARTIAL_BYTES / operand_bytes_per_cycle
    return waves * (latency_cycles + max(math_cycles, operand_cycles) + store_cycles) + reduction


def split_choices(gpu_gemm: GpuGemm, gemm: tuple[int, int, int, int], tile: tuple[int, int]) -> tuple[int, ...]:
    """1, the powers of two below the splits that fill one wave with the output's tiles, and that number
    itself (never more slices than K has elements): a few candidates, as a node is costed often."""
    batch, m, k, n = gemm
    outputs = batch * math.ceil(m / tile[0]) * math.ceil(n / tile[1])
    most = max(min(gpu_gemm.sms // outputs, k), 1)
    return tuple(sorted({2 ** i for i in range(most.bit_length())} | {most}))


def gpu_gemm_cycles(gpu_gemm: GpuGemm, unit: Unit, gemm: tuple[int, int, int, int], elem_bytes: int,
                    operand_bytes_per_cycle: float, latency_cycles: int = 0) -> int:
    """The GEMM's cycles with the library's cheapest tile and split (whole cycles, rounded up; at least 1)."""
    return _cheapest(gpu_gemm, sm_macs_per_cycle(gpu_gemm, unit), tuple(gemm), elem_bytes, operand_bytes_per_cycle,
                     latency_cycles)


@functools.lru_cache(maxsize=4096)
def _cheapest(gpu_gemm: GpuGemm, sm_macs: float, gemm: tuple[int, int, int, int], elem_bytes: int,
              operand_bytes_per_cycle: float, latency_cycles: int) -> int:
    """gpu_gemm_cycles on hashable values: a step's layers repeat, so most GEMMs are costed many times."""
    best = min(tile_cycles(gpu_gemm, sm_macs, gemm, tile, elem_bytes, operand_bytes_per_cycle, splits, latency_cycles)
               for tile in gpu_gemm.tiles for splits in split_choices(gpu_gemm, gemm, tile))
    return max(1, math.ceil(best))


def chip_gemm_cycles(hw: HwSpec, chip: Chip, unit: Unit, gemm: tuple[int, int, int, int] | None,
                     elem_bytes: int) -> int | None:
    """gpu_gemm_cycles for a GEMM on a gang unit (one kernel over every SM) of a chip with `gpu_gemm:`; None
    elsewhere (the unit's own compute model times it)."""
    if chip.gpu_gemm is None or gemm is None or not unit.gang:
        return None
    memory = chip.memory(chip.gpu_gemm.operand_memory)
    rate = streaming_bytes_per_cycle(chip.gpu_overheads, memory, hw.clock_hz)
    return gpu_gemm_cycles(chip.gpu_gemm, unit, gemm, elem_bytes, rate, memory.latency_cycles)
