"""Graph -> Graph rewrites."""
from accelsim.passes.dce import inference_graph, prune_to_outputs

__all__ = ["inference_graph", "prune_to_outputs"]
