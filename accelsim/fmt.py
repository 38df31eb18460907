"""Numbers as the CLI prints them: one function per kind of quantity, so every command (and every plot
title) writes a count, a time, a size or a rate the same way. JSON output keeps the raw numbers; only printed text goes through here.

Conventions: counts and cycles with thousands separators; times, rates, energy and power with an SI prefix
and 4 significant digits ("49.26 us", "8.868 Msamples/s"); sizes in bytes with binary prefixes ("1.777 MiB",
as memories are sized); bandwidths are rates ("18.43 TB/s"); fractions as percentages ("43.4%"). Values
an SI prefix cannot reach, and small errors, are written "1.37e-8" (never Python's zero-padded "1.37e-08").
NaN and infinities print as "nan", "inf" and "-inf"; no function raises on a number."""
from __future__ import annotations

import math

_SI = ((1e30, "Q"), (1e27, "R"), (1e24, "Y"), (1e21, "Z"), (1e18, "E"), (1e15, "P"), (1e12, "T"), (1e9, "G"),
       (1e6, "M"), (1e3, "k"), (1.0, ""), (1e-3, "m"), (1e-6, "u"), (1e-9, "n"), (1e-12, "p"), (1e-15, "f"),
       (1e-18, "a"), (1e-21, "z"), (1e-24, "y"), (1e-27, "r"), (1e-30, "q"))
_BINARY = ((2**80, "YiB"), (2**70, "ZiB"), (2**60, "EiB"), (2**50, "PiB"), (2**40, "TiB"), (2**30, "GiB"),
           (2**20, "MiB"), (2**10, "KiB"))


def _nonfinite(x: float) -> str | None:
    """"nan", "inf" or "-inf" for a non-finite x; None for a finite one."""
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return None


def _special(x: float) -> str | None:
    """"nan", "inf", "-inf" or "0" for the values every plain-number format prints the same way; None for
    the others."""
    bad = _nonfinite(x)
    if bad is not None:
        return bad
    return "0" if x == 0 else None


def _sig(x: float, digits: int) -> str:
    """`x` (finite, 1 <= |x| < 1000 or 0) to `digits` significant digits, trailing zeros dropped."""
    return f"{x:.{digits}g}"


def sci(x: float, digits: int = 3) -> str:
    """Scientific notation without zero padding or a plus sign: 1.37e-8, 6.02e23, 0, nan."""
    special = _special(float(x))
    if special is not None:
        return special
    mantissa, exponent = f"{x:.{digits - 1}e}".split("e")
    mantissa = mantissa.rstrip("0").rstrip(".") if "." in mantissa else mantissa
    return f"{mantissa}e{int(exponent)}"


def number(x: float, digits: int = 4) -> str:
    """A plain number to `digits` significant digits: 40.25, 0.02827, 12,346 (separators from 10,000 on);
    outside 0.01..1e15 in scientific notation (4.765e-3)."""
    x = float(x)
    special = _special(x)
    if special is not None:
        return special
    if abs(x) >= 1e15 or abs(x) < 0.01:
        return sci(x, digits)
    if abs(x) >= 10**digits:
        return f"{x:,.0f}"
    text = f"{x:.{digits}g}"
    return text if "e" not in text else f"{x:,.0f}"


def count(n: float) -> str:
    """A count with thousands separators: 1,234,567; a non-integer is rounded; beyond 1e18 scientific."""
    if isinstance(n, bool):
        n = int(n)
    if isinstance(n, int):
        return f"{n:,}"
    x = float(n)
    bad = _nonfinite(x)
    if bad is not None:
        return bad
    return f"{round(x):,}" if abs(x) < 1e18 else sci(x, 4)


def cycles(n: float) -> str:
    """Clock cycles: "44,338 cycles"."""
    return f"{count(n)} cycles"


def si(x: float, unit: str, digits: int = 4) -> str:
    """`x` with an SI prefix (q up to Q) and `digits` significant digits: "49.26 us", "737.3 Top/s"."""
    x = float(x)
    special = _special(x)
    if special is not None:
        return f"{special} {unit}"
    for k, (factor, prefix) in enumerate(_SI):
        scaled = x / factor
        if abs(scaled) < 1:
            continue
        text = _sig(scaled, digits)
        if abs(float(text)) >= 1000:  # beyond the largest prefix, or 999.96 k rounding up to 1000 k
            if k == 0:
                break
            factor, prefix = _SI[k - 1]
            text = _sig(x / factor, digits)
        return f"{text} {prefix}{unit}"
    return f"{sci(x, digits)} {unit}"


def seconds(x: float) -> str:
    """A simulated time: "49.26 us", "1.2 s"."""
    return si(x, "s")


def wall(x: float) -> str:
    """Wall-clock time a command spent: "0.56 s", "12.3 s", "2 min 05 s"."""
    x = float(x)
    bad = _nonfinite(x)
    if bad is not None:
        return f"{bad} s"
    if x < 0 or x >= 1e7:
        return seconds(x)
    if x < 10:
        return f"{x:.2f} s"
    if x < 60:
        return f"{x:.1f} s"
    minutes, secs = divmod(round(x), 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    return f"{minutes // 60:,} h {minutes % 60:02d} min"


def nbytes(n: float) -> str:
    """A size in bytes with a binary prefix: "512 B", "1.777 MiB", "220 MiB"."""
    x = float(n)
    bad = _nonfinite(x)
    if bad is not None:
        return f"{bad} B"
    if abs(x) >= 2**90:
        return f"{sci(x, 4)} B"
    for k, (factor, unit) in enumerate(_BINARY):
        if abs(x) < factor:
            continue
        text = _sig(x / factor, 4)
        if abs(float(text)) >= 1024 and k > 0:  # 1023.99 KiB rounds to 1024 KiB: say 1 MiB
            factor, unit = _BINARY[k - 1]
            text = _sig(x / factor, 4)
        return f"{text} {unit}"
    if x == int(x):
        return f"{int(x)} B"
    return f"{number(x)} B"


def rate(x: float, unit: str = "samples/s") -> str:
    """A rate with an SI prefix: "20.3 ksamples/s", "18.43 TB/s"."""
    return si(x, unit)


def ratio(x: float, digits: int = 3) -> str:
    """A ratio near 1 with `digits` decimals: "1.018"."""
    x = float(x)
    bad = _nonfinite(x)
    if bad is not None:
        return bad
    return f"{x:.{digits}f}" if abs(x) < 1e4 else number(x)


def factor(x: float) -> str:
    """How many times: "1.000x"."""
    return f"{ratio(x)}x"


def percent(fraction: float, digits: int = 1) -> str:
    """A fraction as a percentage: 0.434 -> "43.4%"."""
    x = float(fraction)
    bad = _nonfinite(x)
    if bad is not None:
        return f"{bad}%"
    pct = 100 * x
    return f"{pct:.{digits}f}%" if abs(pct) < 1e6 else f"{number(pct)}%"


def change(before: float, after: float) -> str:
    """The signed relative change from `before` to `after`: "+0.22%", "-24.69%"; "n/a" from 0."""
    if not before or not all(math.isfinite(float(v)) for v in (before, after)):
        return "n/a"
    pct = 100 * (after - before) / before
    return f"{pct:+.2f}%" if abs(pct) < 1e6 else f"{'+' if pct > 0 else ''}{number(pct)}%"


def error(x: float) -> str:
    """A numerical error or tolerance, 3 significant digits: "0.25", "1e-4", "1.37e-8", "0"."""
    x = float(x)
    special = _special(x)
    if special is not None:
        return special
    if 0.01 <= abs(x) < 1000:
        return f"{x:.3g}"
    return number(x) if 1000 <= abs(x) < 1e15 else sci(x, 3)


def plural(n: int, word: str, words: str | None = None) -> str:
    """"1 micro-batch", "2 micro-batches": the count with separators and the right form of the word."""
    return f"{count(n)} {word if n == 1 else (words or word + 's')}"


def metric(key: str, value: object) -> str:
    """A value of a summary dict by its key's unit suffix (STYLE: units in names): `*_cycles` cycles,
    `*_bytes` bytes, `*_s` seconds, `*_per_s` rates, `*utilization*`/`*fraction*`/`*_of_peak` percentages of
    a fraction, `*pct*`/`*percent*` percentages already scaled, `*tops*` tera-ops per second (printed in
    op/s); a dict as "key value, key value"; anything else as a plain number."""
    if value is None:
        return "n/a"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        return ", ".join(f"{k} {metric(key, v)}" for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return ", ".join(metric(key, v) for v in value)
    if not isinstance(value, (int, float)):
        return str(value)
    k = key.lower()
    if "pct" in k or "percent" in k:
        return f"{number(value)}%"
    if "utilization" in k or "fraction" in k or k.endswith("of_peak"):
        return percent(value)
    if k.endswith("tops_per_w"):
        return si(value * 1e12, "OPS/W")
    if "tops" in k:
        return si(value * 1e12, "op/s")
    if k.endswith("_bytes_per_s"):
        return si(value, "B/s")
    if k.endswith(("_ops_per_s", "_flops_per_s")):
        return si(value, "op/s")
    if k.endswith("_per_s"):
        return si(value, k.rsplit("_per_s", 1)[0].rsplit("_", 1)[-1] + "/s")
    if k.endswith("_bytes"):
        return nbytes(value)
    if k.endswith("_cycles"):
        return cycles(value)
    if k.endswith("_s"):
        return seconds(value)
    if k.endswith("_j"):
        return si(value, "J")
    if k.endswith("_w"):
        return si(value, "W")
    if k.endswith("_hz"):
        return si(value, "Hz")
    if k.endswith("_mm2"):
        return f"{number(value)} mm^2"
    if k.endswith("ratio"):
        return ratio(value)
    return count(value) if isinstance(value, int) else number(value)
