"""ATen views, copies and layout ops as accelsim data-movement ops (entries of ATEN_OPS).

Views and copies that only change strides (clone, contiguous, alias, _to_copy to the same dtype) are the
identity in a graph of values; squeeze, unsqueeze, flatten and view are reshapes; select is a slice and a
reshape; expand is broadcast_to.
"""
from __future__ import annotations

from typing import Any, Sequence

from accelsim import ops as F
from accelsim.frontends.aten_registry import Args, Ctx, Kwargs, aten


def _axis(dim: int, ndim: int) -> int:
    return int(dim) % ndim if ndim else 0


def _identity(ctx: Ctx, x: Any, *args: Any, **kwargs: Any) -> Any:
    return x


def _to_copy_refuse(args: Args, kwargs: Kwargs) -> str | None:
    dtype = kwargs.get("dtype")
    val = args[0].meta.get("val") if hasattr(args[0], "meta") else None
    if dtype is not None and val is not None and dtype != val.dtype:
        return f"a cast from {val.dtype} to {dtype} (convert the module with .to(dtype) before exporting)"
    return None


def _squeeze(ctx: Ctx, x: Any, dims: Any = None) -> Any:
    if dims is None:
        axes = {i for i, d in enumerate(x.shape) if d == 1}
    else:
        axes = {_axis(d, x.ndim) for d in (dims if isinstance(dims, (list, tuple)) else [dims])}
    return F.reshape(x, tuple(d for i, d in enumerate(x.shape) if not (i in axes and d == 1)))


def _unsqueeze(ctx: Ctx, x: Any, dim: int) -> Any:
    axis = _axis(dim, x.ndim + 1)
    return F.reshape(x, x.shape[:axis] + (1,) + x.shape[axis:])


def _expand(ctx: Ctx, x: Any, sizes: Sequence[int], implicit: bool = False) -> Any:
    lead = len(sizes) - x.ndim
    shape = tuple(x.shape[i - lead] if s == -1 else int(s) for i, s in enumerate(sizes))
    return F.broadcast_to(x, shape)


def _slice(ctx: Ctx, x: Any, dim: int = 0, start: int | None = None, end: int | None = None, step: int = 1) -> Any:
    axis = _axis(dim, x.ndim)
    size = x.shape[axis]
    lo, hi, _ = slice(start, end).indices(size)
    if lo == 0 and hi == size:
        return x
    return F.slice(x, (0,) * axis + (lo,), x.shape[:axis] + (max(lo, hi),))


def _select(ctx: Ctx, x: Any, dim: int, index: int) -> Any:
    axis = _axis(dim, x.ndim)
    i = int(index) % x.shape[axis]
    part = F.slice(x, (0,) * axis + (i,), x.shape[:axis] + (i + 1,))
    return F.reshape(part, x.shape[:axis] + x.shape[axis + 1:])


def _split_with_sizes(ctx: Ctx, x: Any, sizes: Sequence[int], dim: int = 0) -> tuple[Any, ...]:
    out, start = [], 0
    for s in sizes:
        out.append(_slice(ctx, x, dim, start, start + int(s)))
        start += int(s)
    return tuple(out)


def _split(ctx: Ctx, x: Any, size: int, dim: int = 0) -> tuple[Any, ...]:
    total = x.shape[_axis(dim, x.ndim)]
    return _split_with_sizes(ctx, x, [min(int(size), total - s) for s in range(0, total, int(size))], dim)


def _flatten(ctx: Ctx, x: Any, start: int = 0, end: int = -1) -> Any:
    if x.ndim == 0:
        return F.reshape(x, (1,))
    a, b = _axis(start, x.ndim), _axis(end, x.ndim)
    return F.reshape(x, x.shape[:a] + (-1,) + x.shape[b + 1:])


def _transpose(ctx: Ctx, x: Any, d0: int, d1: int) -> Any:
    axes = list(range(x.ndim))
    a, b = _axis(d0, x.ndim), _axis(d1, x.ndim)
    axes[a], axes[b] = axes[b], axes[a]
    return F.transpose(x, axes)


def _step_refuse(args: Args, kwargs: Kwargs) -> str | None:
    step = kwargs.get("step", args[4] if len(args) > 4 else 1)
    return f"step={step} (strided slices)" if step != 1 else None


for _name in ("aten.clone.default", "aten.alias.default", "aten.contiguous.default", "aten.detach.default",
              "aten.lift_fresh_copy.default"):
    aten(_name, _identity, "identity (a copy or view of the same values)")
aten("aten._to_copy.default", _identity, "identity (same dtype)", refuse=_to_copy_refuse)
aten("aten.view.default", lambda ctx, x, shape: F.reshape(x, tuple(shape)), "reshape")
aten("aten._unsafe_view.default", lambda ctx, x, shape: F.reshape(x, tuple(shape)), "reshape")
aten("aten.reshape.default", lambda ctx, x, shape: F.reshape(x, tuple(shape)), "reshape")
aten("aten.flatten.using_ints", _flatten, "reshape")
aten("aten.squeeze.dims", _squeeze, "reshape")
aten("aten.squeeze.dim", _squeeze, "reshape")
aten("aten.squeeze.default", _squeeze, "reshape")
aten("aten.unsqueeze.default", _unsqueeze, "reshape")
aten("aten.permute.default", lambda ctx, x, dims: F.transpose(x, [_axis(d, x.ndim) for d in dims]), "transpose")
aten("aten.transpose.int", _transpose, "transpose")
aten("aten.t.default", lambda ctx, x: F.transpose(x) if x.ndim == 2 else x, "transpose")
aten("aten.expand.default", _expand, "broadcast_to")
aten("aten.slice.Tensor", _slice, "slice", refuse=_step_refuse)
aten("aten.select.int", _select, "slice + reshape")
aten("aten.split_with_sizes.default", _split_with_sizes, "slices")
aten("aten.split.Tensor", _split, "slices")
aten("aten.cat.default", lambda ctx, xs, dim=0: xs[0] if len(xs) == 1 else F.concat(list(xs), dim), "concat")
aten("aten.pixel_shuffle.default", lambda ctx, x, r: F.pixel_shuffle(x, int(r)), "pixel_shuffle")
aten("aten.pixel_unshuffle.default", lambda ctx, x, r: F.pixel_unshuffle(x, int(r)), "pixel_unshuffle")
