"""Comparisons and selection: `eq`, `ne`, `lt`, `le`, `gt`, `ge` give a 0/1 mask in their inputs' float dtype,
and `where(cond, a, b)` picks a where cond is nonzero, else b (numpy broadcasting throughout).

A graph holds float and int64 tensors, no booleans, so a mask is a float tensor of zeros and ones: attention
masks (`masked_fill`), clamping (`clamp`, `hardtanh`) and ignore masks are built from these. A comparison is a
step function, so its gradient is zero wherever it is defined; `where` passes g to the branch it picked.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from accelsim.ops.elementwise import _unbroadcast, broadcast_shape
from accelsim.ops.registry import Example, OpDef, Shape, apply, numel, register

__all__ = ["eq", "ge", "gt", "le", "lt", "ne", "where"]

COMPARISONS: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal,
}
"""Comparison op name -> numpy's predicate. Kernels number them in this order (COMPARISON_CODES)."""
COMPARISON_CODES: dict[str, int] = {name: k for k, name in enumerate(COMPARISONS)}


def eq(a: Any, b: Any) -> Any:
    return apply("eq", a, b)


def ne(a: Any, b: Any) -> Any:
    return apply("ne", a, b)


def lt(a: Any, b: Any) -> Any:
    return apply("lt", a, b)


def le(a: Any, b: Any) -> Any:
    return apply("le", a, b)


def gt(a: Any, b: Any) -> Any:
    return apply("gt", a, b)


def ge(a: Any, b: Any) -> Any:
    return apply("ge", a, b)


def where(cond: Any, a: Any, b: Any) -> Any:
    """a where cond != 0, else b (cond a 0/1 mask in the graph's float dtype, such as a comparison's)."""
    return apply("where", cond, a, b)


def _compare_ref(predicate: Callable) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    def ref(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        a = np.asarray(a)
        return predicate(a, np.asarray(b)).astype(a.dtype)
    return ref


def _compare_examples(rng: np.random.Generator) -> list[Example]:
    """a on a grid of halves, b a quarter off it: no ties, so no finite-difference step crosses one (ties, where
    eq, le and ge differ from ne, gt and lt, are tested in tests/test_import_torch_coverage.py)."""
    def grid(shape: Shape, offset: float = 0.0) -> np.ndarray:
        return rng.integers(-3, 4, size=shape) * 0.5 + offset

    return [((grid((3, 4)), grid((3, 4), 0.25)), {}), ((grid((2, 3, 4)), grid((4,), 0.25)), {}),
            ((grid((3, 1)), grid((1, 4), -0.25)), {}), ((grid(()), grid((2, 3), 0.25)), {})]


def _where_ref(cond: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a = np.asarray(a)
    return np.where(np.asarray(cond) != 0, a, np.asarray(b, a.dtype)).astype(a.dtype, copy=False)


def _where_grad(g: Any, out: Any, cond: Any, a: Any, b: Any) -> tuple[Any, ...]:
    return (None, _unbroadcast(where(cond, g, 0.0), a.shape), _unbroadcast(where(cond, 0.0, g), b.shape))


def _where_examples(rng: np.random.Generator) -> list[Example]:
    def mask(shape: Shape) -> np.ndarray:
        return rng.integers(0, 2, size=shape).astype(np.float64)

    return [((mask((3, 4)), rng.normal(size=(3, 4)), rng.normal(size=(3, 4))), {}),
            ((mask((3, 1)), rng.normal(size=(1, 4)), rng.normal(size=())), {}),
            ((mask((4,)), rng.normal(size=(2, 3, 4)), rng.normal(size=(3, 1))), {})]


for _name, _predicate in COMPARISONS.items():
    register(OpDef(_name, "elementwise", infer=lambda a, b: broadcast_shape(a, b), ref=_compare_ref(_predicate),
                   flops=lambda out, *ins: numel(out), grad=lambda g, out, a, b: (None, None),
                   examples=_compare_examples, doc=f"1 where a {_name} b, else 0 (in a's dtype)"))

register(OpDef("where", "elementwise", infer=lambda c, a, b: broadcast_shape(c, a, b), ref=_where_ref,
               flops=lambda out, *ins: numel(out), grad=_where_grad, examples=_where_examples, dtype_from=1,
               doc="a where cond != 0, else b"))
