"""Tensor-parallel communication as a graph op: `tp_allreduce` sums one partial value per rank.

Megatron-LM's row-parallel linear leaves each rank a partial sum of the layer's output; the sum over
ranks is an all-reduce, after which every rank holds the whole value. In the graph it is one node
whose k-th input is rank k's partial and whose output is replicated (rank -1). Its gradient is the
identity to every input: the all-reduce in forward is Megatron's `g`, whose backward is free. The
backward all-reduce (Megatron's `f`) is the sum autodiff forms when a replicated value feeds several
ranks (autodiff.py builds it with this op too).

`collective="allreduce"` tells the planner to run the node as a collective over the ranks' chips
rather than on a unit; the numbers are the sum of the inputs in rank order either way.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from accelsim.errors import ShapeError
from accelsim.ops.registry import OpDef, Shape, apply, numel, register

MAX_INPUTS = 1024
"""One input per tensor-parallel rank (graph.ir.MAX_RANKS)."""


def tp_allreduce(*partials: Any) -> Any:
    """The sum of one partial value per tensor-parallel rank, held whole by every rank."""
    return apply("tp_allreduce", *partials)


def _infer(*shapes: Shape) -> Shape:
    if not shapes or len(shapes) > MAX_INPUTS:
        raise ShapeError(f"tp_allreduce needs 1 to {MAX_INPUTS} inputs (one per rank), got {len(shapes)}")
    if any(s != shapes[0] for s in shapes):
        raise ShapeError(f"tp_allreduce sums partial values of one shape, got {list(shapes)}")
    return shapes[0]


def _ref(*xs: np.ndarray) -> np.ndarray:
    total = np.array(xs[0], copy=True)
    for x in xs[1:]:
        total = total + x
    return total


register(OpDef(
    "tp_allreduce", "elementwise", infer=_infer, ref=_ref,
    flops=lambda out, *ins: (len(ins) - 1) * numel(out),
    grad=lambda g, out, *xs: tuple(g for _ in xs),
    examples=lambda rng: [((rng.normal(size=(2, 3)), rng.normal(size=(2, 3))), {}),
                          ((rng.normal(size=(4,)), rng.normal(size=(4,)), rng.normal(size=(4,)),
                            rng.normal(size=(4,))), {})],
    collective="allreduce",
    doc="the sum over tensor-parallel ranks of one partial value per rank; an all-reduce on the ranks' chips"))
