"""Comparisons and selection: `eq`, `ne`, `lt`, `le`, `gt`, `ge` give a 0/1 mask in their inputs' float dtype,
and `where(cond, a, b)` picks a where cond is nonzero, else b (numpy broadcasting throughout).

A graph holds float and int64 tensors, no booleans, so a mask is a float tensor of zeros and ones: attention
masks (`masked_fill`), clamping (`clamp`, `hardtanh`) and ignore masks are built from these. A comparison is a
step function, so its gradient is zero wherever it is defined; `where` passes g to the branch it picked.

Comparing int64 tensors (token ids against a padding id, labels against ignore_index) is `int_eq` ... `int_ge`:
exact integer comparisons whose third operand is a float zero scalar that gives the mask its dtype (the graph's),
so the mask feeds `where` and arithmetic like any other. `eq(a, b)` ... pick them when an operand is int64.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from accelsim.errors import ShapeError
from accelsim.ops.elementwise import _unbroadcast, broadcast_shape
from accelsim.ops.registry import Example, OpDef, Shape, apply, numel, register

__all__ = ["eq", "ge", "gt", "le", "lt", "ne", "where"]

MIRRORED = {"eq": "eq", "ne": "ne", "lt": "gt", "le": "ge", "gt": "lt", "ge": "le"}
"""c OP a is a MIRRORED[OP] c."""

COMPARISONS: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal,
}
"""Comparison op name -> numpy's predicate. Kernels number them in this order (COMPARISON_CODES)."""
COMPARISON_CODES: dict[str, int] = {name: k for k, name in enumerate(COMPARISONS)}


def eq(a: Any, b: Any) -> Any:
    return _compare("eq", a, b)


def ne(a: Any, b: Any) -> Any:
    return _compare("ne", a, b)


def lt(a: Any, b: Any) -> Any:
    return _compare("lt", a, b)


def le(a: Any, b: Any) -> Any:
    return _compare("le", a, b)


def gt(a: Any, b: Any) -> Any:
    return _compare("gt", a, b)


def ge(a: Any, b: Any) -> Any:
    return _compare("ge", a, b)


def _is_int_tensor(x: Any) -> bool:
    return getattr(x, "dtype", None) == "int64" and hasattr(x, "graph")


def _compare(name: str, a: Any, b: Any) -> Any:
    """`name`(a, b): the float comparison op, or its int_ form when either operand is an int64 tensor."""
    if not (_is_int_tensor(a) or _is_int_tensor(b)):
        return apply(name, a, b)
    if not _is_int_tensor(a):  # a number on the left: compare the tensor on the left instead
        name, a, b = MIRRORED[name], b, a
    graph = a.graph
    if hasattr(b, "graph"):
        if b.dtype != "int64":
            raise ShapeError(f"{name}: compares an int64 tensor (%{a.id} {a.node.name!r}) with a {b.dtype} tensor "
                             f"(%{b.id} {b.node.name!r}); compare tensors of one kind (int64 ids with int64 ids)")
        return apply(f"int_{name}", a, b, graph.const(0.0))
    name, bound = _integer_bound(name, b)
    return apply(f"int_{name}", a, graph.const(bound, dtype="int64"), graph.const(0.0))


def _integer_bound(name: str, c: Any) -> tuple[str, int | np.ndarray]:
    """An int64 tensor x compared with number(s) c: the same test against integers (x < 2.5 is x <= 2;
    x == 2.5 never holds, x != 2.5 always)."""
    value = np.asarray(c)
    if value.dtype.kind in "iub":
        return name, value.astype(np.int64)
    if value.dtype.kind != "f" or not np.all(np.isfinite(value)):
        raise ShapeError(f"{name}: compares an int64 tensor with {_short(value)}; expected finite numbers")
    if value.ndim == 0 and float(value) != np.floor(value):
        if name in ("eq", "ne"):  # compare with a value no integer has: the bound of an empty or full test
            return ("lt" if name == "eq" else "ge"), np.int64(np.iinfo(np.int64).min)
        rounded = np.floor(value) if name in ("lt", "le") else np.ceil(value)
        return ("le" if name in ("lt", "le") else "ge"), rounded.astype(np.int64)
    if np.any(value != np.floor(value)):
        raise ShapeError(f"{name}: compares an int64 tensor with non-integer numbers {_short(value)}; expected "
                         "integers (or one number)")
    return name, value.astype(np.int64)


def _short(value: np.ndarray) -> str:
    text = np.array2string(value, threshold=6)
    return text if len(text) <= 80 else text[:77] + "..."


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


def _int_compare_ref(predicate: Callable) -> Callable[..., np.ndarray]:
    def ref(a: np.ndarray, b: np.ndarray, like: np.ndarray) -> np.ndarray:
        return predicate(np.asarray(a), np.asarray(b)).astype(np.asarray(like).dtype)
    return ref


def _int_compare_examples(rng: np.random.Generator) -> list[Example]:
    """Small ranges, so ties (where eq, le, ge differ from ne, lt, gt) are common; ids beyond 2**53, where a
    float comparison would merge neighbours, too."""
    big = np.int64(2**53)
    return [((rng.integers(-3, 4, size=(3, 4)), rng.integers(-3, 4, size=(3, 4)), np.zeros(())), {}),
            ((rng.integers(0, 5, size=(2, 3, 4)), rng.integers(0, 5, size=(4,)), np.zeros(())), {}),
            ((big + rng.integers(0, 3, size=(3, 1)), big + rng.integers(0, 3, size=(1, 4)), np.zeros(())), {}),
            ((rng.integers(-2, 3, size=()), rng.integers(-2, 3, size=(2, 3)), np.zeros(())), {})]


for _name, _predicate in COMPARISONS.items():
    register(OpDef(f"int_{_name}", "elementwise", infer=lambda a, b, like: broadcast_shape(a, b, like),
                   ref=_int_compare_ref(_predicate), flops=lambda out, *ins: numel(out),
                   read_elems=lambda out, a, b, like: numel(a) + numel(b),
                   grad=lambda g, out, a, b, like: (None, None, None), examples=_int_compare_examples,
                   integer_inputs=(0, 1), dtype_from=2,
                   doc=f"1 where int64 a {_name} b, else 0 (in the float dtype of the zero scalar `like`)"))
