"""ATen comparisons, masks, selection and clamping as accelsim ops (entries of ATEN_OPS).

A graph has no boolean tensors: a torch bool mask is a 0/1 mask in the graph's float dtype (accelsim.ops.select),
so `logical_not` is 1 - m and `logical_and` is m1 * m2. `masked_fill(x, m, v)` is where(m, v, x); clamp and its
relatives (hardtanh, ReLU6, hardsigmoid, hardswish) are two `where`s, whose gradient is torch's: g where
min <= x <= max. Masks built from constants alone (a causal mask from `tril(ones)`) never reach these converters:
the importer evaluates constant subgraphs itself (frontends/torch_fold.py).
"""
from __future__ import annotations

from typing import Any

from accelsim import ops as F
from accelsim.frontends.aten_registry import Args, Ctx, Kwargs, aten
from accelsim.frontends.lowerings import clamp
from accelsim.frontends.torch_fold import const_dtype


def _clamp(ctx: Ctx, x: Any, lo: Any = None, hi: Any = None) -> Any:
    """aten's clamp (frontends/lowerings.py, shared with the ONNX import)."""
    return clamp(x, lo, hi)


def _hardsigmoid(ctx: Ctx, x: Any) -> Any:
    return _clamp(ctx, x + 3.0, 0.0, 6.0) / 6.0


def _scalar_tensor(ctx: Ctx, value: Any, dtype: Any = None, layout: Any = None, device: Any = None,
                   pin_memory: Any = None) -> Any:
    return ctx.graph.const(value, dtype=const_dtype(ctx.graph, dtype))


def _scalar_tensor_refuse(args: Args, kwargs: Kwargs) -> str | None:
    dtype = kwargs.get("dtype")
    if dtype is not None and not (dtype.is_floating_point or str(dtype) in ("torch.int64", "torch.bool")):
        return f"dtype={dtype} (expected a float dtype, int64 or bool)"
    return None


def _where(ctx: Ctx, cond: Any, a: Any, b: Any) -> Any:
    if not hasattr(a, "graph") and not hasattr(b, "graph"):
        a = ctx.graph.const(a)
    return F.where(cond, a, b)


for _cmp in ("eq", "ne", "lt", "le", "gt", "ge"):
    for _overload in ("Tensor", "Scalar"):
        aten(f"aten.{_cmp}.{_overload}", lambda ctx, a, b, _f=getattr(F, _cmp): _f(a, b),
             f"{_cmp} (a 0/1 mask in the graph's float dtype)")
aten("aten.where.self", _where, "where")
aten("aten.where.ScalarSelf", _where, "where")
aten("aten.where.ScalarOther", _where, "where")
aten("aten.where.Scalar", _where, "where")
aten("aten.scalar_tensor.default", _scalar_tensor, "a constant (bool as 0/1 in the graph's float dtype)",
     refuse=_scalar_tensor_refuse)
aten("aten.masked_fill.Scalar", lambda ctx, x, mask, value: F.where(mask, value, x), "where(mask, value, x)")
aten("aten.masked_fill.Tensor", lambda ctx, x, mask, value: F.where(mask, value, x), "where(mask, value, x)")
aten("aten.logical_not.default", lambda ctx, m: 1.0 - m, "1 - m (0/1 masks)")
aten("aten.bitwise_not.default", lambda ctx, m: 1.0 - m, "1 - m (0/1 masks)")
aten("aten.logical_and.default", lambda ctx, a, b: a * b, "a * b (0/1 masks)")
aten("aten.bitwise_and.Tensor", lambda ctx, a, b: a * b, "a * b (0/1 masks)")
aten("aten.logical_or.default", lambda ctx, a, b: a + b - a * b, "a + b - a b (0/1 masks)")
aten("aten.bitwise_or.Tensor", lambda ctx, a, b: a + b - a * b, "a + b - a b (0/1 masks)")
aten("aten.clamp.default", _clamp, "where(x < min, min, x), then where(y > max, max, y)")
aten("aten.clamp.Tensor", _clamp, "where(x < min, min, x), then where(y > max, max, y)")
aten("aten.clamp_min.default", lambda ctx, x, lo: _clamp(ctx, x, lo, None), "where(x < min, min, x)")
aten("aten.clamp_max.default", lambda ctx, x, hi: _clamp(ctx, x, None, hi), "where(x > max, max, x)")
aten("aten.hardtanh.default", lambda ctx, x, lo=-1.0, hi=1.0: _clamp(ctx, x, float(lo), float(hi)),
     "clamp (ReLU6 is hardtanh(0, 6))")
aten("aten.relu6.default", lambda ctx, x: _clamp(ctx, x, 0.0, 6.0), "clamp(x, 0, 6)")
aten("aten.hardsigmoid.default", _hardsigmoid, "clamp(x + 3, 0, 6) / 6")
aten("aten.hardswish.default", lambda ctx, x: x * _hardsigmoid(ctx, x), "x * clamp(x + 3, 0, 6) / 6")
