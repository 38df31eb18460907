"""Readable quantities in hardware files: "24 MiB", "34 GB/s", "700 MHz", or plain numbers -> finite numbers.

Sizes and bandwidths: the letter B is a byte and b a bit, as on data sheets: "32 MB" and "32 MiB" are
bytes, "32 Mb" and "32 Mib" are bits (a byte is 8 bits), so "200 Gb/s" (a NIC's or a link's usual
rating) is 25e9 bytes/s. A size given in bits must be a whole number of bytes ("12 b" is refused). The
prefix may be written in either case (k or K, m or M: "kB" and "KB" are both 1000 bytes); "Ki", "Mi", ...
are powers of 1024. A plain number is bytes (bytes/s for a bandwidth).

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

# A size's unit is a prefix (any case) and B (bytes) or b (bits); no unit at all is bytes.
_PREFIXES = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12, "p": 10**15, "e": 10**18,
             "ki": 2**10, "mi": 2**20, "gi": 2**30, "ti": 2**40, "pi": 2**50, "ei": 2**60}
_BITS_PER_BYTE = 8
_HZ = {"": 1, "hz": 1, "khz": 10**3, "mhz": 10**6, "ghz": 10**9, "thz": 10**12}
# The syntax, as regular expressions that are valid in Python and in JSON Schema (ECMA 262) alike: the
# parsers below and the schema `accelsim hw schema` writes (hw/fields.py) use the same ones.
NUMBER = r"[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?"
SIZE_UNIT = r"(?:[KkMmGgTtPpEe][Ii]?)?[Bb]"
HZ_UNIT = r"[KkMmGgTt]?[Hh][Zz]"
MAX_QUANTITY_CHARS = 64  # "1.5 GiB/s" needs a dozen; a longer string is garbage, not a quantity


def pattern(unit: str | None = None, suffix: str = "") -> str:
    """The whole-string pattern of a number (group 1), then with `unit` an optional unit (group 2) and
    `suffix` ("/s")."""
    if unit is None:
        return rf"^\s*({NUMBER})\s*$"
    return rf"^\s*({NUMBER})\s*((?:{unit})?){suffix}\s*$"


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
    if isinstance(value, str) and len(value) <= MAX_QUANTITY_CHARS and re.fullmatch(pattern(), value):
        return _exact(value.strip(), 1, value, what)
    raise ValueError(f"expected {what}, got {_short(value)}")


def _short(value: object) -> str:
    text = repr(value) if isinstance(value, (str, int, float)) else type(value).__name__
    return text if len(text) <= 80 else text[:77] + "..."


def _exact(number: str, factor: int, value: object, what: str, divisor: int = 1) -> float | int:
    """number * factor / divisor, exactly; an int when whole, else a float; refused when not finite as a
    float."""
    try:
        product = Decimal(number) * factor / divisor
        whole = product == product.to_integral_value()
    except (InvalidOperation, ArithmeticError):
        raise ValueError(f"expected {what}, got {value!r}, which is too large") from None
    as_float = float(product)
    if not math.isfinite(as_float):
        raise ValueError(f"expected {what}, got {value!r}, which is too large")
    return int(product) if whole else as_float


def _parse(value: object, unit: str, suffix: str, what: str) -> tuple[str, str] | float | int:
    """A number as is, or a string split into (number, unit) by pattern(unit, suffix)."""
    if not isinstance(value, str):
        return parse_number(value, what)
    m = re.fullmatch(pattern(unit, suffix), value) if len(value) <= MAX_QUANTITY_CHARS else None
    if not m:
        raise ValueError(f"expected {what}, got {_short(value)}")
    return m.group(1), m.group(2)


def _parse_bytes(value: object, suffix: str, what: str, whole: bool) -> float | int:
    """A size (suffix "") or a bandwidth (suffix "/s") in bytes; B is bytes, b bits (see the module
    docstring). `whole`: a count of bits must make whole bytes."""
    parsed = _parse(value, SIZE_UNIT, suffix, what)
    if not isinstance(parsed, tuple):
        return parsed
    number, unit = parsed
    factor = _PREFIXES[unit[:-1].lower()]
    if not unit.endswith("b"):  # B, or no unit at all: bytes
        return _exact(number, factor, value, what)
    n_bytes = _exact(number, factor, value, what, divisor=_BITS_PER_BYTE)
    if whole and isinstance(n_bytes, float):
        raise ValueError(f"{value.strip()!r} is {n_bytes * _BITS_PER_BYTE:g} bits = {n_bytes:g} bytes (a lowercase "
                         f"b is a bit, 8 to a byte), and a size is a whole number of bytes; write bytes with a "
                         f"capital B ('{number} {unit[:-1]}B') or a number of bits divisible by 8")
    return n_bytes


def parse_bytes(value: object) -> float | int:
    """'24 MiB' -> 25165824, '32 Mb' (megabits) -> 4000000; numbers pass through as bytes."""
    return _parse_bytes(value, "", "a size like 4096, '24 MiB' or '1.5 GB' (B: bytes, b: bits)", whole=True)


def parse_bandwidth(value: object) -> float | int:
    """'34 GB/s' -> 34e9 bytes per second; '200 Gb/s' (gigabits) -> 25e9."""
    return _parse_bytes(value, r"/s", "a bandwidth like '34 GB/s' or '200 Gb/s' (B: bytes, b: bits)", whole=False)


def parse_hz(value: object) -> float | int:
    """'700 MHz' -> 7e8."""
    what = "a frequency like '700 MHz' or '1.25 GHz'"
    parsed = _parse(value, HZ_UNIT, "", what)
    if not isinstance(parsed, tuple):
        return parsed
    return _exact(parsed[0], _HZ[parsed[1].lower()], value, what)
