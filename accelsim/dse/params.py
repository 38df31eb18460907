"""A sweep's parameters as typed records (hardware key path, step option or model option), and one
point's values split into what each stage takes: hardware overrides, step options, model options."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from accelsim.dse.spec import RangeSpec, RunOptions, SweepSpec

OPTION_PREFIX = "options."
MODEL_PREFIX = "model."
TIE = ","
"""Separates the hardware paths of one tied parameter."""


@dataclass(frozen=True)
class Parameter:
    """One swept key. `kind`: "hw" (a key path into the hardware, as --hw-set takes), "option" (a step
    option, `options.microbatches`) or "model" (a model option, `model.width`); `name` is the key
    without its prefix. A hardware key may tie several paths, separated by commas
    ("chips.0.units.mxu.array.rows, chips.0.units.mxu.array.cols": a square array): each point sets
    all of them to its value (`paths`). Exactly one of `values` (a list) and `range` is set."""

    key: str
    kind: str
    name: str
    values: tuple[Any, ...] | None = None
    range: RangeSpec | None = None

    @property
    def paths(self) -> tuple[str, ...]:
        """The hardware key paths this parameter sets (one, or several tied by commas)."""
        return tuple(part.strip() for part in self.name.split(TIE)) if self.kind == "hw" else (self.name,)

    @property
    def dtype(self) -> str:
        """The results column's type: "bool", "int", "float" or "str"."""
        if self.range is not None:
            return "int" if self.range.integer else "float"
        return type(self.values[0]).__name__

    def count(self) -> float:
        """Distinct values (inf for a float range without a step)."""
        return len(self.values) if self.values is not None else self.range.count()


def kind_of(key: str) -> tuple[str, str]:
    """(kind, name) of a parameter key."""
    if key.startswith(OPTION_PREFIX):
        return "option", key.removeprefix(OPTION_PREFIX)
    if key.startswith(MODEL_PREFIX):
        return "model", key.removeprefix(MODEL_PREFIX)
    return "hw", key


def parameters(spec: SweepSpec) -> list[Parameter]:
    """The spec's parameters in the order they are listed (a grid varies the last fastest)."""
    out = []
    for key, given in spec.parameters.items():
        kind, name = kind_of(key)
        if isinstance(given, RangeSpec):
            out.append(Parameter(key, kind, name, range=given))
        else:
            out.append(Parameter(key, kind, name, values=tuple(given)))
    return out


@dataclass(frozen=True)
class PointConfig:
    """What one point compiles: the hardware overrides (hw_set, then the point's), the step options and
    the model options (model_options, then the point's)."""

    hw_overrides: dict[str, Any]
    options: RunOptions
    model_options: dict[str, Any]


def point_config(spec: SweepSpec, params: dict[str, Any]) -> PointConfig:
    """Split a point's values by kind over the spec's fixed settings. Step options are validated as in
    the spec (a bad one raises pydantic's ValidationError; callers turn it into their own error)."""
    hw, options, model = dict(spec.hw_set), {}, dict(spec.model_options)
    for key, value in params.items():
        kind, name = kind_of(key)
        if kind == "hw":
            hw.update({path.strip(): value for path in name.split(TIE)})
        else:
            {"option": options, "model": model}[kind][name] = value
    run = RunOptions.model_validate({**spec.options.model_dump(), **options}) if options else spec.options
    return PointConfig(hw_overrides=hw, options=run, model_options=model)
