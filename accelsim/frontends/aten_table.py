"""The ATen op table, assembled: importing the converter modules registers their entries (ATen name ->
AtenOp) in the registry (aten_registry.py), which none of them needs this module for."""
from __future__ import annotations

# noqa below: they register on import
from accelsim.frontends import aten_image, aten_loss, aten_math, aten_nn, aten_select, aten_shape  # noqa: F401
from accelsim.frontends.aten_registry import ATEN_OPS, AtenOp

__all__ = ["ATEN_OPS", "AtenOp", "aten_ops"]


def aten_ops() -> dict[str, AtenOp]:
    """The full table: every ATen overload the torch importer converts."""
    return ATEN_OPS
