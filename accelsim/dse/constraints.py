"""Feasibility constraints of a sweep: "fits" or `METRIC OP NUMBER`, parsed with a regex (never eval)
and judged on a point's metrics."""
from __future__ import annotations

import math
import operator
import re
from dataclasses import dataclass
from typing import Callable

from accelsim.dse.metrics import METRICS, unknown_metric

OPERATORS: dict[str, Callable[[float, float], bool]] = {
    "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge, "==": operator.eq, "!=": operator.ne}
_NUMBER = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?"
_COMPARISON = re.compile(rf"\s*([A-Za-z_][A-Za-z0-9_]*)\s*(<=|>=|==|!=|<|>)\s*({_NUMBER})\s*")
FITS = "fits"
MAX_CONSTRAINT_CHARS = 200


@dataclass(frozen=True)
class Constraint:
    """`metric op bound`, or the schedule fitting the memories (metric None)."""

    text: str
    metric: str | None = None
    op: str = "<="
    bound: float = 0.0

    def holds(self, metrics: dict[str, float], fits: bool) -> bool:
        """Whether the point meets it; a NaN metric never does (it cannot be shown to)."""
        if self.metric is None:
            return fits
        value = metrics.get(self.metric, math.nan)
        return not math.isnan(value) and OPERATORS[self.op](value, self.bound)

    def violation(self, metrics: dict[str, float], fits: bool) -> float:
        """0 when it holds, else how far off (at least 1e-12; 1 for "fits", "!=" or a NaN metric): the
        value Optuna's constraints_func wants, where <= 0 is feasible."""
        if self.holds(metrics, fits):
            return 0.0
        value = metrics.get(self.metric, math.nan) if self.metric is not None else math.nan
        if self.metric is None or self.op == "!=" or not math.isfinite(value):
            return 1.0
        return max(abs(value - self.bound), 1e-12)


def parse_constraint(text: object) -> Constraint | str:
    """The constraint, or why `text` is not one (a problem message without its key path)."""
    known = "fits, or METRIC OP NUMBER with OP one of " + " ".join(OPERATORS) + ", e.g. 'area_mm2 < 300'"
    if not isinstance(text, str):
        return f"expected a string ({known}), got {type(text).__name__}"
    if len(text) > MAX_CONSTRAINT_CHARS:
        return f"a constraint of {len(text)} characters (at most {MAX_CONSTRAINT_CHARS}); expected {known}"
    if text.strip() == FITS:
        return Constraint(text=text.strip())
    m = _COMPARISON.fullmatch(text)
    if m is None:
        return f"cannot read {text!r}; expected {known}"
    metric, op, number = m.groups()
    if metric not in METRICS:
        return f"{text!r}: {unknown_metric(metric)}"
    bound = float(number)
    if not math.isfinite(bound):
        return f"{text!r}: the bound {number} is not a finite number"
    return Constraint(text=text.strip(), metric=metric, op=op, bound=bound)
