"""Converters of ONNX's comparisons and boolean logic: Equal, Less, LessOrEqual, Greater, GreaterOrEqual, Not,
And, Or, Xor (ONNX node -> registry ops). A graph has no booleans: a mask is 0/1 in the graph's float dtype
(accelsim.ops.select), int64 operands compared exactly (int_eq ...), so Not is 1 - m and And is m1 * m2."""
from __future__ import annotations

from typing import Callable

from accelsim import ops as F
from accelsim.frontends.onnx_context import ImportContext, Value
from accelsim.frontends.onnx_opdef import OnnxOpDef
from accelsim.graph.ir import Var


def _comparison(fn: Callable[[Var, Var], Var]) -> Callable[[ImportContext], list[Value]]:
    def convert(ctx: ImportContext) -> list[Value]:
        a, b = ctx.tensor(0), ctx.tensor(1)
        if (a.dtype == "int64") != (b.dtype == "int64"):
            raise ctx.unsupported(f"compares a {a.dtype} tensor with a {b.dtype} one")
        return [fn(a, b)]
    return convert


def _mask(ctx: ImportContext, i: int) -> Var:
    x = ctx.tensor(i)
    if x.dtype == "int64":
        raise ctx.unsupported(f"input {i} is an int64 tensor, not a boolean mask")
    return x


SELECT_OPS: tuple[OnnxOpDef, ...] = (
    OnnxOpDef("Equal", _comparison(F.eq), "eq (int_eq on int64): a 0/1 mask"),
    OnnxOpDef("Less", _comparison(F.lt), "lt (int_lt on int64): a 0/1 mask"),
    OnnxOpDef("LessOrEqual", _comparison(F.le), "le (int_le on int64): a 0/1 mask"),
    OnnxOpDef("Greater", _comparison(F.gt), "gt (int_gt on int64): a 0/1 mask"),
    OnnxOpDef("GreaterOrEqual", _comparison(F.ge), "ge (int_ge on int64): a 0/1 mask"),
    OnnxOpDef("Not", lambda ctx: [1.0 - _mask(ctx, 0)], "1 - m"),
    OnnxOpDef("And", lambda ctx: [_mask(ctx, 0) * _mask(ctx, 1)], "m1 * m2"),
    OnnxOpDef("Or", lambda ctx: [(lambda a, b: a + b - a * b)(_mask(ctx, 0), _mask(ctx, 1))], "m1 + m2 - m1 m2"),
    OnnxOpDef("Xor", lambda ctx: [F.ne(_mask(ctx, 0), _mask(ctx, 1))], "ne(m1, m2)"),
)
