"""Node attributes <-> JSON values for graph files, and the type each known attribute must have on load.

JSON has lists, not tuples, and no infinities: tuples are written as lists and read back as tuples; an
infinite float (causal_mask's fill) is written {"float": "inf"} or {"float": "-inf"}. NaN is never written
and never read. On load an attribute the registry's ops use is checked against ATTR_KINDS before any op sees
it, so an edited file gets a message naming the attribute instead of a numpy error mid-evaluation.
"""
from __future__ import annotations

import math
from numbers import Integral, Real
from typing import Any, Callable

import numpy as np

MAX_ATTR_DEPTH = 8


class AttrProblem(ValueError):
    """Why an attribute value is not acceptable (the loader adds file, node and key)."""


def encode(value: Any, depth: int = 0) -> Any:
    """A node attribute as a JSON value."""
    if depth > MAX_ATTR_DEPTH:
        raise AttrProblem("nested too deeply")
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, Integral):
        return int(value)
    if isinstance(value, Real):
        x = float(value)
        if math.isnan(x):
            raise AttrProblem("NaN is not a value a graph file holds")
        return x if math.isfinite(x) else {"float": "inf" if x > 0 else "-inf"}
    if isinstance(value, (tuple, list)):
        return [encode(v, depth + 1) for v in value]
    raise AttrProblem(f"{type(value).__name__} is not plain data (numbers, strings, booleans, tuples)")


def decode(value: Any, depth: int = 0) -> Any:
    """A JSON value as a node attribute (lists become tuples)."""
    if depth > MAX_ATTR_DEPTH:
        raise AttrProblem("nested too deeply")
    if value is None or isinstance(value, (bool, str, int)):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise AttrProblem(f"{value} is not a finite number")
        return value
    if isinstance(value, list):
        return tuple(decode(v, depth + 1) for v in value)
    if isinstance(value, dict) and set(value) == {"float"} and value["float"] in ("inf", "-inf"):
        return float(value["float"])
    raise AttrProblem(f"{value!r:.60} is not a number, string, boolean, list or {{\"float\": \"inf\"}}")


def _int(v: Any) -> bool:
    return isinstance(v, Integral) and not isinstance(v, bool)


def _real(v: Any) -> bool:
    return isinstance(v, Real) and not isinstance(v, bool) and not (isinstance(v, float) and math.isnan(v))


def _ints(v: Any) -> bool:
    return isinstance(v, tuple) and all(_int(x) for x in v)


def _pair(v: Any) -> bool:
    return _ints(v) and len(v) == 2


Check = tuple[str, Callable[[Any], bool]]

ATTR_KINDS: dict[str, Check] = {
    "eps": ("a positive finite number", lambda v: _real(v) and 0 < v < math.inf),
    "axes": ("a list of axes (integers)", _ints),
    "axis": ("an integer axis", _int),
    "keepdims": ("true or false", lambda v: isinstance(v, bool)),
    "transpose_a": ("true or false", lambda v: isinstance(v, bool)),
    "transpose_b": ("true or false", lambda v: isinstance(v, bool)),
    "shape": ("a list of integers", _ints),
    "input_shape": ("a list of integers", _ints),
    "weight_shape": ("a list of integers", _ints),
    "starts": ("a list of integers", _ints),
    "stops": ("a list of integers", _ints),
    "stride": ("a pair of integers", _pair),
    "padding": ("a pair of integers", _pair),
    "dilation": ("a pair of integers", _pair),
    "kernel": ("a pair of integers", _pair),
    "groups": ("an integer", _int),
    "upscale": ("an integer", _int),
    "downscale": ("an integer", _int),
    "num_embeddings": ("an integer", _int),
    "exponent": ("a finite number", lambda v: _real(v) and math.isfinite(v)),
    "fill": ("a number (infinities allowed)", _real),
}

INIT_ARGS: dict[str, Check] = {
    "mean": ("a finite number", lambda v: _real(v) and math.isfinite(v)),
    "std": ("a finite number >= 0", lambda v: _real(v) and 0 <= v < math.inf),
    "low": ("a finite number", lambda v: _real(v) and math.isfinite(v)),
    "high": ("a finite number", lambda v: _real(v) and math.isfinite(v)),
    "value": ("a finite number", lambda v: _real(v) and math.isfinite(v)),
}
"""The keyword arguments of an input's or parameter's initializer (Graph.input, Graph.param)."""


def check_attr(key: str, value: Any, table: dict[str, Check] = ATTR_KINDS) -> None:
    """AttrProblem when `key` is a known attribute and `value` is not of its kind."""
    if key in table and not table[key][1](value):
        raise AttrProblem(f"expected {table[key][0]}, got {value!r:.60}")


def plain_array(value: Any, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    """A constant's JSON value (nested lists of numbers, an infinity written as encode writes it: a mask's
    -inf) as an array of `shape` and `dtype`. NaN is refused, as everywhere in a graph file."""
    try:
        arr = np.array(value, dtype=dtype)
    except (TypeError, ValueError, OverflowError):
        try:  # {"float": "-inf"} among the numbers (rare: decoded only then, as decoding is per element)
            arr = np.array(decode(value), dtype=dtype)
        except (TypeError, ValueError, OverflowError) as e:
            raise AttrProblem(f"not an array of {dtype} ({e})") from None
    if arr.shape != shape:
        raise AttrProblem(f"has shape {arr.shape}, but the node's shape is {shape}")
    if arr.dtype.kind == "f" and np.isnan(arr).any():
        raise AttrProblem("holds NaN, which a graph file never holds")
    return arr
