"""Graph IR: a static-shape SSA dataflow DAG (builders -> Graph), its provenance and its verifier."""
from accelsim.graph.ir import PHASES, Graph, Node, Var
from accelsim.graph.provenance import ModelSource, OptimizerSettings
from accelsim.graph.verify import verify

__all__ = ["PHASES", "Graph", "ModelSource", "Node", "OptimizerSettings", "Var", "verify"]
