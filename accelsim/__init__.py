"""accelsim: simulate ML training and inference on bespoke dataflow accelerators.

`import accelsim` is cheap: the public names below are imported on first use (PEP 562 `__getattr__`), so a CLI
call or a script that needs one stage does not pay for numba, SimPy, matplotlib, pandas, ... of the others."""
from __future__ import annotations

import sys
from importlib import import_module
from importlib import metadata as _metadata
from types import ModuleType
from typing import TYPE_CHECKING, Any

from accelsim.errors import (AccelsimError, GraphError, HwConfigError, MappingError, ModelError, ScheduleError,
                             ShapeError, SweepError)

try:  # pyproject.toml's version, as installed: the one source of truth
    __version__ = _metadata.version("accelsim")
except _metadata.PackageNotFoundError:  # a source tree run without installing it
    __version__ = "0+unknown"

if TYPE_CHECKING:  # what type checkers and readers see; at run time `__getattr__` imports each on first use
    from accelsim import cost, hw, models, ops, viz
    from accelsim.autodiff import gradients
    from accelsim.evaluate import evaluate
    from accelsim.api import check, load_schedule, rematerialize, simulate, validate_schedule
    from accelsim.execute import CheckReport
    from accelsim.graph import Graph, Node, Var
    from accelsim.hw import HwSpec, load_hw
    from accelsim.per_layer import layer_report
    from accelsim.pass_search import optimize
    from accelsim.report import run_summary
    from accelsim.summary import RunSummary
    from accelsim.schedule import Schedule
    from accelsim.compiler import compile
    from accelsim.schedule.io import save_schedule
    from accelsim.sim import Result
    from accelsim.dse import sweep
    from accelsim.training import training_graph

_LAZY: dict[str, str] = {  # public name -> the module that defines it; a sub-package is found by its own name
    "gradients": "accelsim.autodiff", "evaluate": "accelsim.evaluate", "check": "accelsim.api",
    "load_schedule": "accelsim.api", "rematerialize": "accelsim.api", "simulate": "accelsim.api",
    "validate_schedule": "accelsim.api", "CheckReport": "accelsim.execute", "Graph": "accelsim.graph",
    "Node": "accelsim.graph", "Var": "accelsim.graph", "HwSpec": "accelsim.hw", "load_hw": "accelsim.hw",
    "layer_report": "accelsim.per_layer", "optimize": "accelsim.pass_search", "run_summary": "accelsim.report",
    "RunSummary": "accelsim.summary",
    "Schedule": "accelsim.schedule", "compile": "accelsim.compiler", "save_schedule": "accelsim.schedule.io",
    "Result": "accelsim.sim", "sweep": "accelsim.dse", "training_graph": "accelsim.training",
}


def __getattr__(name: str) -> Any:
    """`accelsim.<name>` on first use: a name of `_LAZY` from its module, else the sub-package or module
    `accelsim.<name>` (cost, hw, models, ops, viz, ...), as if this file had imported it. Cached afterwards."""
    if name in _LAZY:
        value = getattr(import_module(_LAZY[name]), name)
    elif name.startswith("__"):  # probes such as __wrapped__ or __path__ lookups: never a submodule
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    else:
        try:
            value = import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as e:
            if e.name != f"{__name__}.{name}":  # the submodule exists but something it imports is missing
                raise
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """What `dir(accelsim)` and tab completion list: the public names too, before their first use."""
    return sorted(set(globals()) | set(__all__))


class _Package(ModuleType):
    """`accelsim.evaluate` is the function, never the submodule of the same name. Importing a submodule binds it
    on its package, so whoever first imports `accelsim.evaluate` (the module) would otherwise replace the lazily
    exported function with it; an eager import here used to bind the function last."""

    @property
    def evaluate(self) -> Any:
        return getattr(import_module("accelsim.evaluate"), "evaluate")

    @evaluate.setter
    def evaluate(self, value: Any) -> None:
        if value is not sys.modules.get("accelsim.evaluate"):  # anything but the import system binding the module
            raise AttributeError("accelsim.evaluate is read-only: patch accelsim.evaluate's module instead")


sys.modules[__name__].__class__ = _Package

__all__ = ["AccelsimError", "CheckReport", "check", "Graph", "GraphError", "HwConfigError", "HwSpec", "MappingError", "ModelError", "Node", "ScheduleError",
           "Result", "Schedule", "ShapeError", "Var", "compile", "cost", "evaluate", "gradients", "hw", "layer_report",
           "load_hw", "load_schedule",
           "frontends", "models", "ops", "optimize", "rematerialize", "run_summary", "RunSummary", "save_schedule", "simulate", "sweep", "SweepError", "training_graph", "validate_schedule", "viz"]
