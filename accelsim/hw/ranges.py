"""Checks behind the hardware schema: a number inside a physical range, a plain identifier, and
cross-field problems reported at their own key path.

The ranges themselves are one table in hw/fields.py (RANGES); this module only knows how to apply one.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError
from pydantic_core import InitErrorDetails, PydanticCustomError

from accelsim.hw.quantity import parse_number
from accelsim.hw.tech import NODES, known_nodes

NAME_PATTERN = r"[A-Za-z_][A-Za-z0-9_.-]*"
MAX_NAME_CHARS = 64
# Names the scheduler and simulator use for resources that are not units or memories: a unit or memory
# spelt like them would be confused with a link, a collective or a task kind in schedules and traces.
RESERVED_NAMES = frozenset({"link", "links", "allreduce", "all_reduce", "reduce_scatter", "all_gather",
                            "transfer", "accumulate", "recompute", "node", "host", "allreduce_tree"})


@dataclass(frozen=True)
class Range:
    """Inclusive bounds of one kind of quantity, in `unit`; `integer` asks for a whole number; where 0 is
    allowed, `min_nonzero` refuses the tiny values (denormals such as 1e-320) between 0 and it."""

    lo: float
    hi: float
    unit: str
    integer: bool = False
    min_nonzero: float = 0.0
    why: str = ""

    def describe(self) -> str:
        kind = "a whole number" if self.integer else "a finite number"
        tiny = f" (0, or at least {self.min_nonzero:g})" if self.min_nonzero else ""
        return f"expected {kind} from {_fmt(self.lo)} to {_fmt(self.hi)} {self.unit}{tiny}"


def _fmt(x: float) -> str:
    """2**60 as '2^60' rather than 1.15292e+18; everything else as %g."""
    if isinstance(x, int) and x >= 2**20 and x & (x - 1) == 0:
        return f"2^{x.bit_length() - 1}"
    return f"{x:g}"


def check_in_range(value: Any, rng: Range, parse: Callable[[Any], float | int] | None = None) -> float | int:
    """`value` parsed by `parse` (default: a plain finite number), then refused unless whole (when asked)
    and inside `rng`."""
    x = parse(value) if parse is not None else parse_number(value, rng.describe().removeprefix("expected "))
    if not rng.lo <= x <= rng.hi or 0 < abs(x) < rng.min_nonzero:
        raise ValueError(rng.describe())
    if rng.integer and isinstance(x, float):
        if not x.is_integer():
            raise ValueError(f"{rng.describe()} (a fraction is not allowed here)")
        x = int(x)
    return x


def in_range(rng: Range, parse: Callable[[Any], float | int] | None = None) -> Callable[[Any], float | int]:
    """A pydantic BeforeValidator function for one field kind."""
    def check(value: Any) -> float | int:
        return check_in_range(value, rng, parse)
    check.__name__ = f"in_range_{rng.unit.replace(' ', '_').replace('/', '_per_')}"
    return check


def check_name(value: Any) -> str:
    """A plain identifier (letters, digits, `_ . -`, not starting with a digit), at most 64 characters,
    and not a reserved resource name: names end up in schedules, traces and file names."""
    if not isinstance(value, str):
        raise ValueError("expected a name (a string such as 'mxu' or 'sram')")
    if len(value) > MAX_NAME_CHARS:
        raise ValueError(f"a name may have at most {MAX_NAME_CHARS} characters, this one has {len(value)}")
    if not re.fullmatch(NAME_PATTERN, value):
        raise ValueError("a name must be a plain identifier: a letter or '_' followed by letters, digits, "
                         "'_', '.' or '-' (no spaces, ':' or '/')")
    if value.lower() in RESERVED_NAMES:
        raise ValueError(f"{value!r} is reserved for the scheduler's own resources "
                         f"({', '.join(sorted(RESERVED_NAMES))}); choose another name")
    return value


def check_technology_nm(value: Any) -> int:
    """A node of the published-figures table (hw/tech.py NODES), in nm: area and energy are derived there."""
    expected = f"a technology node in nm from the table in accelsim/hw/tech.py ({known_nodes()})"
    x = parse_number(value, expected)
    if x not in NODES:
        raise ValueError(f"expected {expected}; other nodes have no published figures there")
    return int(x)


Problem = tuple[tuple[str | int, ...], str, Any]  # (key path, message, offending value or None)


def raise_problems(title: str, problems: Sequence[Problem]) -> None:
    """Report cross-field problems at their own key paths (relative to the model being validated):
    pydantic prefixes the location of the model itself, so each reads like a field error. A problem
    without one offending value (None) carries an empty mapping, which error reports do not print."""
    if problems:
        raise ValidationError.from_exception_data(title, [
            InitErrorDetails(type=PydanticCustomError("hw_config", "{msg}", {"msg": msg}), loc=loc,
                             input={} if value is None else value)
            for loc, msg, value in problems])
