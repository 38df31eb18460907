"""Pixel shuffle / unshuffle (sub-pixel convolution's rearrangement); each is the other's adjoint.

Layouts are exactly torch.nn.functional.pixel_shuffle / pixel_unshuffle, any leading batch axes.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from accelsim.errors import ShapeError
from accelsim.ops.registry import Example, OpDef, Shape, apply, register

__all__ = ["pixel_shuffle", "pixel_unshuffle"]


def pixel_shuffle(x: Any, upscale: int) -> Any:
    """(*, C*r*r, H, W) -> (*, C, H*r, W*r)."""
    return apply("pixel_shuffle", x, upscale=int(upscale))


def pixel_unshuffle(x: Any, downscale: int) -> Any:
    """(*, C, H*r, W*r) -> (*, C*r*r, H, W)."""
    return apply("pixel_unshuffle", x, downscale=int(downscale))


def _shuffle_shape(x: Shape, upscale: int) -> Shape:
    r = upscale
    if len(x) < 3 or r < 1 or x[-3] % (r * r):
        raise ShapeError(f"pixel_shuffle needs x (*, C*r*r, H, W) with channels divisible by r*r; "
                         f"got x {x}, upscale={r}")
    *batch, c, h, w = x
    return (*batch, c // (r * r), h * r, w * r)


def _unshuffle_shape(x: Shape, downscale: int) -> Shape:
    r = downscale
    if len(x) < 3 or r < 1 or x[-2] % r or x[-1] % r:
        raise ShapeError(f"pixel_unshuffle needs x (*, C, H, W) with H and W divisible by r; "
                         f"got x {x}, downscale={r}")
    *batch, c, h, w = x
    return (*batch, c * r * r, h // r, w // r)


def _shuffle_ref(x: np.ndarray, upscale: int) -> np.ndarray:
    r, (*batch, c, h, w) = upscale, x.shape
    b = len(batch)
    y = x.reshape(*batch, c // (r * r), r, r, h, w)
    y = y.transpose(*range(b), b, b + 3, b + 1, b + 4, b + 2)  # (*, C, H, r, W, r)
    return np.ascontiguousarray(y).reshape(_shuffle_shape(x.shape, r))


def _unshuffle_ref(x: np.ndarray, downscale: int) -> np.ndarray:
    r, (*batch, c, h, w) = downscale, x.shape
    b = len(batch)
    y = x.reshape(*batch, c, h // r, r, w // r, r)
    y = y.transpose(*range(b), b, b + 2, b + 4, b + 1, b + 3)  # (*, C, r, r, H, W)
    return np.ascontiguousarray(y).reshape(_unshuffle_shape(x.shape, r))


def _shuffle_examples(rng: np.random.Generator) -> list[Example]:
    return [((rng.normal(size=(2, 8, 3, 2)),), {"upscale": 2}),
            ((rng.normal(size=(1, 9, 2, 3)),), {"upscale": 3}),
            ((rng.normal(size=(4, 2, 3)),), {"upscale": 1})]


def _unshuffle_examples(rng: np.random.Generator) -> list[Example]:
    return [((rng.normal(size=(2, 2, 6, 4)),), {"downscale": 2}),
            ((rng.normal(size=(1, 1, 6, 3)),), {"downscale": 3}),
            ((rng.normal(size=(2, 1, 3, 4, 4)),), {"downscale": 2})]


register(OpDef(
    "pixel_shuffle", "data_movement", infer=_shuffle_shape, ref=_shuffle_ref, examples=_shuffle_examples,
    grad=lambda g, out, x, upscale: (pixel_unshuffle(g, upscale),),
    doc="depth-to-space: (*, C*r*r, H, W) -> (*, C, H*r, W*r)"))
register(OpDef(
    "pixel_unshuffle", "data_movement", infer=_unshuffle_shape, ref=_unshuffle_ref, examples=_unshuffle_examples,
    grad=lambda g, out, x, downscale: (pixel_shuffle(g, downscale),),
    doc="space-to-depth: (*, C, H*r, W*r) -> (*, C*r*r, H, W)"))
