"""ATen neural-network ops as accelsim ops (entries of ATEN_OPS): convolution, normalization, pooling, softmax,
embedding, attention and dropout (a seeded keep mask in training mode).

Batch norm follows the mode the module was exported in: training mode (batch statistics) is the registry's
batch_norm, eval mode batch_norm_inference with the running statistics as non-trainable parameters; the
running-statistics updates torch.export records as buffer mutations are not part of the graph. Multi-output
ATen ops return a tuple with None where accelsim has no tensor (saved mean, rstd, indices).
"""
from __future__ import annotations

import math
from typing import Any

from accelsim import ops as F
from accelsim.frontends.aten_registry import Args, Ctx, Kwargs, aten
from accelsim.ops.dropout_mask import check_dropout_p, dropout_mask, keep_mask


def _val(x: Any) -> Any:
    """The FakeTensor torch.export recorded for an FX argument (None for a non-node)."""
    return x.meta.get("val") if hasattr(x, "meta") else None


def _arg(args: Args, kwargs: Kwargs, k: int, key: str, default: Any) -> Any:
    return kwargs[key] if key in kwargs else (args[k] if len(args) > k else default)


def _conv_refuse(args: Args, kwargs: Kwargs) -> str | None:
    w = _val(args[1])
    if w is not None and w.dim() != 4:
        return f"a {w.dim() - 2}-D convolution (only 2-D)"
    return None


def _conv(ctx: Ctx, x: Any, w: Any, bias: Any, stride: Any, padding: Any, dilation: Any, transposed: bool,
          output_padding: Any, groups: int) -> Any:
    if transposed:
        y = _conv_transpose(x, w, stride, padding, dilation, output_padding, int(groups))
    else:
        y = F.conv2d(x, w, stride=tuple(stride), padding=tuple(padding), dilation=tuple(dilation),
                     groups=int(groups))
    return y if bias is None else y + F.reshape(bias, (1, bias.shape[0], 1, 1))


def _conv_transpose(x: Any, w: Any, stride: Any, padding: Any, dilation: Any, output_padding: Any,
                    groups: int) -> Any:
    """ConvTranspose2d: its output size is (H - 1) s - 2 p + d (k - 1) + output_padding + 1 per axis."""
    hw = tuple((x.shape[2 + i] - 1) * int(stride[i]) - 2 * int(padding[i]) + int(dilation[i]) * (w.shape[2 + i] - 1)
               + int(output_padding[i]) + 1 for i in range(2))
    return F.conv_transpose2d(x, w, (x.shape[0], w.shape[1] * groups) + hw, stride=tuple(stride),
                              padding=tuple(padding), dilation=tuple(dilation), groups=groups)


def _ones(ctx: Ctx, n: int) -> Any:
    return ctx.graph.const([1.0] * n)


def _zeros(ctx: Ctx, n: int) -> Any:
    return ctx.graph.const([0.0] * n)


def _affine(ctx: Ctx, x: Any, weight: Any, bias: Any, n: int) -> tuple[Any, Any]:
    """gamma, beta (constants one and zero where the module has no affine parameters)."""
    return (weight if weight is not None else _ones(ctx, n)), (bias if bias is not None else _zeros(ctx, n))


def _bn_train(ctx: Ctx, x: Any, weight: Any, bias: Any, eps: float) -> Any:
    gamma, beta = _affine(ctx, x, weight, bias, x.shape[1])
    return F.batch_norm(x, gamma, beta, eps=float(eps))


def _bn_functional(ctx: Ctx, x: Any, weight: Any, bias: Any, mean: Any, var: Any, training: bool,
                   momentum: float, eps: float) -> tuple[Any, ...]:
    if training:
        return (_bn_train(ctx, x, weight, bias, eps), None, None, None, None)
    return (_bn_eval(ctx, x, weight, bias, mean, var, momentum, eps)[0], None, None, None, None)


def _bn_legit(ctx: Ctx, x: Any, weight: Any, bias: Any, mean: Any, var: Any, training: bool,
              momentum: float, eps: float) -> tuple[Any, ...]:
    if training:
        return (_bn_train(ctx, x, weight, bias, eps), None, None)
    return _bn_eval(ctx, x, weight, bias, mean, var, momentum, eps)


def _bn_eval(ctx: Ctx, x: Any, weight: Any, bias: Any, mean: Any, var: Any, momentum: float,
             eps: float) -> tuple[Any, ...]:
    gamma, beta = _affine(ctx, x, weight, bias, x.shape[1])
    return (F.batch_norm_inference(x, gamma, beta, mean, var, eps=float(eps)), None, None)


def _layer_norm(ctx: Ctx, x: Any, normalized_shape: Any, weight: Any, bias: Any, eps: float) -> tuple[Any, ...]:
    """Layer norm over the last k axes is layer norm over them flattened into one (gamma, beta likewise)."""
    k = len(normalized_shape)
    n = math.prod(int(d) for d in normalized_shape)
    flat = x if k == 1 else F.reshape(x, x.shape[:-k] + (n,))
    gamma, beta = _affine(ctx, x, weight, bias, n)
    if k != 1:
        gamma, beta = F.reshape(gamma, (n,)), F.reshape(beta, (n,))
    y = F.layer_norm(flat, gamma, beta, eps=float(eps))
    return (y if k == 1 else F.reshape(y, x.shape), None, None)


def _max_pool_refuse(args: Args, kwargs: Kwargs) -> str | None:
    dilation = _arg(args, kwargs, 4, "dilation", [1, 1])
    if list(dilation) not in ([1, 1], [1]):
        return f"dilation={list(dilation)}"
    return "ceil_mode=True" if _arg(args, kwargs, 5, "ceil_mode", False) else None


def _max_pool(ctx: Ctx, x: Any, kernel: Any, stride: Any = (), padding: Any = 0, dilation: Any = 1,
              ceil_mode: bool = False) -> tuple[Any, None]:
    return (F.max_pool2d(x, tuple(kernel), tuple(stride) or None, tuple(padding) if padding != 0 else 0), None)


def _avg_pool_refuse(args: Args, kwargs: Kwargs) -> str | None:
    padding = _arg(args, kwargs, 3, "padding", [0, 0])
    if _arg(args, kwargs, 4, "ceil_mode", False):
        return "ceil_mode=True"
    if not _arg(args, kwargs, 5, "count_include_pad", True) and any(int(p) for p in padding):
        return "count_include_pad=False with padding"
    return "divisor_override" if _arg(args, kwargs, 6, "divisor_override", None) is not None else None


def _avg_pool(ctx: Ctx, x: Any, kernel: Any, stride: Any = (), padding: Any = (0, 0), ceil_mode: bool = False,
              count_include_pad: bool = True, divisor_override: Any = None) -> Any:
    return F.avg_pool2d(x, tuple(kernel), tuple(stride) or None, tuple(padding))


def _adaptive_refuse(args: Args, kwargs: Kwargs) -> str | None:
    x, out = _val(args[0]), [int(s) for s in args[1]]
    if x is not None and any(int(i) % o for i, o in zip(x.shape[-2:], out)):
        return f"output size {out} that does not divide the input's {list(x.shape[-2:])}"
    return None


def _adaptive_avg_pool(ctx: Ctx, x: Any, output_size: Any) -> Any:
    """A 1x1 output is the mean over H and W; an output dividing the input is an average pool."""
    out = tuple(int(s) for s in output_size)
    if out == (1, 1):
        return F.mean(x, (2, 3), keepdims=True)
    kernel = (x.shape[2] // out[0], x.shape[3] // out[1])
    return F.avg_pool2d(x, kernel, kernel)


def _softmax(ctx: Ctx, x: Any, dim: int, half_to_float: bool = False) -> Any:
    return F.softmax(x, int(dim))


def _log_softmax(ctx: Ctx, x: Any, dim: int, half_to_float: bool = False) -> Any:
    return F.log_softmax(x, int(dim))


def _embedding_refuse(args: Args, kwargs: Kwargs) -> str | None:
    if _arg(args, kwargs, 2, "padding_idx", -1) != -1:
        return "padding_idx (its row's gradient is zeroed; accelsim's embedding has no such row)"
    if _arg(args, kwargs, 3, "scale_grad_by_freq", False) or _arg(args, kwargs, 4, "sparse", False):
        return "scale_grad_by_freq or sparse gradients"
    ids = _val(args[1])
    return "indices of more than one axis" if ids is not None and ids.dim() != 1 and ids.dim() != 2 else None


def _embedding(ctx: Ctx, weight: Any, ids: Any, padding_idx: int = -1, scale_grad_by_freq: bool = False,
               sparse: bool = False) -> Any:
    if ids.ndim == 1:
        return F.embedding(ids, weight)
    flat = F.embedding(F.reshape(ids, (-1,)), weight)
    return F.reshape(flat, ids.shape + (weight.shape[1],))


def _sdpa_refuse(args: Args, kwargs: Kwargs) -> str | None:
    if _arg(args, kwargs, 3, "attn_mask", None) is not None:
        return "an attn_mask tensor (use is_causal=True for a causal mask)"
    dropout_p = _arg(args, kwargs, 4, "dropout_p", 0.0)
    if dropout_p != 0.0 and check_dropout_p(dropout_p) is not None:
        return f"attention {check_dropout_p(dropout_p)}"
    if kwargs.get("enable_gqa", False):
        return "enable_gqa=True"
    q, k = _val(args[0]), _val(args[1])
    if _arg(args, kwargs, 5, "is_causal", False) and q is not None and k is not None and q.shape[-2] != k.shape[-2]:
        return "is_causal with different query and key lengths"
    return None


def _sdpa(ctx: Ctx, q: Any, k: Any, v: Any, attn_mask: Any = None, dropout_p: float = 0.0, is_causal: bool = False,
          scale: float | None = None, enable_gqa: bool = False) -> Any:
    """softmax(q k^T * scale [causal mask]) [* dropout mask] v, scale = 1/sqrt(head size) by default; dropout_p > 0
    (training mode) multiplies the attention probabilities by a seeded keep mask / (1 - p), as torch's math
    kernel drops them."""
    s = F.matmul(q, k, transpose_b=True) * (scale if scale is not None else 1.0 / math.sqrt(q.shape[-1]))
    if is_causal:
        s = F.causal_mask(s)
    return F.matmul(_dropout(ctx, F.softmax(s, -1), dropout_p, True), v)


def _dropout_refuse(args: Args, kwargs: Kwargs) -> str | None:
    p, train = _arg(args, kwargs, 1, "p", 0.5), _arg(args, kwargs, 2, "train", True)
    return check_dropout_p(p) if train else None


def _dropout(ctx: Ctx, x: Any, p: float, train: bool | None) -> Any:
    """Inverted dropout: x times a keep mask scaled by 1/(1 - p), drawn from (graph seed, the dropout's ordinal
    among the graph's draws) and held as a constant; the identity in eval mode or at p = 0."""
    if not train or not p:
        return x
    mask = dropout_mask(ctx.graph.seed, len(ctx.graph.nodes), tuple(x.shape), float(p), x.dtype,
                        key=next(ctx.draws))
    return x * ctx.graph.const(mask, x.dtype)


def _bernoulli_refuse(args: Args, kwargs: Kwargs) -> str | None:
    keep = _arg(args, kwargs, 1, "p", 0.5)
    if isinstance(keep, bool) or not isinstance(keep, (int, float)) or not 0.0 <= keep <= 1.0:  # NaN fails too
        return f"p={keep!r} (expected a probability in [0, 1])"
    return "a generator argument (accelsim draws from the graph's seed)" if kwargs.get("generator") else None


def _bernoulli(ctx: Ctx, x: Any, p: float, generator: Any = None) -> Any:
    """bernoulli(x, p), as an in-place dropout decomposes: a 0/1 mask of x's shape drawn from (graph seed, the
    draw's ordinal), held as a constant."""
    mask = keep_mask(ctx.graph.seed, len(ctx.graph.nodes), tuple(x.shape), float(p), ctx.graph.dtype,
                     key=next(ctx.draws))
    return ctx.graph.const(mask, ctx.graph.dtype)


aten("aten.convolution.default", _conv, "conv2d (or conv_transpose2d) + bias add", refuse=_conv_refuse)
aten("aten._native_batch_norm_legit_functional.default", _bn_functional,
     "batch_norm (training mode) or batch_norm_inference (eval mode)")
aten("aten._native_batch_norm_legit.default", _bn_legit, "batch_norm or batch_norm_inference")
aten("aten._native_batch_norm_legit.no_stats",
     lambda ctx, x, w, b, training, momentum, eps: (_bn_train(ctx, x, w, b, eps), None, None), "batch_norm")
aten("aten._native_batch_norm_legit_no_training.default", _bn_eval, "batch_norm_inference")
aten("aten.native_layer_norm.default", _layer_norm, "layer_norm (over the trailing axes flattened)")
aten("aten.max_pool2d_with_indices.default", _max_pool, "max_pool2d", refuse=_max_pool_refuse)
aten("aten.avg_pool2d.default", _avg_pool, "avg_pool2d", refuse=_avg_pool_refuse)
aten("aten._adaptive_avg_pool2d.default", _adaptive_avg_pool, "mean over H, W (1x1) or avg_pool2d",
     refuse=_adaptive_refuse)
aten("aten.adaptive_avg_pool2d.default", _adaptive_avg_pool, "mean over H, W (1x1) or avg_pool2d",
     refuse=_adaptive_refuse)
aten("aten._softmax.default", _softmax, "softmax")
aten("aten.softmax.int", lambda ctx, x, dim, dtype=None: F.softmax(x, int(dim)), "softmax")
aten("aten._log_softmax.default", _log_softmax, "log_softmax")
aten("aten.embedding.default", _embedding, "embedding", refuse=_embedding_refuse)
aten("aten.scaled_dot_product_attention.default", _sdpa,
     "matmul, scale, [causal_mask], softmax, [mul by a seeded dropout mask], matmul",
     refuse=_sdpa_refuse)
aten("aten.native_dropout.default", lambda ctx, x, p, train: (_dropout(ctx, x, p, train), None),
     "mul by a seeded keep mask / (1 - p) (identity in eval mode or at p=0)", refuse=_dropout_refuse)
aten("aten.bernoulli.p", _bernoulli, "a seeded 0/1 keep mask (a constant)", refuse=_bernoulli_refuse)
aten("aten.dropout.default", _dropout, "mul by a seeded keep mask / (1 - p) (identity in eval mode or at p=0)",
     refuse=_dropout_refuse)
