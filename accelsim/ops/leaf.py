"""Leaf ops: graph inputs, parameters and constants. They compute nothing."""
from __future__ import annotations

from typing import Any

import numpy as np

from accelsim.ops.registry import OpDef, Shape, register


def _leaf_shape(**attrs: Any) -> Shape:
    return tuple(attrs["shape"])


def _leaf_ref(**attrs: Any) -> np.ndarray:
    raise RuntimeError("leaf values come from the graph (Graph.leaf_value), not from ref")


for _name in ("input", "param", "const"):
    register(OpDef(_name, "leaf", infer=_leaf_shape, ref=_leaf_ref, read_elems=lambda out, **a: 0,
                   written_elems=lambda out, **a: 0, doc=f"graph {_name}"))
