"""accelsim: simulate ML training and inference on bespoke dataflow accelerators."""
from importlib import metadata as _metadata

try:  # pyproject.toml's version, as installed: the one source of truth
    __version__ = _metadata.version("accelsim")
except _metadata.PackageNotFoundError:  # a source tree run without installing it
    __version__ = "0+unknown"

from accelsim import cost, hw, models, ops, viz
from accelsim.autodiff import gradients
from accelsim.errors import (AccelsimError, GraphError, HwConfigError, MappingError, ModelError, ScheduleError,
                             ShapeError, SweepError)
from accelsim.evaluate import evaluate
from accelsim.api import check, load_schedule, rematerialize, simulate, validate_schedule
from accelsim.execute import CheckReport
from accelsim.graph import Graph, Node, Var
from accelsim.hw import HwSpec, load_hw
from accelsim.pass_search import optimize
from accelsim.report import run_summary
from accelsim.summary import RunSummary
from accelsim.schedule import Schedule
from accelsim.compiler import compile
from accelsim.schedule.io import save_schedule
from accelsim.sim import Result
from accelsim.dse import sweep
from accelsim.training import training_graph

__all__ = ["AccelsimError", "CheckReport", "check", "Graph", "GraphError", "HwConfigError", "HwSpec", "MappingError", "ModelError", "Node", "ScheduleError",
           "Result", "Schedule", "ShapeError", "Var", "compile", "cost", "evaluate", "gradients", "hw", "load_hw", "load_schedule",
           "frontends", "models", "ops", "optimize", "rematerialize", "run_summary", "RunSummary", "save_schedule", "simulate", "sweep", "SweepError", "training_graph", "validate_schedule", "viz"]


def __getattr__(name: str):
    """`A.frontends` on first use: importing it at `import accelsim` would cost every user its import time,
    and torch and onnx stay unimported either way (accelsim.frontends loads them only when a model needs them)."""
    if name == "frontends":
        import importlib

        return importlib.import_module("accelsim.frontends")
    raise AttributeError(f"module 'accelsim' has no attribute {name!r}")
