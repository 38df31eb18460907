"""Normalization ops: batch norm (training and inference) and layer norm, with their backward helpers.

Training-mode norms get fused backward-only ops for d/dx and d/dgamma rather than a long chain of
elementwise nodes. An op whose output needs a reduction first declares its `Passes`: batch norm reduces over
the whole input, so a chip that cannot hold it on chip reads it once per phase; layer norm reduces one row.

How the GPU kernels are structured (PyTorch's aten/src/ATen/native/cuda/Normalization.cu): batch norm's training
forward runs `batch_norm_mean_var` (a statistics kernel reading x) and then `batch_norm_elementwise` (reading x
again to normalize); its backward runs `batch_norm_backward_reduce` (sum dy and sum dy * (x - mean), reading dy
and x) and then `batch_norm_elementwise_backward_train` (reading dy and x again for dx). Layer norm's forward,
`vectorized_layer_norm_kernel` in layer_norm_kernel.cu, reduces and normalizes one row inside one thread block.
"""
from __future__ import annotations

import builtins
from typing import Any

import numpy as np

from accelsim.errors import ShapeError
from accelsim.ops.elementwise import sqrt
from accelsim.ops.reduce import reshape, sum, sum_to
from accelsim.ops.registry import Example, OpDef, Passes, Shape, apply, numel, register

__all__ = ["batch_norm", "batch_norm_inference", "layer_norm"]


# ---- builders -------------------------------------------------------------------------

def batch_norm(x: Any, gamma: Any, beta: Any, eps: float = 1e-5) -> Any:
    """Training-mode batch norm of x (N, C, ...) with batch statistics over every axis but 1."""
    return apply("batch_norm", x, gamma, beta, eps=float(eps))


def batch_norm_inference(x: Any, gamma: Any, beta: Any, mean: Any, var: Any, eps: float = 1e-5) -> Any:
    """Inference-mode batch norm with given per-channel mean and var, each (C,)."""
    return apply("batch_norm_inference", x, gamma, beta, mean, var, eps=float(eps))


def layer_norm(x: Any, gamma: Any, beta: Any, eps: float = 1e-5) -> Any:
    """Layer norm over the last axis of x (..., D); gamma and beta are (D,)."""
    return apply("layer_norm", x, gamma, beta, eps=float(eps))


# ---- shared helpers -------------------------------------------------------------------

def _bn_axes(ndim: int) -> tuple[int, ...]:
    """The statistics axes of batch norm: all but the channel axis 1."""
    return (0,) + tuple(range(2, ndim))


def _per_channel_shape(ndim: int, c: int) -> Shape:
    """(C, 1, ..., 1): a per-channel vector that numpy-broadcasts against x (N, C, ...)."""
    return (c,) + (1,) * (ndim - 2)


def _check_bn_input(x: Shape) -> None:
    if len(x) < 2:
        raise ShapeError(f"batch norm needs x of rank >= 2 (N, C, ...), got {x}")


def _check_vectors(x: Shape, axis_size: int, what: str, **vectors: Shape) -> None:
    for name, s in vectors.items():
        if s != (axis_size,):
            raise ShapeError(f"{name} must have shape ({axis_size},) to match the {what} of x {x}, got {s}")


def _normalize(x: np.ndarray, axes: tuple[int, ...], eps: float) -> tuple[np.ndarray, np.ndarray]:
    """(xhat, 1/std) with biased variance over `axes`, keepdims."""
    mu = x.mean(axis=axes, keepdims=True)
    inv_std = 1.0 / np.sqrt(x.var(axis=axes, keepdims=True) + eps)
    return (x - mu) * inv_std, inv_std


def _norm_grad_input(g: np.ndarray, x: np.ndarray, gamma_b: np.ndarray, axes: tuple[int, ...],
                     eps: float) -> np.ndarray:
    """d/dx of gamma * xhat(x) + beta, where xhat standardizes over `axes`."""
    xhat, inv_std = _normalize(x, axes, eps)
    m = numel(tuple(x.shape[a] for a in axes))
    dxhat = g * gamma_b
    return inv_std * (dxhat - dxhat.mean(axis=axes, keepdims=True)
                      - xhat * (dxhat * xhat).sum(axis=axes, keepdims=True) / m)


# ---- batch_norm (training) ------------------------------------------------------------

def _bn_infer(x: Shape, gamma: Shape, beta: Shape, eps: float) -> Shape:
    _check_bn_input(x)
    _check_vectors(x, x[1], "channel axis 1", gamma=gamma, beta=beta)
    return x


def _bn_ref(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float) -> np.ndarray:
    xhat, _ = _normalize(x, _bn_axes(x.ndim), eps)
    shape = _per_channel_shape(x.ndim, x.shape[1])
    return xhat * gamma.reshape(shape) + beta.reshape(shape)


def _bn_grad(g: Any, out: Any, x: Any, gamma: Any, beta: Any, eps: float) -> tuple[Any, Any, Any]:
    return (apply("batch_norm_grad_input", g, x, gamma, eps=eps),
            apply("batch_norm_grad_gamma", g, x, eps=eps),
            sum(g, _bn_axes(x.ndim)))


def _bn_grad_input_infer(g: Shape, x: Shape, gamma: Shape, eps: float) -> Shape:
    _check_bn_input(x)
    if g != x:
        raise ShapeError(f"g {g} must have the shape of x {x}")
    _check_vectors(x, x[1], "channel axis 1", gamma=gamma)
    return x


def _bn_grad_input_ref(g: np.ndarray, x: np.ndarray, gamma: np.ndarray, eps: float) -> np.ndarray:
    return _norm_grad_input(g, x, gamma.reshape(_per_channel_shape(x.ndim, x.shape[1])), _bn_axes(x.ndim), eps)


def _bn_grad_gamma_infer(g: Shape, x: Shape, eps: float) -> Shape:
    _check_bn_input(x)
    if g != x:
        raise ShapeError(f"g {g} must have the shape of x {x}")
    return (x[1],)


def _bn_grad_gamma_ref(g: np.ndarray, x: np.ndarray, eps: float) -> np.ndarray:
    xhat, _ = _normalize(x, _bn_axes(x.ndim), eps)
    return (g * xhat).sum(axis=_bn_axes(x.ndim))


def _whole_input_passes(*read: Shape) -> Passes:
    """Batch norm: every output waits for per-channel statistics over N and the spatial axes, so the span a
    later phase re-reads is the whole of the tensors read (x; dy and x for d/dx)."""
    elems = builtins.sum(numel(s) for s in read)
    return Passes(phases=2, reread_elems=elems, span_elems=elems)


def _row_passes(*read: Shape) -> Passes:
    """Layer norm: a row's statistics wait for that row only, so one row of each tensor read must stay on chip."""
    return Passes(phases=2, reread_elems=builtins.sum(numel(s) for s in read),
                  span_elems=builtins.sum(s[-1] for s in read))


def _bn_examples(rng: np.random.Generator) -> list[Example]:
    cases = []
    for shape in ((4, 3), (2, 3, 2, 2)):
        c = shape[1]
        cases.append(((rng.normal(size=shape), rng.uniform(0.5, 1.5, size=c), rng.normal(size=c)), {"eps": 1e-5}))
    return cases


def _bn_backward_examples(rng: np.random.Generator) -> list[Example]:
    x = rng.normal(size=(2, 3, 2, 2))
    return [((rng.normal(size=x.shape), x, rng.uniform(0.5, 1.5, size=3)), {"eps": 1e-5})]


register(OpDef(
    "batch_norm", "reduction", infer=_bn_infer, ref=_bn_ref, grad=_bn_grad, examples=_bn_examples,
    flops=lambda out, x, *ins, **a: 8 * numel(x),  # mean, var, normalize, scale and shift
    passes=lambda out, x, *ins, **a: _whole_input_passes(x),  # statistics, then normalize
    doc="training-mode batch norm: batch mean and biased variance over all axes but 1"))
register(OpDef(
    "batch_norm_grad_input", "reduction", infer=_bn_grad_input_infer, ref=_bn_grad_input_ref,
    flops=lambda out, g, x, *ins, **a: 12 * numel(x), backward_only=True, examples=_bn_backward_examples,
    passes=lambda out, g, x, *ins, **a: _whole_input_passes(g, x),  # sums of dy and dy * xhat, then dx
    doc="d batch_norm / dx, recomputing the batch statistics from x"))
register(OpDef(
    "batch_norm_grad_gamma", "reduction", infer=_bn_grad_gamma_infer, ref=_bn_grad_gamma_ref,
    flops=lambda out, g, x, **a: 7 * numel(x), backward_only=True,
    examples=lambda rng: [(ins[:2], attrs) for ins, attrs in _bn_backward_examples(rng)],
    doc="sum of g * xhat over every axis but the channel axis 1"))


# ---- batch_norm_inference -------------------------------------------------------------

def _bni_infer(x: Shape, gamma: Shape, beta: Shape, mean: Shape, var: Shape, eps: float) -> Shape:
    _check_bn_input(x)
    _check_vectors(x, x[1], "channel axis 1", gamma=gamma, beta=beta, mean=mean, var=var)
    return x


def _bni_ref(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, mean: np.ndarray, var: np.ndarray,
             eps: float) -> np.ndarray:
    shape = _per_channel_shape(x.ndim, x.shape[1])
    scale = gamma / np.sqrt(var + eps)
    return (x - mean.reshape(shape)) * scale.reshape(shape) + beta.reshape(shape)


def _bni_grad(g: Any, out: Any, x: Any, gamma: Any, beta: Any, mean: Any, var: Any,
              eps: float) -> tuple[Any, ...]:
    """y = (x - mean) * gamma / sqrt(var + eps) + beta, differentiated by hand per input."""
    axes, shape = _bn_axes(x.ndim), _per_channel_shape(x.ndim, x.shape[1])
    var_eps = var + eps
    scale = gamma / sqrt(var_eps)
    dbeta = sum(g, axes)
    dgamma = sum(g * (x - reshape(mean, shape)), axes) / sqrt(var_eps)
    return (g * reshape(scale, shape), dgamma, dbeta, -(dbeta * scale), dgamma * gamma / var_eps * -0.5)


def _bni_examples(rng: np.random.Generator) -> list[Example]:
    cases = []
    for shape in ((4, 3), (2, 3, 2, 2)):
        c = shape[1]
        cases.append(((rng.normal(size=shape), rng.uniform(0.5, 1.5, size=c), rng.normal(size=c),
                       rng.normal(size=c), rng.uniform(0.5, 2.0, size=c)), {"eps": 1e-5}))
    return cases


register(OpDef(
    "batch_norm_inference", "elementwise", infer=_bni_infer, ref=_bni_ref, grad=_bni_grad,
    examples=_bni_examples, flops=lambda out, x, *ins, **a: 2 * numel(x),  # scale and shift folded
    doc="inference-mode batch norm with given per-channel mean and var"))


# ---- layer_norm -----------------------------------------------------------------------

def _check_ln_input(x: Shape) -> None:
    if len(x) < 1:
        raise ShapeError("layer norm needs x of rank >= 1, got a scalar")


def _ln_infer(x: Shape, gamma: Shape, beta: Shape, eps: float) -> Shape:
    _check_ln_input(x)
    _check_vectors(x, x[-1], "last axis", gamma=gamma, beta=beta)
    return x


def _ln_ref(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float) -> np.ndarray:
    xhat, _ = _normalize(x, (x.ndim - 1,), eps)
    return xhat * gamma + beta


def _ln_grad(g: Any, out: Any, x: Any, gamma: Any, beta: Any, eps: float) -> tuple[Any, Any, Any]:
    return (apply("layer_norm_grad_input", g, x, gamma, eps=eps),
            apply("layer_norm_grad_gamma", g, x, eps=eps),
            sum_to(g, beta.shape))


def _ln_grad_input_infer(g: Shape, x: Shape, gamma: Shape, eps: float) -> Shape:
    _check_ln_input(x)
    if g != x:
        raise ShapeError(f"g {g} must have the shape of x {x}")
    _check_vectors(x, x[-1], "last axis", gamma=gamma)
    return x


def _ln_grad_gamma_infer(g: Shape, x: Shape, eps: float) -> Shape:
    _check_ln_input(x)
    if g != x:
        raise ShapeError(f"g {g} must have the shape of x {x}")
    return x[-1:]


def _ln_grad_gamma_ref(g: np.ndarray, x: np.ndarray, eps: float) -> np.ndarray:
    xhat, _ = _normalize(x, (x.ndim - 1,), eps)
    return (g * xhat).reshape(-1, x.shape[-1]).sum(axis=0)


def _ln_examples(rng: np.random.Generator) -> list[Example]:
    cases = []
    for shape in ((5,), (3, 4), (2, 3, 4)):
        d = shape[-1]
        cases.append(((rng.normal(size=shape), rng.uniform(0.5, 1.5, size=d), rng.normal(size=d)), {"eps": 1e-5}))
    return cases


def _ln_backward_examples(rng: np.random.Generator) -> list[Example]:
    x = rng.normal(size=(2, 3, 4))
    return [((rng.normal(size=x.shape), x, rng.uniform(0.5, 1.5, size=4)), {"eps": 1e-5})]


register(OpDef(
    "layer_norm", "reduction", infer=_ln_infer, ref=_ln_ref, grad=_ln_grad, examples=_ln_examples,
    flops=lambda out, x, *ins, **a: 8 * numel(x), passes=lambda out, x, *ins, **a: _row_passes(x),
    doc="layer norm over the last axis"))
register(OpDef(
    "layer_norm_grad_input", "reduction", infer=_ln_grad_input_infer,
    ref=lambda g, x, gamma, eps: _norm_grad_input(g, x, gamma, (x.ndim - 1,), eps),
    flops=lambda out, g, x, *ins, **a: 12 * numel(x), backward_only=True, examples=_ln_backward_examples,
    passes=lambda out, g, x, *ins, **a: _row_passes(g, x),
    doc="d layer_norm / dx, recomputing the row statistics from x"))
register(OpDef(
    "layer_norm_grad_gamma", "reduction", infer=_ln_grad_gamma_infer, ref=_ln_grad_gamma_ref,
    flops=lambda out, g, x, **a: 7 * numel(x), backward_only=True,
    examples=lambda rng: [(ins[:2], attrs) for ins, attrs in _ln_backward_examples(rng)],
    doc="sum of g * xhat over every axis but the last"))
