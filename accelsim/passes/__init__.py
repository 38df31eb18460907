"""Graph -> Graph rewrites: dead-code elimination, batch-norm freezing for serving, and the verified pass
manager (`optimize`) with its table of passes (PASSES; each pass's function lives in its module, e.g.
`accelsim.passes.cse.cse`). `A.optimize(graph, "auto", hw=...)` searches sequences of passes by compiled
makespan: that search compiles schedules, so it is accelsim.pass_search, above the compiler."""
from accelsim.graph.provenance import AppliedPass
from accelsim.passes.dce import inference_graph, prune_to_outputs
from accelsim.passes.freeze import freeze_batchnorm
from accelsim.passes.table import PASSES, PassDef
from accelsim.passes.rebuild import Rewrite
from accelsim.passes.manager import OptimizeLog, PassRecord, optimize, optimize_with_log

__all__ = ["PASSES", "AppliedPass", "OptimizeLog", "PassDef", "PassRecord", "Rewrite", "freeze_batchnorm", "inference_graph",
           "optimize", "optimize_with_log", "prune_to_outputs"]
