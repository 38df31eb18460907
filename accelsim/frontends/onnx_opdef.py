"""One record per ONNX op the importer understands: how a node of that type becomes registry ops."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from accelsim.frontends.onnx_context import ImportContext, Value

Converter = Callable[[ImportContext], list[Value]]
"""Reads the current node (ctx.node) through ctx and returns one Value per ONNX output it produces
(in order); raises ctx.unsupported(reason) for a use it cannot express."""


@dataclass(frozen=True)
class OnnxOpDef:
    """An ONNX op type (default domain) and its converter to accelsim registry ops."""

    op_type: str
    convert: Converter
    doc: str  # the registry ops it becomes, and what it refuses
    before_folding: bool = False  # converted even when every input is a constant (ConstantOfShape stays lazy)
