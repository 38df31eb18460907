"""The sweep specification's schema (pydantic, unknown keys forbidden): what a spec file may say, each
value's type and range. Cross-field rules (known metrics, grid size, parameter paths) are in checks.py."""
from __future__ import annotations

import math
import re
from typing import Annotated, Any, Literal, Union

from pydantic import (AfterValidator, BaseModel, ConfigDict, Discriminator, Field, PrivateAttr,
                      StrictBool, StrictStr, Tag, field_validator, model_validator)

from accelsim.graph.provenance import OPTIMIZERS
from accelsim.schedule.options import StepOptions

MAX_POINTS = 100_000
"""The most points one sweep evaluates (a grid's size, or random/optuna's `points`): a point takes
0.1 s to minutes, so more is a mistake in the spec rather than a plan."""
MAX_VALUES = 1_000
"""The most values one parameter lists: each hardware value is validated on its own before any work."""
MAX_TEXT_CHARS = 4096
MAX_INT = 2**63 - 1  # results are int64 columns


class SpecModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


_EXPONENT_NUMBER = re.compile(r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)[eE][-+]?\d+")


def _yaml11_number(value: Any) -> Any:
    """PyYAML (YAML 1.1) reads 1.0e10 and 1e10 as strings (it wants 1.0e+10): take them as the numbers
    they are written as."""
    if isinstance(value, str) and _EXPONENT_NUMBER.fullmatch(value.strip()):
        return float(value)
    return value


def _scalar(value: Any) -> Any:
    """One value of a parameter's list: a finite number, a string or a bool (the types a hardware file,
    a model option or a step option takes)."""
    value = _yaml11_number(value)
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        if abs(value) > MAX_INT:
            raise ValueError("expected an integer of at most 19 digits")
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError("expected a finite number")
        return value
    if isinstance(value, str):
        if len(value) > MAX_TEXT_CHARS:
            raise ValueError(f"expected a string of at most {MAX_TEXT_CHARS} characters, got {len(value)}")
        return value
    raise ValueError(f"expected a number, a string or true/false, not a {type(value).__name__}")


def _one_type(values: list[Any]) -> list[Any]:
    """The values of one parameter share a type; ints among floats become floats (64 and 1.5e2 are
    both numbers of a float parameter), any other mix is refused."""
    kinds = {type(v) for v in values}
    if kinds == {int, float}:
        return [float(v) for v in values]
    if len(kinds) > 1:
        names = " and ".join(sorted(k.__name__ for k in kinds))
        raise ValueError(f"mixes values of type {names}; give every value of a parameter the same type")
    seen: set[Any] = set()
    for v in values:
        if v in seen:
            raise ValueError(f"lists {_shown(v)} twice; give each value once")
        seen.add(v)
    return values


def _number(value: Any) -> Any:
    value = _yaml11_number(value)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError("expected a number")
    if not math.isfinite(value) or abs(value) > MAX_INT:
        raise ValueError("expected a finite number of at most 19 digits")
    return value


Number = Annotated[Any, AfterValidator(_number)]


class RangeSpec(SpecModel):
    """A range of a random or optuna search: floats from low to high (log-uniform with `log`), or
    integers with `int: true`; `step` quantizes it."""

    low: Number
    high: Number
    log: StrictBool = False
    integer: StrictBool = Field(default=False, alias="int")
    step: Number | None = None

    @model_validator(mode="after")
    def _consistent(self) -> "RangeSpec":
        if not self.low < self.high:
            raise ValueError(f"low ({self.low!r}) must be below high ({self.high!r})")
        if self.log and self.low <= 0:
            raise ValueError(f"log: true needs low > 0, got low={self.low!r}")
        if self.step is not None:
            if self.log:
                raise ValueError("step and log: true cannot be combined; give one")
            if self.step <= 0 or self.step > self.high - self.low:
                raise ValueError(f"step ({self.step!r}) must be above 0 and at most high - low")
            count = (self.high - self.low) / self.step
            if abs(count - round(count)) > 1e-9 * max(1.0, count):
                raise ValueError(f"step ({self.step!r}) must divide high - low ({self.high - self.low!r})")
        if self.integer:
            bad = [f"{k}={v!r}" for k, v in (("low", self.low), ("high", self.high), ("step", self.step))
                   if v is not None and float(v) != int(v)]
            if bad:
                raise ValueError(f"int: true needs whole numbers, got {', '.join(bad)}")
        return self

    def count(self) -> float:
        """How many distinct values the range holds (inf for a float range without a step)."""
        if self.step is not None:
            return round((self.high - self.low) / self.step) + 1
        return int(self.high) - int(self.low) + 1 if self.integer else math.inf


Values = Annotated[list[Annotated[Any, AfterValidator(_scalar)]],
                   Field(min_length=1, max_length=MAX_VALUES), AfterValidator(_one_type)]


def _param_tag(value: Any) -> str | None:
    if isinstance(value, (list, tuple)):
        return "values"
    return "range" if isinstance(value, (dict, RangeSpec)) else None


ParamSpec = Annotated[Union[Annotated[Values, Tag("values")], Annotated[RangeSpec, Tag("range")]],
                      Discriminator(_param_tag, custom_error_type="parameter",
                                    custom_error_message="expected a list of values, e.g. [64, 128], or a range, "
                                                         "e.g. {low: 1.0e10, high: 1.0e11, log: true}")]
PARAM_TAGS = ("values", "range")


def _split_word(value: Any) -> Any:
    """YAML reads `on`/`off` as booleans: take them back as the words they were."""
    return {True: "on", False: "off"}.get(value, value) if isinstance(value, bool) else value




class RunOptions(StepOptions):
    """The step every point compiles, as `accelsim run`'s flags say it: every step option (StepOptions:
    micro-batches, replicas, stages, ranks, ZeRO, remat, split, the in-flight window, exact), the training
    step's optimizer (training is the default, as there) and which results a point records."""

    training: StrictBool = True
    optimizer: Literal[OPTIMIZERS] = "sgd"  # type: ignore[valid-type]
    lr: Annotated[Number, Field(gt=0)] = 0.01
    check: StrictBool = False
    simulate: StrictBool = True

    def step(self) -> StepOptions:
        """The step options alone, as compile takes them."""
        return StepOptions(**{k: getattr(self, k) for k in StepOptions.model_fields})


RESULT_OPTIONS = ("check", "simulate")
"""Options that decide which metrics a point records; a parameter may not vary them."""


class SearchSpec(SpecModel):
    """How points are chosen: every combination (grid), `points` seeded draws (random), or `points`
    Optuna trials asked `batch` at a time (optuna)."""

    method: Literal["grid", "random", "optuna"] = "grid"
    points: Annotated[int, Field(strict=True, ge=1)] | None = None
    seed: Annotated[int, Field(strict=True, ge=0, le=2**32 - 1)] = 0
    sampler: Literal["nsga2", "tpe", "random"] = "nsga2"
    batch: Annotated[int, Field(strict=True, ge=1, le=1024)] = 8
    objectives: dict[StrictStr, Literal["max", "min"]] | None = None


Name = Annotated[str, Field(strict=True, pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$")]
Text = Annotated[str, Field(strict=True, min_length=1, max_length=MAX_TEXT_CHARS)]


class SweepSpec(SpecModel):
    """A design-space sweep: one model and step on one base hardware, and the parameters varied."""

    name: Name | None = None
    hw: Text
    hw_set: dict[Text, Any] = {}
    model: Text
    model_options: dict[Text, Any] = {}
    options: RunOptions = RunOptions()
    parameters: Annotated[dict[Text, ParamSpec], Field(min_length=1, max_length=64)]
    search: SearchSpec = SearchSpec()
    constraints: Annotated[list[Text], Field(max_length=64)] = []
    metrics: Annotated[list[Text], Field(min_length=1, max_length=64)] | None = None

    # Set by load_spec: where the spec came from (for messages), the text it was given as, and the
    # base hardware (validated, before hw_set), so that points need neither the file nor its directory.
    _source: str = PrivateAttr(default="<spec>")
    _text: str | None = PrivateAttr(default=None)
    _base_hw: Any = PrivateAttr(default=None)

    @field_validator("parameters", mode="before")
    @classmethod
    def _split_words(cls, value: Any) -> Any:
        """`options.split: [auto, on, off]` as YAML reads it, [auto, True, False], back to words."""
        given = value.get("options.split") if isinstance(value, dict) else None
        if isinstance(given, list):
            return {**value, "options.split": [_split_word(v) for v in given]}
        return value

    @property
    def source(self) -> str:
        return self._source
