"""What one ONNX node's converter reads and builds: its inputs as graph tensors or as values known at
import time, its attributes, and the accelsim graph being built (ONNX node -> Vars)."""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field, replace
from typing import Any, Iterator, Mapping

import numpy as np

from accelsim.frontends.onnx_errors import fail
from accelsim.graph.ir import Graph, Var
from accelsim.limits import ReadLimits

Value = Var | np.ndarray
"""A tensor during import: a Var (a node of the graph) or an ndarray known at import time (a static
value: a Constant, an integer initializer, a shape, or anything computed from those alone)."""


class Unsupported(Exception):
    """A converter cannot express this use of its op (an attribute value, a dynamic operand). The
    importer collects these with the missing ops and reports them all in one paragraph."""


@dataclass
class ImportContext:
    """The state of one import: the graph under construction and the value of every ONNX tensor seen."""

    graph: Graph
    label: str  # the file, for error messages
    opset: int
    initializers: Mapping[str, np.ndarray]
    frozen: frozenset[str]  # float initializers that become non-trainable parameters
    inits: Mapping[str, Mapping[str, Any]]  # each float initializer's param init attrs (onnx_leaves.py)
    batch_norm: str  # "inference" (running statistics) or "training" (batch statistics)
    limits: ReadLimits  # max_folded_elements bounds every value computed at import
    values: dict[str, Value] = field(default_factory=dict)
    labels: set[str] = field(default_factory=set)  # int64 label inputs whose class count no loss has set yet
    node: Any = None  # the onnx.NodeProto being converted
    draws: Iterator[int] = field(default_factory=itertools.count)  # ordinals of random draws: each mask's key
    _consts: dict[str, Var] = field(default_factory=dict)

    # ---- the node being converted -------------------------------------------------------

    @property
    def where(self) -> str:
        n = self.node
        return f"{self.label}: node {n.name or n.output[0]!r} ({n.op_type})"

    def unsupported(self, reason: str) -> Unsupported:
        return Unsupported(reason)

    def attr(self, name: str, default: Any = None) -> Any:
        """Attribute `name` of the current node as a Python value (strings decoded), else `default`."""
        import onnx.helper

        for a in self.node.attribute:
            if a.name == name:
                value = onnx.helper.get_attribute_value(a)
                if isinstance(value, bytes):
                    return value.decode("utf-8", "replace")
                if isinstance(value, list):
                    return [v.decode("utf-8", "replace") if isinstance(v, bytes) else v for v in value]
                return value
        return default

    def has(self, i: int) -> bool:
        """Whether optional input `i` is given (present and not the empty name)."""
        return i < len(self.node.input) and bool(self.node.input[i])

    def name(self, i: int) -> str:
        return self.node.input[i]

    # ---- reading inputs -----------------------------------------------------------------

    def is_static(self, i: int) -> bool:
        """Input `i` is known at import: a static value or a non-float initializer (never a weight)."""
        name = self.node.input[i]
        if name in self.values:
            return isinstance(self.values[name], np.ndarray)
        return name in self.initializers and self.initializers[name].dtype.kind != "f"

    def shape(self, i: int) -> tuple[int, ...]:
        """The static shape of input `i`, whatever it is (no parameter is created for it)."""
        name = self.node.input[i]
        v = self.values.get(name)
        if v is None:
            return tuple(self.initializers[name].shape)
        return tuple(v.shape)

    def static(self, i: int, what: str) -> np.ndarray:
        """The value of input `i`, which must be known at import (a constant, a shape, an initializer)
        because it is `what` (an attribute-like operand: a shape, axes, an exponent)."""
        name = self.node.input[i]
        v = self.values.get(name)
        if isinstance(v, np.ndarray):
            return v
        if v is None and name in self.initializers:
            return self.initializers[name]
        raise self.unsupported(f"input {i} ({name!r}, {what}) is computed by the graph, not a constant")

    def known(self, i: int) -> np.ndarray | None:
        """The value of input `i` if the file fixes it (a static value or any initializer), else None;
        reading it creates no parameter."""
        name = self.node.input[i]
        v = self.values.get(name)
        if isinstance(v, np.ndarray):
            return v
        return self.initializers.get(name) if v is None else None

    def static_ints(self, i: int, what: str) -> list[int]:
        return [int(x) for x in np.asarray(self.static(i, what)).reshape(-1)]

    def tensor(self, i: int) -> Var:
        """Input `i` as a graph tensor: a float initializer becomes a parameter (named as in the file)
        on first use, a static value a constant."""
        return self.as_var(self.node.input[i])

    def as_var(self, name: str) -> Var:
        v = self.values.get(name)
        if isinstance(v, Var):
            return v
        if v is None and name in self.initializers:
            arr = self.initializers[name]
            if arr.dtype.kind == "f":
                v = self._param(name, arr)
                self.values[name] = v
                return v
            v = arr
        if name not in self._consts:
            arr = np.asarray(v)
            dtype = self.graph.dtype if arr.dtype.kind in "fb" else "int64"
            self._consts[name] = self.graph.const(arr, dtype=dtype)
        return self._consts[name]

    def claim_labels(self, labels: Var, classes: int) -> None:
        """Set the range [0, classes) of the int64 graph input that `labels` is (reshaped at most), so its
        default value is a valid batch of labels and evaluate refuses a fed label outside it; the smallest
        class count wins when two losses read one input."""
        node = self.graph.nodes[labels.id]
        while node.op == "reshape":
            node = self.graph.nodes[node.inputs[0]]
        if node.op != "input" or node.dtype != "int64":
            return  # labels computed by the graph (a constant, an argmax): nothing to draw
        high = min(int(node.attrs.get("high", classes)), classes)
        self.graph.nodes[node.id] = replace(node, attrs={**node.attrs, "high": high})
        self.labels.discard(node.name)

    def _param(self, name: str, arr: np.ndarray) -> Var:
        return self.graph.param(name, tuple(int(d) for d in arr.shape), trainable=name not in self.frozen,
                                **self.inits[name])

    # ---- naming what was built ----------------------------------------------------------

    def label_nodes(self, first_id: int, outputs: list[Value]) -> None:
        """Name the nodes built for the current node after it: its output tensors by their ONNX names,
        helper nodes `<node name>/<op>`, so dumps, costs and errors point back into the file."""
        base = self.node.name or self.node.output[0]
        out_names = {v.id: name for v, name in zip(outputs, self.node.output) if isinstance(v, Var)}
        nodes = self.graph.nodes
        for i in range(first_id, len(nodes)):
            if not nodes[i].is_leaf:
                nodes[i] = replace(nodes[i], name=out_names.get(i, f"{base}/{nodes[i].op}"))

    def check_value(self, name: str, value: Value) -> None:
        """A static value computed at import stays within the limit (converters that compute on constants
        are checked here, after the fact; the folder checks its outputs' shapes before computing them)."""
        limit = self.limits.max_folded_elements
        if isinstance(value, np.ndarray) and value.size > limit:
            raise fail(self.where, f"computes a constant {name!r} of shape {value.shape} ({value.size:,} elements) "
                                   f"at import, above the limit of {limit:,} elements; "
                                   f"{ReadLimits.how_to_raise('max_folded_elements')}")
