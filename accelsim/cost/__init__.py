"""Cost model: node x unit -> cycles, bytes, bound; systolic-array tiling; roofline."""
from accelsim.cost.model import NodeCost, best_cost, capable_units, graph_costs, node_cost
from accelsim.cost.roofline import chip_peak_ops_per_s, roofs

__all__ = ["NodeCost", "best_cost", "capable_units", "chip_peak_ops_per_s", "graph_costs", "node_cost", "roofs"]
