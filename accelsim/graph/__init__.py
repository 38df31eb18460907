"""Graph IR: a static-shape SSA dataflow DAG (builders -> Graph)."""
from accelsim.graph.ir import PHASES, Graph, Node, Var

__all__ = ["PHASES", "Graph", "Node", "Var"]
