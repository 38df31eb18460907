"""Freeze batch norm for serving (Graph -> Graph): each training-mode `batch_norm` of a forward graph
becomes `batch_norm_inference` with constant running statistics, calibrated on one batch.

This is a change of meaning, not a rewrite: training-mode batch norm normalizes each batch with its
own statistics; the frozen graph normalizes every batch with the calibration batch's. It is what
deploying a trained network does (PyTorch's `model.eval()` reads running statistics), so it is not in
the pass manager's table, whose passes must keep every result. The zoo's CNNs are built in training
mode; freezing them is what lets `fold_batchnorm` apply to them. The statistics are the biased
variance and mean over every axis but the channel axis, of the values each batch norm sees when the
graph is evaluated in float64 on `feeds` (default: the graph's own input values), stored in the
graph's dtype; on that batch the frozen graph computes what the original does, up to that rounding.
"""
from __future__ import annotations

from typing import Mapping

import numpy as np

from accelsim.errors import GraphError
from accelsim.evaluate import evaluate
from accelsim.graph.ir import Graph
from accelsim.passes.kind import training_node
from accelsim.passes.rebuild import Rebuild


def freeze_batchnorm(graph: Graph, feeds: Mapping[str | int, np.ndarray] | None = None) -> Graph:
    """`graph` with each training-mode batch norm replaced by inference batch norm whose mean and var
    are constants measured on `feeds` (see the module docstring); unchanged if it has none."""
    if not isinstance(graph, Graph):
        raise GraphError(f"freeze_batchnorm needs a Graph, got {type(graph).__name__}")
    later = training_node(graph)
    if later is not None:
        raise GraphError(f"freeze_batchnorm applies to forward and inference graphs, but graph {graph.name!r} "
                         f"has {later.phase} node %{later.id} {later.name!r}: a training step needs the batch "
                         "statistics and their gradients")
    norms = [n for n in graph.nodes if n.op == "batch_norm"]
    if not norms:
        return graph.copy()
    seen = evaluate(graph, feeds=feeds, outputs=(), keep=sorted({n.inputs[0] for n in norms}), dtype="float64")
    rb = Rebuild(graph)
    for old in graph.nodes:
        if old.op != "batch_norm":
            rb.copy(old)
            continue
        x, gamma, beta = rb.mapped(old)
        batch = seen[f"%{old.inputs[0]}"]
        axes = (0,) + tuple(range(2, batch.ndim))
        mean = rb.const(batch.mean(axis=axes), old.phase)
        var = rb.const(batch.var(axis=axes), old.phase)
        new = rb.emit("batch_norm_inference", (x, gamma, beta, mean, var), old.attrs, old.phase, name=old.name)
        if not rb.replace(old, new, "frozen with the calibration batch's statistics"):
            rb.copy(old)
    frozen = rb.finish().graph
    frozen.source = None  # the model's builder does not rebuild the frozen graph (it has no such option)
    return frozen
