"""ATen group norm and 2-D upsampling as accelsim ops (entries of ATEN_OPS), each an exact composition:

- group norm is layer norm over each group's channels and pixels flattened, then the per-channel affine;
- nearest upsampling by an integer factor repeats each pixel: reshape, broadcast_to, reshape;
- bilinear upsampling (align_corners False or True) is linear along each axis: two matmuls with constant
  interpolation matrices, A_h @ x @ A_w^T, so its gradient is the transposed matrices' (torch's too).
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from accelsim import ops as F
from accelsim.frontends.aten_registry import Args, Ctx, Kwargs, aten


def _val(x: Any) -> Any:
    return x.meta.get("val") if hasattr(x, "meta") else None


def _group_norm(ctx: Ctx, x: Any, weight: Any, bias: Any, n: int, c: int, hw: int, groups: int,
                eps: float) -> tuple[Any, None, None]:
    groups = int(groups)
    per_group = (x.shape[1] // groups) * math.prod(x.shape[2:])
    flat = F.reshape(x, (x.shape[0], groups, per_group))
    g = ctx.graph
    y = F.reshape(F.layer_norm(flat, g.const([1.0] * per_group), g.const([0.0] * per_group), eps=float(eps)),
                  x.shape)
    channel = (1, x.shape[1]) + (1,) * (x.ndim - 2)
    if weight is not None:
        y = y * F.reshape(weight, channel)
    if bias is not None:
        y = y + F.reshape(bias, channel)
    return (y, None, None)


def _nearest_refuse(args: Args, kwargs: Kwargs) -> str | None:
    x = _val(args[0])
    if x is None:
        return None
    if x.dim() != 4:
        return f"input of rank {x.dim()} (expected (N, C, H, W))"
    size, factors = (args[1] if len(args) > 1 else kwargs.get("output_size")), \
        (args[2] if len(args) > 2 else kwargs.get("scale_factors"))
    if factors is not None and any(float(f) != int(f) for f in factors):
        return f"scale factors {list(factors)} (only integer factors)"
    if size is not None and any(int(o) % int(i) for o, i in zip(size, x.shape[2:])):
        return f"output size {list(size)} that is not a multiple of the input's {list(x.shape[2:])}"
    return None


def _target(x: Any, size: Any, factors: Any) -> tuple[int, int]:
    if size is not None:
        return int(size[0]), int(size[1])
    return int(math.floor(x.shape[2] * float(factors[0]))), int(math.floor(x.shape[3] * float(factors[1])))


def _nearest(ctx: Ctx, x: Any, size: Any = None, factors: Any = None) -> Any:
    n, c, h, w = x.shape
    ho, wo = _target(x, size, factors)
    sh, sw = ho // h, wo // w
    rep = F.broadcast_to(F.reshape(x, (n, c, h, 1, w, 1)), (n, c, h, sh, w, sw))
    return F.reshape(rep, (n, c, ho, wo))


def _interp_matrix(n_in: int, n_out: int, align_corners: bool, factor: float | None) -> np.ndarray:
    """(n_out, n_in): row i holds the weights of output i's two source pixels (torch's coordinate rule)."""
    a = np.zeros((n_out, n_in))
    for i in range(n_out):
        if align_corners:
            src = i * (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0
        else:
            scale = 1.0 / factor if factor else n_in / n_out
            src = max((i + 0.5) * scale - 0.5, 0.0)
        i0 = min(int(math.floor(src)), n_in - 1)
        i1 = min(i0 + 1, n_in - 1)
        lam = src - i0
        a[i, i0] += 1.0 - lam
        a[i, i1] += lam
    return a


def _bilinear_refuse(args: Args, kwargs: Kwargs) -> str | None:
    x = _val(args[0])
    return f"input of rank {x.dim()} (expected (N, C, H, W))" if x is not None and x.dim() != 4 else None


def _bilinear(ctx: Ctx, x: Any, size: Any, align_corners: bool, factors: Any = None) -> Any:
    ho, wo = _target(x, size, factors)
    fh, fw = (float(factors[0]), float(factors[1])) if factors is not None else (None, None)
    a_h = ctx.graph.const(_interp_matrix(x.shape[2], ho, bool(align_corners), fh))
    a_w = ctx.graph.const(_interp_matrix(x.shape[3], wo, bool(align_corners), fw))
    return F.matmul(a_h, F.matmul(x, a_w, transpose_b=True))


aten("aten.native_group_norm.default", _group_norm, "layer_norm over (C/G, H, W) per group, then the affine")
aten("aten.upsample_nearest2d.vec", _nearest, "reshape, broadcast_to, reshape (integer factors)",
     refuse=_nearest_refuse)
aten("aten.upsample_nearest2d.default", lambda ctx, x, size, sh=None, sw=None: _nearest(ctx, x, size),
     "reshape, broadcast_to, reshape (integer factors)", refuse=_nearest_refuse)
aten("aten.upsample_bilinear2d.vec", _bilinear, "A_h @ x @ A_w^T (constant interpolation matrices)",
     refuse=_bilinear_refuse)
