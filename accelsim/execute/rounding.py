"""Rounding to a step precision's number format with numpy alone (float array, precision -> the nearest
value that format holds, in the array's own dtype), so `check` can emulate a low-precision step.

bf16 and tf32 keep float32's 8-bit exponent and cut its mantissa (to 7 and 10 bits): round to nearest, ties
to even, on the float32 bit pattern. fp16 is numpy's float16. fp8 is E4M3 (Micikevicius et al., "FP8
Formats for Deep Learning", 2022: 3 mantissa bits, bias 7, largest 448, subnormals down to 2^-9, no
infinity), saturating at +-448 as training frameworks cast. NaN stays NaN; infinities stay infinite
except in fp8, which saturates them too.
"""
from __future__ import annotations

import numpy as np

ROUNDED_PRECISIONS = ("bf16", "fp16", "fp8")
"""Step precisions whose stored values `check` rounds (fp32 and tf32 store float32; tf32's rounding inside
the multiplier is not emulated)."""

UNIT_ROUNDOFF: dict[str, float] = {"fp32": 2.0 ** -24, "tf32": 2.0 ** -11, "bf16": 2.0 ** -8, "fp16": 2.0 ** -11,
                                   "fp8": 2.0 ** -4}
"""Half the distance between 1 and the next value of each format: the relative error of one rounding."""

_MANTISSA_CUT = {"bf16": 16, "tf32": 13}  # float32 mantissa bits each format drops
_FP8_MAX, _FP8_MIN_EXP, _FP8_MANTISSA = 448.0, -6, 3


def round_to(value: np.ndarray, precision: str | None) -> np.ndarray:
    """`value` rounded to `precision`'s format, in its own dtype; integer arrays and fp32 are left as they are."""
    a = np.asarray(value)
    if precision in (None, "fp32") or a.dtype.kind != "f":
        return a
    if precision == "fp16":
        with np.errstate(over="ignore"):
            return a.astype(np.float16).astype(a.dtype)
    if precision == "fp8":
        return _round_e4m3(a)
    return _cut_mantissa(a, _MANTISSA_CUT[precision])


def _cut_mantissa(a: np.ndarray, cut: int) -> np.ndarray:
    """float32 rounded to nearest-even at `cut` low mantissa bits dropped (overflow carries into the exponent,
    so the largest values round to infinity as the format does)."""
    f = np.ascontiguousarray(a, dtype=np.float32)
    bits = f.view(np.uint32).astype(np.uint64)
    half = np.uint64((1 << (cut - 1)) - 1)
    odd = (bits >> np.uint64(cut)) & np.uint64(1)
    rounded = ((bits + half + odd) >> np.uint64(cut)) << np.uint64(cut)
    out = rounded.astype(np.uint32).view(np.float32)
    out = np.where(np.isnan(f), f, out)
    return out.astype(a.dtype, copy=False).reshape(a.shape)


def _round_e4m3(a: np.ndarray) -> np.ndarray:
    """Nearest E4M3 value (ties to even), saturating at +-448."""
    x = np.asarray(a, dtype=np.float64)
    finite = np.isfinite(x)
    safe = np.where(finite, x, 0.0)
    _, exp = np.frexp(np.abs(safe))  # |x| = m * 2^exp, m in [0.5, 1): the leading bit is 2^(exp - 1)
    quantum = np.ldexp(1.0, np.maximum(exp - 1, _FP8_MIN_EXP) - _FP8_MANTISSA)
    out = np.clip(np.round(safe / quantum) * quantum, -_FP8_MAX, _FP8_MAX)  # np.round: ties to even
    out = np.where(np.isnan(x), x, np.where(finite, out, np.sign(x) * _FP8_MAX))
    return out.astype(a.dtype)
