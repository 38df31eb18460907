"""Lowerings both importers share: a framework op that accelsim builds from its own ops, written once so the
PyTorch and ONNX imports of the same operation give the same graph."""
from __future__ import annotations

from typing import Any

from accelsim import ops as F
from accelsim.graph.ir import Var


def clamp(x: Var, lo: Any = None, hi: Any = None) -> Var:
    """x below lo becomes lo, above hi becomes hi (None: no bound); NaN stays NaN, as torch and onnxruntime
    keep it."""
    y = x
    if lo is not None:
        y = F.where(F.lt(y, lo), lo, y)
    if hi is not None:
        y = F.where(F.gt(y, hi), hi, y)
    return y
