"""Readable quantities in hardware files: "24 MiB", "34 GB/s", "700 MHz", or plain numbers."""
from __future__ import annotations

import re

_BYTES = {"": 1, "b": 1, "kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12,
          "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}
_HZ = {"hz": 1, "khz": 1e3, "mhz": 1e6, "ghz": 1e9}
_NUMBER = r"\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*"


def _parse(value: object, units: dict[str, float], suffix: str, what: str) -> float:
    if isinstance(value, bool):
        raise ValueError(f"expected {what}, got {value!r}")
    if isinstance(value, (int, float)):
        return float(value)
    if not isinstance(value, str):
        raise ValueError(f"expected {what}, got {value!r}")
    m = re.fullmatch(_NUMBER + r"([A-Za-z]*)" + suffix + r"\s*", value)
    if not m or m.group(2).lower() not in units:
        raise ValueError(f"expected {what}, got {value!r}")
    return float(m.group(1)) * units[m.group(2).lower()]


def parse_bytes(value: object) -> float:
    """'24 MiB' -> 25165824; numbers pass through as bytes."""
    return _parse(value, _BYTES, "", "a size like 4096 or '24 MiB' / '1.5 GB'")


def parse_bandwidth(value: object) -> float:
    """'34 GB/s' -> bytes per second."""
    return _parse(value, _BYTES, r"/s", "a bandwidth like '34 GB/s' or '80 TB/s'")


def parse_hz(value: object) -> float:
    """'700 MHz' -> 7e8."""
    return _parse(value, _HZ, "", "a frequency like '700 MHz' or '1.25 GHz'")
