"""Model zoo: `build(name, **options)` returns a forward Graph with its loss set."""
from __future__ import annotations

import inspect
from typing import Any, Callable

from accelsim.errors import AccelsimError, ModelError
from accelsim.graph.ir import Graph
from accelsim.models import sizes  # noqa: F401  (small option sets: A.models.sizes.SMALL, TINY)
from accelsim.models.cnn import resnet50, resnet_block, superres
from accelsim.models.small import mlp, regression, seed_autodiff
from accelsim.models.transformer import gpt2, transformer_block

MODELS: dict[str, Callable[..., Graph]] = {
    f.__name__: f
    for f in (seed_autodiff, regression, mlp, superres, resnet_block, resnet50, transformer_block, gpt2)
}
DEFAULT_MODEL = "superres"


def names() -> list[str]:
    return list(MODELS)


def options(name: str) -> dict[str, Any]:
    """The options a model accepts, with their defaults."""
    return {k: p.default for k, p in inspect.signature(_builder(name)).parameters.items()}


def _builder(name: str) -> Callable[..., Graph]:
    if name not in MODELS:
        raise ModelError(f"unknown model {name!r}; available models: {', '.join(MODELS)}")
    return MODELS[name]


def _check_option(name: str, key: str, value: Any, default: Any) -> Any:
    """Coerce `value` to the type of the default and reject nonsense (sizes must be positive)."""
    try:
        if isinstance(default, bool):
            ok = isinstance(value, bool)
        elif isinstance(default, int):
            ok = isinstance(value, int) and not isinstance(value, bool) and value >= (0 if default == 0 else 1)
        elif isinstance(default, float):
            value = float(value)
            ok = True
        elif isinstance(default, tuple):
            parts = value.replace("(", "").replace(")", "").split(",") if isinstance(value, str) else value
            value = tuple(int(v) for v in parts)
            ok = len(value) >= 2 and all(v > 0 for v in value)
        else:
            ok = isinstance(value, type(default))
    except (TypeError, ValueError):
        ok = False
    if not ok:
        kind = ("a non-negative integer" if default == 0 else "a positive integer") \
            if isinstance(default, int) and not isinstance(default, bool) else \
            f"a {type(default).__name__} like {default!r}"
        raise ModelError(f"model {name!r}: option {key}={value!r} is invalid; expected {kind}")
    return value


def build(name: str, **opts: Any) -> Graph:
    """Build model `name`; unknown or invalid options raise ModelError naming them."""
    defaults = options(name)
    for key in opts:
        if key not in defaults:
            allowed = ", ".join(f"{k}={v!r}" for k, v in defaults.items())
            raise ModelError(f"model {name!r} has no option {key!r}; its options are: {allowed}")
    checked = {k: _check_option(name, k, v, defaults[k]) for k, v in opts.items()}
    try:
        graph = _builder(name)(**checked)
    except AccelsimError as e:
        raise type(e)(f"model {name!r} with options {checked}: {e}") from None
    graph.meta.update(model=name, options={**defaults, **checked})
    return graph
