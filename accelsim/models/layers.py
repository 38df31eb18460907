"""Layer helpers shared by the model builders: parameters named `<prefix>.w`, `<prefix>.b`, ..., and every node
a helper builds in layer `<prefix>` (Graph.layer), the name reports and traces show."""
from __future__ import annotations

import math

from accelsim import ops as F
from accelsim.graph.ir import Graph, Var


def linear(g: Graph, x: Var, n_out: int, prefix: str, bias: bool = True, std: float | None = None) -> Var:
    """x @ W + b over the last axis; W is (n_in, n_out), initialized N(0, 1/n_in) unless `std`."""
    n_in = x.shape[-1]
    with g.layer(prefix):
        w = g.param(f"{prefix}.w", (n_in, n_out), std=std if std is not None else 1.0 / math.sqrt(n_in))
        y = F.matmul(x, w)
        return y + g.param(f"{prefix}.b", (n_out,), init="zeros") if bias else y


def conv(g: Graph, x: Var, c_out: int, kernel: int, prefix: str, stride: int = 1, padding: int = 0,
         bias: bool = True) -> Var:
    """conv2d with He-initialized weights and an optional per-channel bias."""
    c_in = x.shape[1]
    with g.layer(prefix):
        w = g.param(f"{prefix}.w", (c_out, c_in, kernel, kernel), std=math.sqrt(2.0 / (c_in * kernel * kernel)))
        y = F.conv2d(x, w, stride=stride, padding=padding)
        if not bias:
            return y
        b = g.param(f"{prefix}.b", (c_out,), init="zeros")
        return y + F.reshape(b, (1, c_out, 1, 1))


def batch_norm(g: Graph, x: Var, prefix: str) -> Var:
    """Training-mode batch norm with learnable scale (ones) and shift (zeros)."""
    c = x.shape[1]
    with g.layer(prefix):
        return F.batch_norm(x, g.param(f"{prefix}.gamma", (c,), init="ones"),
                            g.param(f"{prefix}.beta", (c,), init="zeros"))


def layer_norm(g: Graph, x: Var, prefix: str) -> Var:
    d = x.shape[-1]
    with g.layer(prefix):
        return F.layer_norm(x, g.param(f"{prefix}.gamma", (d,), init="ones"),
                            g.param(f"{prefix}.beta", (d,), init="zeros"))
