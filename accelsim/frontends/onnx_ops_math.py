"""Converters of ONNX's arithmetic: elementwise ops, MatMul and Gemm, reductions, softmax, layer
norm, Erf and Gelu (ONNX node -> registry ops)."""
from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from accelsim import ops as F
from accelsim.frontends.onnx_context import ImportContext, Value
from accelsim.frontends.onnx_opdef import OnnxOpDef
from accelsim.graph.ir import Var

def _binary(fn: Callable[[Any, Any], Var]) -> Callable[[ImportContext], list[Value]]:
    return lambda ctx: [fn(ctx.tensor(0), ctx.tensor(1))]


def _unary(fn: Callable[[Var], Var]) -> Callable[[ImportContext], list[Value]]:
    return lambda ctx: [fn(ctx.tensor(0))]


def erf(x: Var) -> Var:
    return F.erf(x)  # the registry's erf op (libm's in every kernel)


def _gelu(ctx: ImportContext) -> list[Value]:
    x = ctx.tensor(0)
    approximate = ctx.attr("approximate", "none")
    if approximate == "tanh":
        return [F.gelu(x)]  # the registry's gelu is exactly the tanh approximation
    if approximate != "none":
        raise ctx.unsupported(f"approximate={approximate!r} (expected 'none' or 'tanh')")
    return [x * 0.5 * (erf(x * (1.0 / math.sqrt(2.0))) + 1.0)]


def _pow(ctx: ImportContext) -> list[Value]:
    exponent = np.asarray(ctx.static(1, "the exponent"))
    if exponent.size != 1:
        raise ctx.unsupported(f"the exponent has shape {exponent.shape}; only a scalar exponent is supported")
    return [F.pow(ctx.tensor(0), float(exponent.reshape(-1)[0]))]


def _abs(ctx: ImportContext) -> list[Value]:
    x = ctx.tensor(0)
    return [F.relu(x) + F.relu(F.neg(x))]


def _matmul(ctx: ImportContext) -> list[Value]:
    """numpy matmul semantics: 1-D operands gain and lose an axis, batch axes broadcast."""
    a, b = ctx.tensor(0), ctx.tensor(1)
    squeeze_rows, squeeze_cols = a.ndim == 1, b.ndim == 1
    if squeeze_rows:
        a = F.reshape(a, (1, a.shape[0]))
    if squeeze_cols:
        b = F.reshape(b, (b.shape[0], 1))
    if a.ndim > 2 and b.ndim > 2 and a.shape[:-2] != b.shape[:-2]:
        batch = tuple(np.broadcast_shapes(a.shape[:-2], b.shape[:-2]))
        a, b = F.broadcast_to(a, batch + a.shape[-2:]), F.broadcast_to(b, batch + b.shape[-2:])
    y = F.matmul(a, b)
    if squeeze_rows or squeeze_cols:
        shape = y.shape[:-2] + (() if squeeze_rows else y.shape[-2:-1]) + (() if squeeze_cols else y.shape[-1:])
        y = F.reshape(y, shape)
    return [y]


def _gemm(ctx: ImportContext) -> list[Value]:
    a, b = ctx.tensor(0), ctx.tensor(1)
    y = F.matmul(a, b, transpose_a=bool(ctx.attr("transA", 0)), transpose_b=bool(ctx.attr("transB", 0)))
    alpha, beta = float(ctx.attr("alpha", 1.0)), float(ctx.attr("beta", 1.0))
    if alpha != 1.0:
        y = y * alpha
    if ctx.has(2) and beta != 0.0:
        c = ctx.tensor(2)
        y = y + (c * beta if beta != 1.0 else c)
    return [y]


def _softmax(fn: Callable[[Var, int], Var]) -> Callable[[ImportContext], list[Value]]:
    return lambda ctx: [fn(ctx.tensor(0), int(ctx.attr("axis", -1)))]


def _reduce(fn: Callable[..., Var], axes_input_since: int) -> Callable[[ImportContext], list[Value]]:
    """Reduce* ops: axes are an input from `axes_input_since` on (13 for ReduceSum, 18 for the others),
    an attribute before; no axes reduces all of them unless noop_with_empty_axes."""
    def convert(ctx: ImportContext) -> list[Value]:
        x = ctx.tensor(0)
        if ctx.opset >= axes_input_since:
            axes = ctx.static_ints(1, "the axes") if ctx.has(1) else []
        else:
            axes = list(ctx.attr("axes", []))
        if not axes and ctx.attr("noop_with_empty_axes", 0):
            return [x]
        keepdims = bool(ctx.attr("keepdims", 1))
        return [fn(x, tuple(axes) if axes else None, keepdims)]
    return convert


def _layer_norm(ctx: ImportContext) -> list[Value]:
    """Over axes axis..rank-1: the registry's last-axis layer_norm, on a reshaped view when more than
    one axis is normalized."""
    if any(ctx.node.output[1:]):
        raise ctx.unsupported("its Mean and InvStdDev outputs are used; only the normalized output is supported")
    x, scale = ctx.tensor(0), ctx.tensor(1)
    axis = int(ctx.attr("axis", -1)) % max(x.ndim, 1)
    inner = x.shape[axis:]
    width = math.prod(inner)
    bias = ctx.tensor(2) if ctx.has(2) else x.graph.const(np.zeros(inner))
    if tuple(scale.shape) != inner or tuple(bias.shape) != inner:
        raise ctx.unsupported(f"scale {scale.shape} and bias {bias.shape} must have the normalized shape {inner} "
                              "(broadcast scales are not supported)")
    eps = float(ctx.attr("epsilon", 1e-5))
    if len(inner) == 1:
        return [F.layer_norm(x, scale, bias, eps)]
    flat = F.layer_norm(F.reshape(x, x.shape[:axis] + (width,)), F.reshape(scale, (width,)),
                        F.reshape(bias, (width,)), eps)
    return [F.reshape(flat, x.shape)]


MATH_OPS: tuple[OnnxOpDef, ...] = (
    OnnxOpDef("Add", _binary(F.add), "add (numpy broadcasting)"),
    OnnxOpDef("Sub", _binary(F.sub), "sub"),
    OnnxOpDef("Mul", _binary(F.mul), "mul"),
    OnnxOpDef("Div", _binary(F.div), "div"),
    OnnxOpDef("Pow", _pow, "pow with a constant scalar exponent (square for 2)"),
    OnnxOpDef("Sqrt", _unary(F.sqrt), "sqrt"),
    OnnxOpDef("Reciprocal", _unary(lambda x: 1.0 / x), "div of a constant 1"),
    OnnxOpDef("Neg", _unary(F.neg), "neg"),
    OnnxOpDef("Abs", _abs, "relu(x) + relu(-x)"),
    OnnxOpDef("Exp", _unary(F.exp), "exp"),
    OnnxOpDef("Log", _unary(F.log), "log"),
    OnnxOpDef("Sin", _unary(F.sin), "sin"),
    OnnxOpDef("Cos", _unary(F.cos), "cos"),
    OnnxOpDef("Relu", _unary(F.relu), "relu"),
    OnnxOpDef("Sigmoid", _unary(F.sigmoid), "sigmoid"),
    OnnxOpDef("Tanh", _unary(F.tanh), "tanh"),
    OnnxOpDef("Erf", _unary(erf), "erf"),
    OnnxOpDef("Gelu", _gelu, "approximate='tanh': gelu; 'none': x/2 (1 + erf(x/sqrt 2))"),
    OnnxOpDef("MatMul", _matmul, "matmul; 1-D operands reshaped, batch axes broadcast"),
    OnnxOpDef("Gemm", _gemm, "matmul with transposes, then mul by alpha and add of beta*C"),
    OnnxOpDef("Softmax", _softmax(F.softmax), "softmax along one axis (opset >= 13)"),
    OnnxOpDef("LogSoftmax", _softmax(F.log_softmax), "log_softmax along one axis (opset >= 13)"),
    OnnxOpDef("ReduceMean", _reduce(F.mean, 18), "mean"),
    OnnxOpDef("ReduceSum", _reduce(F.sum, 13), "sum"),
    OnnxOpDef("ReduceMax", _reduce(F.max, 18), "max"),
    OnnxOpDef("LayerNormalization", _layer_norm, "layer_norm over the trailing axes (reshaped when several)"),
)
