"""accelsim: simulate ML training and inference on bespoke dataflow accelerators."""
from accelsim import cost, hw, models, ops
from accelsim.autodiff import gradients
from accelsim.errors import AccelsimError, GraphError, HwConfigError, MappingError, ModelError, ShapeError
from accelsim.evaluate import evaluate
from accelsim.graph import Graph, Node, Var
from accelsim.hw import HwSpec, load_hw
from accelsim.training import training_graph

__all__ = ["AccelsimError", "Graph", "GraphError", "HwConfigError", "HwSpec", "MappingError", "ModelError", "Node",
           "ShapeError", "Var", "cost", "evaluate", "gradients", "hw", "load_hw", "models", "ops", "training_graph"]
