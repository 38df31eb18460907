"""The ATen op registry: what a converter module needs to register entries of the ATen op table (`aten`, the
`AtenOp` record, the `Ctx` it is handed). The converter modules import this; `aten_table.py` imports them.

Like the OpDef registry, nothing else in the importer special-cases an ATen op by name: `torch_export.py`
looks each FX node's target up in the table, asks `refuse` whether this use is one accelsim can express, and
calls `convert` with the node's arguments (FX nodes replaced by graph Vars).
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from accelsim.graph.ir import Graph

Args = tuple[Any, ...]
Kwargs = dict[str, Any]
Converted = Any
"""A Var, a tuple of Vars (None where an output has no accelsim counterpart, such as batch norm's saved
statistics), or a Python number."""


@dataclass(frozen=True)
class Ctx:
    """What a converter may use besides its arguments: the graph under construction, and the ordinals of its
    random draws (dropout masks), which key each mask so that the ONNX import of the same model draws the same."""

    graph: Graph
    draws: Iterator[int] = field(default_factory=itertools.count)


def _always(args: Args, kwargs: Kwargs) -> str | None:
    return None


@dataclass(frozen=True)
class AtenOp:
    """How one ATen overload becomes accelsim ops.

    name: the overload as `str(target)` prints it ("aten.addmm.default").
    convert(ctx, *args, **kwargs) -> Converted: builds nodes with the op builders (accelsim.ops).
    refuse(args, kwargs) -> None, or why this use cannot be imported (e.g. "approximate='none'"); called on
        the raw FX arguments before anything is built, so one error can list every problem.
    doc: the decomposition, one line.
    """

    name: str
    convert: Callable[..., Converted]
    refuse: Callable[[Args, Kwargs], str | None] = _always
    doc: str = ""


ATEN_OPS: dict[str, AtenOp] = {}


def aten(name: str, convert: Callable[..., Converted], doc: str,
         refuse: Callable[[Args, Kwargs], str | None] = _always) -> AtenOp:
    """Register the converter of ATen overload `name` (once)."""
    if name in ATEN_OPS:
        raise ValueError(f"ATen op {name!r} registered twice")
    ATEN_OPS[name] = AtenOp(name, convert, refuse, doc)
    return ATEN_OPS[name]

