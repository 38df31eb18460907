"""The leaves of an imported graph: torch.export's placeholders (parameters, buffers, constants, user inputs)
become graph params, inputs and constants named as in the module (ExportedProgram placeholder -> Var).

A graph describes values by initializers, not arrays (`Graph.leaf_value` draws them), so an import keeps each
tensor's name, shape and dtype and picks an initializer by a fixed rule that depends only on the architecture,
never on the module's current numbers (two instances of one class import to the same graph, same hash):

- a tensor of rank >= 2 (weights, embeddings): normal with std 1/sqrt(fan_in), fan_in = prod(shape[1:]);
- a vector or scalar named `*weight` or `*running_var` (norm scales, variances): ones; any other: zeros;
- a float user input: standard normal; an int64 one: randint over [0, max of the example + 1).

To compute with the module's own numbers, feed them (`torch_values.module_feeds`) or copy the graph's drawn
values into the module (`torch_values.load_into_module`).
"""
from __future__ import annotations

import math
from typing import Any

from accelsim.errors import FrontendError
from accelsim.graph.ir import Graph, Var

TORCH_DTYPES = {"torch.float32": "float32", "torch.float64": "float64", "torch.int64": "int64"}


def graph_dtype(tensors: dict[str, Any], model: str) -> str:
    """The one float dtype of the module's parameters and float inputs (float32 or float64)."""
    floats = {TORCH_DTYPES.get(str(t.dtype)) for t in tensors.values() if t.dtype.is_floating_point}
    if None in floats or len(floats) > 1:
        kinds = ", ".join(sorted(f"{k}: {t.dtype}" for k, t in tensors.items() if t.dtype.is_floating_point))
        raise FrontendError(f"model {model!r}: accelsim graphs compute in one dtype, float32 or float64; the "
                            f"module's float tensors are {kinds}; convert it with module.to(torch.float64) (and the "
                            "inputs likewise) before importing")
    return floats.pop() if floats else "float32"


def leaf_dtype(name: str, tensor: Any, model: str) -> str:
    dtype = TORCH_DTYPES.get(str(tensor.dtype))
    if dtype is None:
        raise FrontendError(f"model {model!r}: tensor {name!r} has dtype {tensor.dtype}; accelsim graphs hold "
                            f"float32, float64 and int64 tensors")
    return dtype


def param_init(name: str, shape: tuple[int, ...]) -> dict[str, Any]:
    """The initializer attrs of a parameter or buffer (see the module docstring for the rule)."""
    if len(shape) >= 2:
        fan_in = math.prod(shape[1:])
        return {"init": "normal", "std": 1.0 / math.sqrt(max(fan_in, 1))}
    if name.endswith("weight") or name.endswith("running_var"):
        return {"init": "ones"}
    return {"init": "zeros"}


def add_param(g: Graph, name: str, tensor: Any, trainable: bool, model: str) -> Var:
    shape = tuple(int(d) for d in tensor.shape)
    if leaf_dtype(name, tensor, model) != g.dtype:
        raise FrontendError(f"model {model!r}: {'parameter' if trainable else 'buffer'} {name!r} is "
                            f"{tensor.dtype}, not the graph's {g.dtype}; accelsim parameters share the graph's dtype")
    return g.param(name, shape, trainable=trainable, **param_init(name, shape))


def add_input(g: Graph, name: str, tensor: Any, example: Any, model: str) -> Var:
    """`tensor`: the recorded (fake) tensor; `example`: the real example input where known (an int input's
    range; without one, indices are drawn from [0, 1))."""
    shape = tuple(int(d) for d in tensor.shape)
    dtype = leaf_dtype(name, tensor, model)
    if dtype == "int64":
        high = int(example.max()) + 1 if example is not None and example.numel() else 1
        return g.input(name, shape, dtype="int64", init="randint", high=max(high, 1))
    return g.input(name, shape, dtype=dtype)


def add_constant(g: Graph, name: str, tensor: Any, model: str) -> Var:
    dtype = leaf_dtype(name, tensor, model)
    return g.const(tensor.detach().cpu().numpy(), dtype=dtype)
