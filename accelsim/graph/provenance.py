"""Graph provenance: typed records of how a graph was made (which model, which optimizer settings, which
rewrite passes).

A later stage that must rebuild a graph (a saved schedule being replayed) reads these records,
never the builders' keyword arguments spelled out again.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, fields
from numbers import Integral, Real
from typing import Any, Mapping

from accelsim.errors import GraphError

OPTIMIZERS = ("sgd", "momentum", "adam")


def _plain(model: str, key: str, value: Any) -> Any:
    """An option value as plain immutable data: bool, int, float, str, or a tuple of those."""
    if isinstance(value, (bool, str)):
        return value
    if isinstance(value, Integral):
        return int(value)
    if isinstance(value, Real):
        return float(value)
    if isinstance(value, (tuple, list)):
        return tuple(_plain(model, key, v) for v in value)
    raise GraphError(f"model source {model!r}: option {key}={value!r} is not plain data "
                     "(expected a bool, int, float, str or a tuple of those)")


@dataclass(frozen=True, slots=True)
class ModelSource:
    """Which zoo model and options built the forward graph.

    `options` holds every option (defaults included) as (key, value) pairs sorted by key; a
    mapping is accepted too and normalized, lists becoming tuples.
    """

    model: str
    options: tuple[tuple[str, Any], ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.model, str) or not self.model:
            raise GraphError(f"model source: model must be a non-empty name, got {self.model!r}")
        pairs = self.options.items() if isinstance(self.options, Mapping) else self.options
        try:
            items = [(k, v) for k, v in pairs]
        except (TypeError, ValueError):
            raise GraphError(f"model source {self.model!r}: options must be (key, value) pairs, "
                             f"got {self.options!r}") from None
        keys = [k for k, _ in items]
        if not all(isinstance(k, str) for k in keys) or len(set(keys)) != len(keys):
            raise GraphError(f"model source {self.model!r}: option names must be distinct strings, got {keys!r}")
        object.__setattr__(self, "options", tuple(sorted((k, _plain(self.model, k, v)) for k, v in items)))

    def options_dict(self) -> dict[str, Any]:
        """The options as keyword arguments of `models.build(self.model, **...)`."""
        return dict(self.options)


MODEL_FILE = "model_file"
"""`ModelSource.model` of a graph read from a model file (accelsim.frontends.load_model): its options are the
file's absolute `path`, the `sha256` of its bytes and, for a file whose loss head is chosen on import (a saved
ExportedProgram), the `loss`; a schedule of it rebuilds the graph from the same bytes or is refused
(source.py)."""
SHA256_HEX = 64


def file_source(path: str, sha256: str, loss: str | None = None) -> ModelSource:
    """The source of a graph read from the model file at `path` (absolute) whose bytes hash to `sha256`."""
    if not isinstance(path, str) or not path:
        raise GraphError(f"model file source: path must be a non-empty string, got {path!r:.80}")
    if not (isinstance(sha256, str) and len(sha256) == SHA256_HEX and all(c in "0123456789abcdef" for c in sha256)):
        raise GraphError(f"model file source: sha256 must be {SHA256_HEX} lowercase hex digits, got {sha256!r:.80}")
    if loss is not None and (not isinstance(loss, str) or not loss):
        raise GraphError(f"model file source: loss must be a loss head's name, got {loss!r:.40}")
    return ModelSource(MODEL_FILE, (("path", path), ("sha256", sha256)) + ((("loss", loss),) if loss else ()))


def _check_real(name: str, value: Any, low: float, low_inclusive: bool, high: float | None) -> float:
    """`value` as a float if it is a finite number in the range, else a GraphError naming it."""
    bound = f"{'>=' if low_inclusive else '>'} {low:g}" + (f" and < {high:g}" if high is not None else "")
    if isinstance(value, Real) and not isinstance(value, bool):
        x = float(value)
        if math.isfinite(x) and (x >= low if low_inclusive else x > low) and (high is None or x < high):
            return x
    what = "learning rate lr" if name == "lr" else name
    raise GraphError(f"training_graph: {what}={value!r} is invalid; expected a finite float {bound}")


@dataclass(frozen=True, slots=True)
class OptimizerSettings:
    """How `training_graph` made the update: every hyperparameter, checked when the record is made.

    Ranges: lr > 0, 0 <= momentum < 1, 0 <= beta1, beta2 < 1, eps > 0 (all finite floats; ints are
    converted, bools and strings refused); step a positive int (Adam's bias-correction step).
    """

    optimizer: str = "sgd"
    lr: float = 0.01
    momentum: float = 0.9
    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-8
    step: int = 1

    def __post_init__(self) -> None:
        if self.optimizer not in OPTIMIZERS:
            raise GraphError(f"training_graph: optimizer must be one of {OPTIMIZERS}, got {self.optimizer!r}")
        for name, low, low_inclusive, high in (("lr", 0.0, False, None), ("momentum", 0.0, True, 1.0),
                                                ("beta1", 0.0, True, 1.0), ("beta2", 0.0, True, 1.0),
                                                ("eps", 0.0, False, None)):
            object.__setattr__(self, name, _check_real(name, getattr(self, name), low, low_inclusive, high))
        if not isinstance(self.step, Integral) or isinstance(self.step, bool) or self.step < 1:
            raise GraphError(f"training_graph: step={self.step!r} is invalid; expected a positive int")
        object.__setattr__(self, "step", int(self.step))

    def kwargs(self) -> dict[str, Any]:
        """The keyword arguments of `training_graph` that rebuild this update."""
        return {f.name: getattr(self, f.name) for f in fields(self)}



@dataclass(frozen=True, slots=True)
class AppliedPass:
    """One rewrite pass that changed a graph, as `optimize` applied it: its name (a key of passes.PASSES)
    and, for a sited pass restricted to some places, the ids of their anchor nodes in the graph it was
    given (None: everywhere it matched). Replaying a graph's `passes` in order on the graph its `source`
    builds gives the graph again: ids are a topological order, and every pass is deterministic."""

    name: str
    only: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise GraphError(f"applied pass: name must be a pass name, got {self.name!r}")
        if self.only is None:
            return
        try:
            ids = list(self.only)
        except TypeError:
            raise GraphError(f"applied pass {self.name!r}: only must be node ids or None, got {self.only!r}") from None
        if not ids or not all(isinstance(i, Integral) and not isinstance(i, bool) and i >= 0 for i in ids):
            raise GraphError(f"applied pass {self.name!r}: only must be a non-empty set of node ids (ints >= 0) or "
                             f"None for everywhere, got {self.only!r}")
        object.__setattr__(self, "only", tuple(sorted({int(i) for i in ids})))

    @property
    def label(self) -> str:
        """"merge_qkv" (everywhere) or "merge_qkv@%12,%40" (the places anchored at nodes 12 and 40)."""
        return self.name if self.only is None else f"{self.name}@" + ",".join(f"%{i}" for i in self.only)
