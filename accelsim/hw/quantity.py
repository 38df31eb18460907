"""Readable quantities in hardware files: "24 MiB", "34 GB/s", "700 MHz", or plain numbers -> finite numbers.

Only the syntax and finiteness are checked here; the physical range of each field is checked by the
schema (hw/fields.py RANGES). Strings are multiplied out exactly (Decimal), so "1.1 GB" is the whole
number 1100000000 and a capacity given that way passes the whole-bytes check.
"""
from __future__ import annotations

import math
import numbers
import re
import sys
from decimal import Decimal, InvalidOperation

_BYTES = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12, "pb": 10**15, "eb": 10**18,
          "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40, "pib": 2**50, "eib": 2**60}
_HZ = {"": 1, "hz": 1, "khz": 10**3, "mhz": 10**6, "ghz": 10**9, "thz": 10**12}
_NUMBER = r"\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*"
MAX_QUANTITY_CHARS = 64  # "1.5 GiB/s" needs a dozen; a longer string is garbage, not a quantity


def _finite(x: float | int, value: object, what: str) -> float | int:
    if isinstance(x, float) and not math.isfinite(x):
        raise ValueError(f"expected {what}, got {value!r} (not a finite number)")
    return x


def parse_number(value: object, what: str = "a number") -> float | int:
    """A finite int or float (numpy scalars and numeric strings such as "1e3" included; YAML 1.1 reads
    `1e3` as a string). Refuses booleans, inf, nan and anything that overflows a float."""
    if isinstance(value, bool) or type(value).__name__ == "bool_":
        raise ValueError(f"expected {what}, got {value!r} (a boolean, not a number)")
    if isinstance(value, numbers.Integral):
        if abs(int(value)) > sys.float_info.max:  # no field's range reaches this; it would be inf as a float
            raise ValueError(f"expected {what}, got an integer of about "
                             f"{int(int(value).bit_length() * 0.30103)} digits, which is too large")
        return int(value)
    if isinstance(value, numbers.Real):
        try:
            return _finite(float(value), value, what)
        except OverflowError:
            raise ValueError(f"expected {what}, got {value!r}, which is too large") from None
    if isinstance(value, str) and len(value) <= MAX_QUANTITY_CHARS and re.fullmatch(_NUMBER, value):
        return _exact(value.strip(), 1, value, what)
    raise ValueError(f"expected {what}, got {_short(value)}")


def _short(value: object) -> str:
    text = repr(value) if isinstance(value, (str, int, float)) else type(value).__name__
    return text if len(text) <= 80 else text[:77] + "..."


def _exact(number: str, factor: int, value: object, what: str) -> float | int:
    """number * factor, exactly; an int when whole, else a float; refused when not finite as a float."""
    try:
        product = Decimal(number) * factor
        whole = product == product.to_integral_value()
    except (InvalidOperation, ArithmeticError):
        raise ValueError(f"expected {what}, got {value!r}, which is too large") from None
    as_float = float(product)
    if not math.isfinite(as_float):
        raise ValueError(f"expected {what}, got {value!r}, which is too large")
    return int(product) if whole else as_float


def _parse(value: object, units: dict[str, int], suffix: str, what: str) -> float | int:
    if not isinstance(value, str):
        return parse_number(value, what)
    m = None
    if len(value) <= MAX_QUANTITY_CHARS:
        m = re.fullmatch(_NUMBER + r"([A-Za-z]*)" + suffix + r"\s*", value)
    if not m or m.group(2).lower() not in units:
        raise ValueError(f"expected {what}, got {_short(value)}")
    return _exact(m.group(1), units[m.group(2).lower()], value, what)


def parse_bytes(value: object) -> float | int:
    """'24 MiB' -> 25165824; numbers pass through as bytes."""
    return _parse(value, _BYTES, "", "a size like 4096 or '24 MiB' / '1.5 GB'")


def parse_bandwidth(value: object) -> float | int:
    """'34 GB/s' -> bytes per second."""
    return _parse(value, _BYTES, r"/s", "a bandwidth like '34 GB/s' or '80 TB/s'")


def parse_hz(value: object) -> float | int:
    """'700 MHz' -> 7e8."""
    return _parse(value, _HZ, "", "a frequency like '700 MHz' or '1.25 GHz'")
