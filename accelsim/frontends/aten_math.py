"""ATen arithmetic, activations, reductions and matrix products as accelsim ops (entries of ATEN_OPS).

Every converter decomposes into registry ops, so imported graphs differentiate, cost and execute exactly like
zoo graphs: addmm is matmul + add, rsqrt is 1 / sqrt, silu is x * sigmoid(x), leaky_relu is two relus.
"""
from __future__ import annotations

import math
from typing import Any

from accelsim import ops as F
from accelsim.frontends.aten_registry import Args, Ctx, Kwargs, aten


SQRT_HALF = 1.0 / math.sqrt(2.0)


def _scaled(x: Any, alpha: Any) -> Any:
    return x if alpha == 1 else x * alpha


def _add(ctx: Ctx, a: Any, b: Any, alpha: Any = 1) -> Any:
    return F.add(a, _scaled(b, alpha))


def _sub(ctx: Ctx, a: Any, b: Any, alpha: Any = 1) -> Any:
    return F.sub(a, _scaled(b, alpha))


def _rsub(ctx: Ctx, a: Any, b: Any, alpha: Any = 1) -> Any:
    return F.sub(b, _scaled(a, alpha))


def _product(ctx: Ctx, a: Any, b: Any) -> Any:
    """a @ b; a transpose feeding b (torch's linear lowers to addmm(bias, x, permute(W))) becomes the matmul's
    transpose_b, as the zoo's layers write it, so no transpose node is left in the graph."""
    node = b.node
    if node.op == "transpose" and node.attrs["axes"] == (1, 0):
        return F.matmul(a, ctx.graph.var(node.inputs[0]), transpose_b=True)
    return F.matmul(a, b)


def _addmm(ctx: Ctx, bias: Any, a: Any, b: Any, beta: Any = 1, alpha: Any = 1) -> Any:
    return F.add(_scaled(_product(ctx, a, b), alpha), _scaled(bias, beta))


def _gelu_refuse(args: Args, kwargs: Kwargs) -> str | None:
    approximate = kwargs.get("approximate", args[1] if len(args) > 1 else "none")
    if approximate not in ("none", "tanh"):
        return f"approximate={approximate!r} (expected 'none' or 'tanh')"
    return None


def _gelu(ctx: Ctx, x: Any, approximate: str = "none") -> Any:
    """The registry's gelu is the tanh approximation; exact GELU (nn.GELU()'s default) is x/2 (1 + erf(x/sqrt 2))."""
    if approximate == "tanh":
        return F.gelu(x)
    return x * 0.5 * (F.erf(x * SQRT_HALF) + 1.0)


def _dims(x: Any, dims: Any) -> tuple[int, ...] | None:
    """ATen's dim list (None or [] for every axis) as reduction axes."""
    if dims is None or (isinstance(dims, (list, tuple)) and len(dims) == 0):
        return None
    return tuple(int(d) for d in (dims if isinstance(dims, (list, tuple)) else [dims]))


def _dtype_refuse(args: Args, kwargs: Kwargs) -> str | None:
    return f"dtype={kwargs['dtype']} (a reduction that casts)" if kwargs.get("dtype") is not None else None


def _leaky_relu(ctx: Ctx, x: Any, slope: float = 0.01) -> Any:
    return F.relu(x) - F.relu(-x) * float(slope)


aten("aten.add.Tensor", _add, "a + alpha * b")
aten("aten.add.Scalar", _add, "a + alpha * b")
aten("aten.sub.Tensor", _sub, "a - alpha * b")
aten("aten.sub.Scalar", _sub, "a - alpha * b")
aten("aten.rsub.Scalar", _rsub, "b - alpha * a")
aten("aten.rsub.Tensor", _rsub, "b - alpha * a")
aten("aten.mul.Tensor", lambda ctx, a, b: F.mul(a, b), "mul")
aten("aten.mul.Scalar", lambda ctx, a, b: F.mul(a, b), "mul")
aten("aten.div.Tensor", lambda ctx, a, b: F.div(a, b), "div",
     refuse=lambda args, kw: f"rounding_mode={kw['rounding_mode']!r}" if kw.get("rounding_mode") else None)
aten("aten.div.Scalar", lambda ctx, a, b: F.div(a, b), "div")
aten("aten.neg.default", lambda ctx, x: F.neg(x), "neg")
aten("aten.exp.default", lambda ctx, x: F.exp(x), "exp")
aten("aten.log.default", lambda ctx, x: F.log(x), "log")
aten("aten.sin.default", lambda ctx, x: F.sin(x), "sin")
aten("aten.cos.default", lambda ctx, x: F.cos(x), "cos")
aten("aten.sqrt.default", lambda ctx, x: F.sqrt(x), "sqrt")
aten("aten.rsqrt.default", lambda ctx, x: F.div(1.0, F.sqrt(x)), "1 / sqrt(x)")
aten("aten.reciprocal.default", lambda ctx, x: F.div(1.0, x), "1 / x")
aten("aten.pow.Tensor_Scalar", lambda ctx, x, e: F.pow(x, float(e)), "pow (square for 2)")
aten("aten.relu.default", lambda ctx, x: F.relu(x), "relu")
aten("aten.sigmoid.default", lambda ctx, x: F.sigmoid(x), "sigmoid")
aten("aten.tanh.default", lambda ctx, x: F.tanh(x), "tanh")
aten("aten.silu.default", lambda ctx, x: x * F.sigmoid(x), "x * sigmoid(x)")
aten("aten.leaky_relu.default", _leaky_relu, "relu(x) - slope * relu(-x)")
aten("aten.abs.default", lambda ctx, x: F.relu(x) + F.relu(-x), "relu(x) + relu(-x)")
aten("aten.gelu.default", _gelu, "gelu (tanh), or x/2 (1 + erf(x/sqrt 2)) (exact)", refuse=_gelu_refuse)
aten("aten.erf.default", lambda ctx, x: F.erf(x), "erf")

aten("aten.mean.dim", lambda ctx, x, dims, keepdim=False, dtype=None: F.mean(x, _dims(x, dims), keepdim),
     "mean", refuse=_dtype_refuse)
aten("aten.mean.default", lambda ctx, x, dtype=None: F.mean(x), "mean", refuse=_dtype_refuse)
aten("aten.sum.dim_IntList", lambda ctx, x, dims, keepdim=False, dtype=None: F.sum(x, _dims(x, dims), keepdim),
     "sum", refuse=_dtype_refuse)
aten("aten.sum.default", lambda ctx, x, dtype=None: F.sum(x), "sum", refuse=_dtype_refuse)
aten("aten.amax.default", lambda ctx, x, dims=(), keepdim=False: F.max(x, _dims(x, dims), keepdim), "max")

aten("aten.mm.default", _product, "matmul")
aten("aten.bmm.default", _product, "matmul (batched)")
aten("aten.addmm.default", _addmm, "matmul + add (beta, alpha as multiplies)")
