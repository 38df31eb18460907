"""Row geometry of layer fusion (a chain's windows, output rows -> the input rows each layer needs).

Depth-first (layer-fused) execution computes a chain of layers one band of output rows at a time: each
band needs a band of the chain's input, grown by every window's kernel, dilation and stride and shifted by
its padding (the receptive field with its halo), as in Alwani et al., "Fused-layer CNN accelerators"
(MICRO 2016) and Stream (Symons et al., 2023). This module only computes those bands; fuse_layers.py
builds the nodes.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RowWindow:
    """How one layer maps input rows to output rows along H: output row o reads padded input rows
    o*stride .. o*stride + dilation*(kernel-1), padded by `padding` rows on both sides. An elementwise
    layer is the window (1, 1, 0, 1): row o reads row o."""

    kernel: int = 1
    stride: int = 1
    padding: int = 0
    dilation: int = 1


@dataclass(frozen=True)
class Band:
    """One layer's input rows for one tile: rows [start, stop) of the real input, plus `pad_top` and
    `pad_bottom` rows of the layer's padding made explicit (the tile touches the tensor's edge)."""

    start: int
    stop: int
    pad_top: int
    pad_bottom: int


def input_band(window: RowWindow, out_start: int, out_stop: int, in_rows: int) -> Band:
    """The input rows output rows [out_start, out_stop) of a layer read (`in_rows`: its input's height)."""
    lo = out_start * window.stride - window.padding
    hi = (out_stop - 1) * window.stride + window.dilation * (window.kernel - 1) + 1 - window.padding
    return Band(max(lo, 0), min(hi, in_rows), max(0, -lo), max(0, hi - in_rows))


def tile_rows(rows: int, tiles: int) -> list[tuple[int, int]]:
    """`rows` output rows cut into `tiles` bands as even as possible, first band first."""
    cuts = [t * rows // tiles for t in range(tiles + 1)]
    return [(cuts[t], cuts[t + 1]) for t in range(tiles)]


def chain_bands(windows: list[RowWindow], in_rows: list[int], out_start: int, out_stop: int) -> list[Band]:
    """Each layer's input band for the chain's output rows [out_start, out_stop), first layer first:
    walked from the last layer back, each layer's output rows being the next layer's input rows.
    `in_rows[i]`: layer i's input height."""
    bands: list[Band] = []
    start, stop = out_start, out_stop
    for window, rows in zip(reversed(windows), reversed(in_rows)):
        band = input_band(window, start, stop, rows)
        bands.append(band)
        start, stop = band.start, band.stop
    return bands[::-1]
