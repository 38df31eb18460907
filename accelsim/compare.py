"""Numeric comparison, the one place it is defined: (got, reference) arrays -> relative error, first bad element.

A comparison vouches only for finite numbers. NaN never agrees with anything, NaN included; an element
that is finite on one side and not on the other fails; shapes must be equal (no broadcasting). By
default an infinity fails even where both sides hold the same one (an overflowed value proves nothing);
`allow_inf=True` lets the same-signed infinity at the same place agree, for tensors that legitimately
hold one (an attention mask filled with -inf).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

NEGLIGIBLE = 1e-3
"""A tensor compared at a floor of NEGLIGIBLE x the largest tensor of the same kind: a value whose true
value is ~0 (a key bias, which softmax ignores) does not turn rounding noise into a relative error of 1."""


@dataclass(frozen=True)
class Mismatch:
    """The first element, in C order, at which `got` fails against the reference.

    reason: "shape" (index, got and expected are None; see the shapes), "reference non-finite" (the
    reference itself holds NaN or an infinity there), "non-finite" (got and the reference disagree on
    finiteness, or one is NaN) or "tolerance" (both finite, relative error above the tolerance).
    """
    reason: str
    index: tuple[int, ...] | None
    got: float | None
    expected: float | None
    got_shape: tuple[int, ...]
    expected_shape: tuple[int, ...]

    def __str__(self) -> str:
        if self.reason == "shape":
            return f"shape {self.got_shape}, expected {self.expected_shape}"
        if self.reason == "reference non-finite":
            at = f" at index {self.index}" if self.index else ""
            return f"the reference itself is non-finite: {self.expected:.6g}{at} (got {self.got:.6g})"
        at = f"index {self.index}" if self.index else "the value"
        return f"{at} is {self.got:.6g}, expected {self.expected:.6g}"


def scale(*arrays) -> float:
    """max |x| over the finite elements of all `arrays` (0.0 when there are none)."""
    best = 0.0
    for a in arrays:
        a = np.asarray(a, dtype=np.float64)
        finite = a[np.isfinite(a)]
        if finite.size:
            best = max(best, float(np.max(np.abs(finite))))
    return best


def max_abs_err(got, ref, *, allow_inf: bool = False) -> float:
    """max |got - ref| over the elements; inf where the shapes differ or any element fails on finiteness."""
    a, b = _pair(got, ref)
    if a is None or _nonfinite_failures(a, b, allow_inf).any():
        return math.inf
    return float(np.max(_finite_diff(a, b), initial=0.0))


def max_rel_err(got, ref, floor: float = 0.0, *, allow_inf: bool = False) -> float:
    """max |got - ref| / max(max|got|, max|ref|, floor), the maxima over finite elements: relative to the
    tensor's scale, so tiny entries don't dominate. inf where the shapes differ or any element fails
    on finiteness (see the module docstring); never NaN."""
    a, b = _pair(got, ref)
    if a is None or _nonfinite_failures(a, b, allow_inf).any():
        return math.inf
    return float(np.max(_relative(a, b, floor), initial=0.0))


def first_mismatch(got, ref, tol: float, floor: float = 0.0, *, allow_inf: bool = False) -> Mismatch | None:
    """The first element at which `got` fails against `ref` (relative error above `tol`, or a
    non-finite disagreement), None when every element passes. A non-finite reference element is
    reported first: a check against a non-finite reference proves nothing. `tol=math.inf` reports
    only shape and finiteness failures."""
    if math.isnan(tol) or tol < 0:
        raise ValueError(f"tolerance must be >= 0, got {tol}")
    a, b = _pair(got, ref)
    if a is None:
        return Mismatch("shape", None, None, None, np.shape(got), np.shape(ref))
    bad_ref = ~np.isfinite(b)
    if allow_inf:
        bad_ref &= ~np.isinf(b)
    if bad_ref.any():
        return _at(a, b, "reference non-finite", bad_ref)
    bad = _nonfinite_failures(a, b, allow_inf)
    if bad.any():
        return _at(a, b, "non-finite", bad)
    over = _relative(a, b, floor) > tol
    return _at(a, b, "tolerance", over) if over.any() else None


def _pair(got, ref) -> tuple[np.ndarray, np.ndarray] | tuple[None, None]:
    a, b = np.asarray(got, dtype=np.float64), np.asarray(ref, dtype=np.float64)
    return (a, b) if a.shape == b.shape else (None, None)


def _nonfinite_failures(a: np.ndarray, b: np.ndarray, allow_inf: bool) -> np.ndarray:
    """Elements that fail on finiteness alone."""
    bad = ~(np.isfinite(a) & np.isfinite(b))
    if allow_inf:
        bad &= ~(np.isinf(a) & (a == b))
    return bad


def _finite_diff(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """|a - b| where both are finite, 0 elsewhere (an overflow to inf of a finite difference stays inf)."""
    both = np.isfinite(a) & np.isfinite(b)
    with np.errstate(invalid="ignore", over="ignore"):
        return np.where(both, np.abs(a - b), 0.0)


def _relative(a: np.ndarray, b: np.ndarray, floor: float) -> np.ndarray:
    if not math.isfinite(floor) or floor < 0:
        raise ValueError(f"floor must be finite and >= 0, got {floor}")
    s = max(scale(a, b), floor)
    diff = _finite_diff(a, b)
    return diff / s if s > 0 else diff  # s == 0: every finite element is 0, so diff is 0 too


def _at(a: np.ndarray, b: np.ndarray, reason: str, mask: np.ndarray) -> Mismatch:
    flat = int(np.flatnonzero(mask)[0])
    index = tuple(int(i) for i in np.unravel_index(flat, a.shape)) if a.ndim else ()
    return Mismatch(reason, index, float(a.flat[flat]), float(b.flat[flat]), a.shape, b.shape)
