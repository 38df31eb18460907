"""Model zoo: `build(name, **options)` returns a forward Graph with its loss set and its `source`.

Options are checked against the type of their default (ints in INT_RANGES or 1..MAX_DIMENSION,
finite floats, tuples of positive ints, dtype a float dtype), and the built graph against
ModelLimits (2**31 elements in one tensor, 2**34 in all by default), before anything is allocated:
the builder's evaluation limit. `limits=None` builds shapes only, for callers that evaluate nothing
(compile, simulate): a graph's nodes cost the same at any tensor size.
A preset option (PRESETS: gpt2's size="medium") names values of other options; options given
explicitly win, and the graph's source records the values used, so it rebuilds the same graph.
"""
from __future__ import annotations

import inspect
import math
from dataclasses import dataclass, fields
from numbers import Integral, Real
from typing import Any, Callable, Mapping

from accelsim.errors import AccelsimError, ModelError
from accelsim.graph.ir import FLOAT_DTYPES, MAX_RANKS, NUMPY_BYTES, Graph
from accelsim.graph.provenance import ModelSource
from accelsim.graph.verify import verify
from accelsim.ops.registry import numel
from accelsim.models import sizes  # noqa: F401  (small option sets: A.models.sizes.SMALL, TINY)
from accelsim.models.cnn import resnet50, resnet_block, superres
from accelsim.models.small import mlp, regression, seed_autodiff
from accelsim.models.transformer import GPT2_SIZES, gpt2, transformer_block

MODELS: dict[str, Callable[..., Graph]] = {
    f.__name__: f
    for f in (seed_autodiff, regression, mlp, superres, resnet_block, resnet50, transformer_block, gpt2)
}
DEFAULT_MODEL = "superres"


def names() -> list[str]:
    return list(MODELS)


@dataclass(frozen=True, slots=True)
class Preset:
    """A model option that names values of the builder's other options (gpt2's size="medium": layers,
    d_model and heads). `build` applies it and does not pass it to the builder; `default` names the
    builder's own defaults."""

    option: str
    default: str
    values: Mapping[str, Mapping[str, Any]]


PRESETS: dict[str, Preset] = {"gpt2": Preset("size", "small", GPT2_SIZES)}


@dataclass(frozen=True, slots=True)
class Repeats:
    """A model option that counts identical layers (gpt2's `layers`, its blocks) and the layer name
    (compiler/planning/layers.py's scope) of the i-th of them, `scope.format(i)`. The layers are built
    the same way with the same shapes and each reads only the layer before it, so a step of the model
    with a few of them measures the work of many (compiler/hierarchy/layer_templates.py)."""

    option: str
    scope: str


REPEATS: dict[str, Repeats] = {"gpt2": Repeats("layers", "h{}")}


def options(name: str) -> dict[str, Any]:
    """The options a model accepts, with their defaults (a preset option's default first)."""
    params = {k: p.default for k, p in inspect.signature(_builder(name)).parameters.items()}
    preset = PRESETS.get(name)
    return params if preset is None else {preset.option: preset.default, **params}


def option_value(name: str, key: str, given: Mapping[str, Any]) -> Any:
    """The value of option `key` that `build(name, **given)` uses: given, else set by the preset option
    given (or its default), else the builder's default; checked as build checks it (ModelError)."""
    defaults = options(name)
    if key not in defaults:
        raise ModelError(f"model {name!r} has no option {key!r}")
    if key in given:
        return _check_option(name, key, given[key], defaults[key])
    preset = PRESETS.get(name)
    if preset is not None:
        chosen = _check_option(name, preset.option, given.get(preset.option, preset.default), preset.default)
        if key in preset.values[chosen]:
            return preset.values[chosen][key]
    return defaults[key]


def _builder(name: str) -> Callable[..., Graph]:
    if not isinstance(name, str) or name not in MODELS:
        raise ModelError(f"unknown model {name!r}; available models: {', '.join(MODELS)}")
    return MODELS[name]


# Integer options are sizes: at least 1 and at most one tensor's element limit, unless listed here.
MAX_DIMENSION = 2**31 - 1
MAX_LAYERS = 128  # gpt2 blocks, mlp layers: the graph's node count (and build time) grows with them
INT_RANGES: dict[str, tuple[int, int]] = {"seed": (0, 2**32 - 1), "layers": (1, MAX_LAYERS),
                                          "tensor_parallel": (1, MAX_RANKS)}
FLOAT_RANGES: dict[tuple[str, str], tuple[float, str]] = {("seed_autodiff", "x1"): (0.0, "> 0 (ln(x1) is taken)")}
CHOICES: dict[str, tuple[str, ...]] = {"dtype": FLOAT_DTYPES}


@dataclass(frozen=True, slots=True)
class ModelLimits:
    """The largest graph `build` makes. Shapes cost nothing, but evaluating or checking a graph
    allocates its tensors: 2**31 elements are 8 GiB as float32, 2**34 are 64 GiB."""

    max_tensor_elements: int = 2**31  # the largest single tensor of the forward graph
    max_total_elements: int = 2**34  # all tensors of the forward graph together

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if not isinstance(value, Integral) or isinstance(value, bool) or value < 1:
                raise ModelError(f"ModelLimits.{f.name}={value!r} is invalid; expected a positive int")


DEFAULT_LIMITS = ModelLimits()


def _int_option(value: Any, low: int, high: int) -> int | None:
    if isinstance(value, Integral) and not isinstance(value, bool) and low <= value <= high:
        return int(value)
    return None


def _tuple_option(value: Any) -> tuple[int, ...] | None:
    """`16,8,4`, `(16, 8, 4)`, `[16, 8, 4]` (strings, as --set gives them) or a list/tuple of ints."""
    if isinstance(value, str):
        parts = [p.strip() for p in value.strip().strip("()[]").split(",")]
        if not all(p.isdigit() and p.isascii() for p in parts):
            return None
        value = [int(p) for p in parts]
    if not isinstance(value, (list, tuple)) or not 2 <= len(value) <= MAX_LAYERS + 1:
        return None
    ints = [_int_option(v, 1, MAX_DIMENSION) for v in value]
    return None if None in ints else tuple(ints)  # type: ignore[arg-type]


def _check_option(name: str, key: str, value: Any, default: Any) -> Any:
    """`value` with the type of the default, inside its range; else a ModelError naming both."""
    checked: Any = None
    preset = PRESETS.get(name)
    choices = tuple(preset.values) if preset is not None and key == preset.option else CHOICES.get(key)
    if choices is not None:
        checked = value if isinstance(value, str) and value in choices else None
        expected = "one of " + ", ".join(choices)
    elif isinstance(default, bool):
        checked = value if isinstance(value, bool) else None
        expected = "true or false"
    elif isinstance(default, int):
        low, high = INT_RANGES.get(key, (1, MAX_DIMENSION))
        checked = _int_option(value, low, high)
        expected = f"an integer from {low} to {high}"
    elif isinstance(default, float):
        low, rule = FLOAT_RANGES.get((name, key), (-math.inf, ""))
        if isinstance(value, Real) and not isinstance(value, bool) and math.isfinite(value) and value > low:
            checked = float(value)
        expected = f"a finite number{' ' + rule if rule else ''}"
    elif isinstance(default, tuple):
        checked = _tuple_option(value)
        expected = (f"2 to {MAX_LAYERS + 1} integers from 1 to {MAX_DIMENSION}, e.g. "
                    f"{','.join(map(str, default))} or [{', '.join(map(str, default))}]")
    else:
        checked = value if isinstance(value, type(default)) else None
        expected = f"a {type(default).__name__} like {default!r}"
    if checked is None:
        raise ModelError(f"model {name!r}: option {key}={value!r} is invalid; expected {expected}")
    return checked


def _check_size(name: str, given: dict[str, Any], graph: Graph, limits: ModelLimits) -> None:
    """Refuse a graph whose tensors would be too large to evaluate, with the estimate."""
    largest = max(graph.nodes, key=lambda n: numel(n.shape))
    total = sum(numel(n.shape) for n in graph.nodes)
    nbytes = NUMPY_BYTES[graph.dtype]
    problems = []
    if numel(largest.shape) > limits.max_tensor_elements:
        problems.append(f"its largest tensor, %{largest.id} {largest.name!r} of shape {largest.shape}, has "
                        f"{numel(largest.shape):.3g} elements ({_bytes_str(numel(largest.shape) * nbytes)} as "
                        f"{graph.dtype}), over the limit of {limits.max_tensor_elements} (max_tensor_elements)")
    if total > limits.max_total_elements:
        problems.append(f"its {len(graph.nodes)} tensors hold {total:.3g} elements in all "
                        f"({_bytes_str(total * nbytes)}), over the limit of {limits.max_total_elements} "
                        "(max_total_elements)")
    if problems:
        with_opts = ", ".join(f"{k}={v!r}" for k, v in given.items()) or "its default options"
        raise ModelError(f"model {name!r} with {with_opts} is too large to evaluate (estimated from its shapes): "
                         + "; ".join(problems) + ". Use smaller options, "
                         f"or raise the limit: models.build({name!r}, ..., limits=models.ModelLimits(...))")


def _bytes_str(nbytes: int) -> str:
    for unit, scale in (("PiB", 2**50), ("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20)):
        if nbytes >= scale:
            return f"{nbytes / scale:.3g} {unit}"
    return f"{nbytes} bytes"


def _preset_values(name: str, checked: dict[str, Any]) -> dict[str, Any]:
    """The options a preset named in `checked` sets that `checked` does not give explicitly."""
    preset = PRESETS.get(name)
    if preset is None or preset.option not in checked:
        return {}
    return {k: v for k, v in preset.values[checked[preset.option]].items() if k not in checked}


def build(name: str, *, limits: ModelLimits | None = DEFAULT_LIMITS, **opts: Any) -> Graph:
    """Build model `name`; unknown or invalid options, or a graph over `limits`, raise ModelError.
    `limits=None`: no evaluation limit, for a graph that is compiled or simulated but never evaluated
    (whatever evaluates it later checks its own byte limit, accelsim.limits.check_eval_size)."""
    if limits is not None and not isinstance(limits, ModelLimits):
        raise ModelError(f"model {name!r}: limits={limits!r} is invalid; expected a models.ModelLimits, or None "
                         "for no evaluation limit")
    defaults = options(name)
    for key in opts:
        if key not in defaults:
            allowed = ", ".join(f"{k}={v!r}" for k, v in defaults.items())
            raise ModelError(f"model {name!r} has no option {key!r}; its options are: {allowed}")
    checked = {k: _check_option(name, k, v, defaults[k]) for k, v in opts.items()}
    from_preset = _preset_values(name, checked)
    checked.update(from_preset)
    preset = PRESETS.get(name)
    try:
        graph = _builder(name)(**{k: v for k, v in checked.items() if preset is None or k != preset.option})
    except AccelsimError as e:
        where = ""
        if from_preset:
            set_by = ", ".join(f"{k}={v!r}" for k, v in from_preset.items())
            where = (f" ({set_by} from {preset.option}={checked[preset.option]!r}; give an option explicitly to "
                     "override its preset value)")
        raise type(e)(f"model {name!r} with options {checked}: {e}{where}") from None
    if limits is not None:
        _check_size(name, checked, graph, limits)
    graph.source = ModelSource(name, tuple({**defaults, **checked}.items()))
    return verify(graph)
