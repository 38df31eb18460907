"""The parameters of an imported ONNX graph: which initializers train, and the initializer rule each
parameter's default value is drawn by (CheckedModel -> per-name param attrs).

As in the torch frontend (torch_leaves.py), a Graph describes a leaf by an initializer, not an array:
the imported graph is the file's architecture, and the file's weights are given as feeds when its
numbers matter (`onnx_import.initializer_feeds` -> `A.evaluate(graph, feeds=...)`). The rule:

- a tensor whose elements are all equal (zeros, ones, a scalar such as an attention scale or an epsilon)
  is drawn as exactly that value (`init="full"`), so the default graph computes what the file does
  wherever the file holds a constant;
- any other tensor of rank >= 2 (a weight): normal with std 1/sqrt(fan_in), fan_in from the op that reads
  it (Conv: C/groups*KH*KW; Gemm: K by transB; MatMul: the contraction axis) or prod(shape[1:]);
- any other vector: ones for a BatchNormalization/LayerNormalization scale or a running variance, else
  zeros (a bias, a running mean).

Trainable: every float initializer except BatchNormalization's running mean and variance (statistics),
one-element tensors (exporters' scalar constants) and tensors no gradient can reach (read only by comparisons
and shape ops, through data movement at most: GPT-2's causal-mask buffer `bias == 0`), which become
non-trainable parameters.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from accelsim.frontends.onnx_read import DEFAULT_DOMAINS, CheckedModel

ONES_ROLES = {("BatchNormalization", 1), ("BatchNormalization", 4), ("LayerNormalization", 1)}
NO_GRADIENT_OPS = frozenset({"Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual", "Shape", "Size"})
"""Ops whose outputs carry no gradient to their inputs (booleans, shapes)."""
MOVEMENT_OPS = frozenset({"Slice", "Reshape", "Squeeze", "Unsqueeze", "Expand", "Transpose", "Identity", "Cast",
                          "CastLike", "Flatten", "Gather"})
"""Ops that pass values through unchanged: what reaches their outputs reaches their input 0 (Gather: its data)."""


def frozen_initializers(checked: CheckedModel) -> frozenset[str]:
    """Float initializers that become non-trainable parameters (see the module docstring)."""
    frozen = {name for name, a in checked.initializers.items() if a.dtype.kind == "f" and a.size <= 1}
    for node in _default_nodes(checked):
        if node.op_type == "BatchNormalization":
            frozen.update(n for n in node.input[3:5] if n in checked.initializers)
    frozen.update(_gradient_free(checked))
    return frozenset(frozen)


def _gradient_free(checked: CheckedModel) -> set[str]:
    """Float initializers every use of which ends in a NO_GRADIENT_OPS op, through MOVEMENT_OPS (as their input 0)
    at most, and which no graph output returns."""
    readers: dict[str, list[tuple[Any, int]]] = {}
    for node in checked.nodes:
        for slot, name in enumerate(node.input):
            readers.setdefault(name, []).append((node, slot))
    outputs = {vi.name for vi in checked.model.graph.output}

    def free(name: str) -> bool:
        if name in outputs or not readers.get(name):
            return name not in outputs and name not in readers  # unread: nothing to train
        for node, slot in readers[name]:
            if node.domain not in DEFAULT_DOMAINS:
                return False
            if node.op_type in NO_GRADIENT_OPS:
                continue
            if node.op_type in MOVEMENT_OPS and slot == 0 and all(free(o) for o in node.output if o):
                continue
            if node.op_type in MOVEMENT_OPS and slot > 0:
                continue  # a shape, axes or indices operand: no gradient flows there
            return False
        return True

    return {name for name, a in checked.initializers.items() if a.dtype.kind == "f" and a.size > 1 and free(name)}


def param_inits(checked: CheckedModel) -> dict[str, dict[str, Any]]:
    """The init attrs of every float initializer's parameter, by ONNX name."""
    fan_in: dict[str, int] = {}
    ones: set[str] = set()
    for node in _default_nodes(checked):
        for slot, name in enumerate(node.input):
            if name not in checked.initializers:
                continue
            if (node.op_type, slot) in ONES_ROLES:
                ones.add(name)
            fan = _fan_in(node, slot, checked.initializers[name].shape)
            if fan is not None:
                fan_in.setdefault(name, fan)
    inits = {}
    for name, arr in checked.initializers.items():
        if arr.dtype.kind != "f":
            continue
        flat = arr.reshape(-1)
        if flat.size and np.all(flat == flat[0]):
            inits[name] = {"init": "full", "value": float(flat[0])}
        elif arr.ndim >= 2:
            fan = fan_in.get(name, math.prod(arr.shape[1:]))
            inits[name] = {"init": "normal", "std": 1.0 / math.sqrt(max(fan, 1))}
        else:
            inits[name] = {"init": "ones" if name in ones else "zeros"}
    return inits


def _fan_in(node: Any, slot: int, shape: tuple[int, ...]) -> int | None:
    """The inputs each output element of `node` sums over, for the weight at input `slot`."""
    if node.op_type == "Conv" and slot == 1 and len(shape) >= 2:
        return math.prod(shape[1:])
    if node.op_type == "Gemm" and slot == 1 and len(shape) == 2:
        trans_b = next((a.i for a in node.attribute if a.name == "transB"), 0)
        return shape[1] if trans_b else shape[0]
    if node.op_type == "MatMul" and slot == 1 and len(shape) >= 2:
        return shape[-2]
    return None


def _default_nodes(checked: CheckedModel) -> list[Any]:
    return [n for n in checked.nodes if n.domain in DEFAULT_DOMAINS]
