"""Import ONNX models as accelsim forward graphs (ModelProto or .onnx file -> Graph).

    g = load_onnx("resnet18.onnx", loss="cross_entropy")        # or from_onnx(onnx.load(path))
    feeds = initializer_feeds("resnet18.onnx", g)               # the file's weights, by ONNX name
    out = A.evaluate(g, feeds={**feeds, "x": x})                # computes what onnxruntime does
    train = A.training_graph(g)                                 # then compile, simulate, check

The graph is the file's architecture: graph inputs become inputs, float initializers parameters with
their ONNX names (drawn by onnx_leaves' rule; integer ones are shapes and axes, read at import), and ops
become registry ops through the ONNX_OPS table. Static shapes only. `onnx` is imported on first use.
A shape-only file (ZigZag's and Stream's workloads) imports with external_data="zeros".
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from accelsim.errors import AccelsimError
from accelsim.frontends.losses import loss_head
from accelsim.frontends.onnx_convert import convert
from accelsim.frontends.onnx_errors import OnnxImportError, fail
from accelsim.frontends.onnx_read import read_model
from accelsim.frontends.quiet import quiet_libraries
from accelsim.graph.ir import Graph
from accelsim.graph.verify import verify
from accelsim.limits import DEFAULT_READ_LIMITS, ReadLimits

__all__ = ["BATCH_NORM_MODES", "ReadLimits", "from_onnx", "initializer_feeds", "load_onnx"]

BATCH_NORM_MODES = ("inference", "training")
"""BatchNormalization as exported (running statistics: torch's eval mode) or with batch statistics
(torch's train mode, the zoo's training-mode batch_norm); the running statistics are unused then."""


def from_onnx(model_or_path: Any, *, name: str | None = None, loss: str = "mse", batch_norm: str = "inference",
              limits: ReadLimits = DEFAULT_READ_LIMITS, external_data: str = "read") -> Graph:
    """The forward Graph of an onnx.ModelProto or .onnx file, ending in `loss` as the torch frontend's
    heads do (frontends/losses.py: "mse" against input `target`, "cross_entropy" against int64 `labels`,
    "output", or "none" for an inference graph). Every problem is one FrontendError paragraph.
    external_data="zeros" imports a shape-only file (weights named in a data file that is not shipped, or
    declared without values) with those float weights as zeros: enough to compile, map and simulate, whose
    costs read shapes only (onnx_external.zero_external_data); "read" (the default) reads them."""
    head = loss_head(loss)
    if batch_norm not in BATCH_NORM_MODES:
        raise OnnxImportError(f"batch_norm must be one of {', '.join(map(repr, BATCH_NORM_MODES))}, got {batch_norm!r}")
    if name is not None and (not isinstance(name, str) or not name):
        raise OnnxImportError(f"name must be a non-empty string or None, got {name!r}")
    if not isinstance(limits, ReadLimits):
        raise OnnxImportError(f"limits must be an accelsim.limits.ReadLimits, got {limits!r}")
    with quiet_libraries():  # onnx's reference ops warn through numpy (overflow, division by zero) as they fold
        checked = read_model(model_or_path, limits, external_data)
        default = Path(model_or_path).stem if isinstance(model_or_path, (str, Path)) else checked.model.graph.name
        g = convert(checked, name or default or "onnx_model", batch_norm, limits)
    outputs = [g.var(i) for i in g.outputs.values()]
    try:
        with g.layer("loss"):
            loss_var = head.build(g, outputs)
    except AccelsimError as e:  # one output needed, or an input already named `target` / `labels`
        raise fail(checked.label, f"loss={loss!r}: {e}") from None
    if loss_var is not None:
        g.set_loss(loss_var)
    return verify(g)


def load_onnx(path: str | Path, *, name: str | None = None, loss: str = "mse", batch_norm: str = "inference",
              limits: ReadLimits = DEFAULT_READ_LIMITS, external_data: str = "read") -> Graph:
    """from_onnx of the .onnx file at `path`; the graph is named after the file."""
    if not isinstance(path, (str, Path)) or not str(path):
        raise OnnxImportError(f"load_onnx needs the path of an .onnx file, got {type(path).__name__}")
    return from_onnx(path, name=name, loss=loss, batch_norm=batch_norm, limits=limits, external_data=external_data)


def initializer_feeds(model_or_path: Any, graph: Graph,
                      limits: ReadLimits = DEFAULT_READ_LIMITS) -> dict[str, np.ndarray]:
    """The file's initializer values for `graph`'s parameters, by ONNX name: feeds that make
    A.evaluate (forward or training graph) compute with the file's weights instead of drawn ones."""
    if not isinstance(graph, Graph):
        raise OnnxImportError(f"initializer_feeds needs the Graph imported from the model, got {type(graph).__name__}")
    with quiet_libraries():
        checked = read_model(model_or_path, limits)
    feeds: dict[str, np.ndarray] = {}
    for node in graph.params:
        value = checked.initializers.get(node.name)
        if value is None:
            if node.trainable:
                raise fail(checked.label, f"has no initializer {node.name!r} for parameter %{node.id} of graph "
                                          f"{graph.name!r}; was the graph imported from this model?")
            continue  # optimizer state that training_graph added
        if tuple(value.shape) != node.shape:
            raise fail(f"{checked.label}: initializer {node.name!r}", f"has shape {tuple(value.shape)} but parameter "
                                                                      f"%{node.id} of graph {graph.name!r} has "
                                                                      f"{node.shape}")
        feeds[node.name] = np.asarray(value, dtype=node.dtype)
    return feeds
