"""accelsim: simulate ML training and inference on bespoke dataflow accelerators."""
from accelsim import models, ops
from accelsim.autodiff import gradients
from accelsim.errors import AccelsimError, GraphError, ModelError, ShapeError
from accelsim.evaluate import evaluate
from accelsim.graph import Graph, Node, Var
from accelsim.training import training_graph

__all__ = ["AccelsimError", "Graph", "GraphError", "ModelError", "Node", "ShapeError", "Var", "evaluate",
           "gradients", "models", "ops", "training_graph"]
