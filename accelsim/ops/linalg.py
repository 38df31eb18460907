"""Tensor-level matmul: batched, with optional transposes of either operand."""
from __future__ import annotations

from typing import Any

import numpy as np

from accelsim.errors import ShapeError
from accelsim.ops.reduce import sum_to
from accelsim.ops.shape import reshape
from accelsim.ops.registry import Example, OpDef, Shape, Split, apply, numel, register


def matmul(a: Any, b: Any, transpose_a: bool = False, transpose_b: bool = False) -> Any:
    """op(a) @ op(b) over the last two axes; batch axes equal, or absent on one side."""
    return apply("matmul", a, b, transpose_a=bool(transpose_a), transpose_b=bool(transpose_b))


def _mnk(a: Shape, b: Shape, transpose_a: bool, transpose_b: bool) -> tuple[Shape, int, int, int]:
    if len(a) < 2 or len(b) < 2:
        raise ShapeError(f"matmul needs operands of rank >= 2, got {a} and {b}")
    m, k = (a[-1], a[-2]) if transpose_a else (a[-2], a[-1])
    k2, n = (b[-1], b[-2]) if transpose_b else (b[-2], b[-1])
    if k != k2:
        ta, tb = ("^T" if transpose_a else ""), ("^T" if transpose_b else "")
        raise ShapeError(f"contraction sizes differ: a{ta} is (.., {m}, {k}), b{tb} is (.., {k2}, {n})")
    ba, bb = a[:-2], b[:-2]
    if ba and bb and ba != bb:
        raise ShapeError(f"batch dimensions differ: {ba} vs {bb}")
    return ba or bb, m, k, n


def _infer(a: Shape, b: Shape, transpose_a: bool, transpose_b: bool) -> Shape:
    batch, m, _, n = _mnk(a, b, transpose_a, transpose_b)
    return batch + (m, n)


def _ref(a: np.ndarray, b: np.ndarray, transpose_a: bool, transpose_b: bool) -> np.ndarray:
    if transpose_a:
        a = np.swapaxes(a, -1, -2)
    if transpose_b:
        b = np.swapaxes(b, -1, -2)
    return np.matmul(a, b)


def _flops(out: Shape, a: Shape, b: Shape, transpose_a: bool, transpose_b: bool) -> int:
    batch, m, k, n = _mnk(a, b, transpose_a, transpose_b)
    return 2 * numel(batch) * m * k * n


def _grad(g: Any, out: Any, a: Any, b: Any, transpose_a: bool, transpose_b: bool) -> tuple[Any, Any]:
    """The four transpose cases of d(op(a) op(b)); batch-broadcast operands sum their adjoint."""
    if b.ndim == 2 and a.ndim > 2 and not transpose_a:
        # x @ W with x (..., m, k): fold the batch into m so dW is one GEMM, not a batch + sum.
        a2, g2 = reshape(a, (-1, a.shape[-1])), reshape(g, (-1, g.shape[-1]))
        gb = matmul(g2, a2, transpose_a=True) if transpose_b else matmul(a2, g2, transpose_a=True)
        return matmul(g, b, transpose_b=not transpose_b), gb
    if not transpose_a and not transpose_b:
        ga, gb = matmul(g, b, transpose_b=True), matmul(a, g, transpose_a=True)
    elif not transpose_a and transpose_b:
        ga, gb = matmul(g, b), matmul(g, a, transpose_a=True)
    elif transpose_a and not transpose_b:
        ga, gb = matmul(b, g, transpose_b=True), matmul(a, g)
    else:
        ga, gb = matmul(b, g, transpose_a=True, transpose_b=True), matmul(g, a, transpose_a=True, transpose_b=True)
    return sum_to(ga, a.shape), sum_to(gb, b.shape)


def _examples(rng: np.random.Generator) -> list[Example]:
    cases = []
    for ta in (False, True):
        for tb in (False, True):
            a = rng.normal(size=(4, 3) if ta else (3, 4))
            b = rng.normal(size=(5, 4) if tb else (4, 5))
            cases.append(((a, b), {"transpose_a": ta, "transpose_b": tb}))
    cases.append(((rng.normal(size=(2, 3, 4)), rng.normal(size=(2, 4, 5))), {"transpose_a": False, "transpose_b": False}))
    cases.append(((rng.normal(size=(2, 3, 4)), rng.normal(size=(4, 5))), {"transpose_a": False, "transpose_b": False}))
    cases.append(((rng.normal(size=(2, 4, 3)), rng.normal(size=(5, 4))), {"transpose_a": True, "transpose_b": True}))
    return cases


def _gemm(out: Shape, a: Shape, b: Shape, transpose_a: bool, transpose_b: bool) -> tuple[int, int, int, int]:
    batch, m, k, n = _mnk(a, b, transpose_a, transpose_b)
    return numel(batch), m, k, n


def _splits(out: Shape, a: Shape, b: Shape, transpose_a: bool, transpose_b: bool) -> tuple[Split, ...]:
    """Output rows come from op(a)'s rows, columns from op(b)'s columns, batch entries from both
    operands' batch entries (an operand without batch axes is read whole)."""
    rows = Split("rows", len(out) - 2, (len(a) - 1 if transpose_a else len(a) - 2, None))
    cols = Split("cols", len(out) - 1, (None, len(b) - 2 if transpose_b else len(b) - 1))
    if len(out) == 2:
        return rows, cols
    batch = Split("batch", 0, (0 if len(a) > 2 else None, 0 if len(b) > 2 else None))
    return batch, rows, cols


register(OpDef("matmul", "tensor", infer=_infer, ref=_ref, flops=_flops, grad=_grad, examples=_examples,
               gemm=_gemm, splits=_splits))
