"""The passes the pass manager knows, one typed record each (name -> PassDef).

A pass is a pure function Graph -> Rewrite (the new graph and one line per rewrite); adding a pass is
adding a record. `applies_to` names the kinds of graph it may rewrite: an inference graph has only
forward nodes, a training graph also backward and update nodes (passes/kind.py). A sited pass also
takes `run(graph, only=frozenset of anchor ids)` and reports in `Rewrite.sites` where it rewrote.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from accelsim.errors import GraphError
from accelsim.passes.constant_fold import run as constant_fold
from accelsim.passes.cse import run as cse
from accelsim.passes.fold_batchnorm import run as fold_batchnorm
from accelsim.passes.fuse_elementwise import run as fuse_elementwise
from accelsim.passes.fuse_epilogue import run as fuse_epilogue
from accelsim.passes.fuse_layers import FUSION_TILES, pass_name, runner as fuse_layers
from accelsim.passes.fuse_optimizer import run as fuse_optimizer
from accelsim.passes.kind import GRAPH_KINDS
from accelsim.passes.merge_parallel import run_convs, run_qkv
from accelsim.passes.simplify import run as simplify
from accelsim.passes.rebuild import Rewrite

AUTO = "auto"
"""What `optimize(graph, AUTO, hw=...)` takes instead of pass names: search sequences of passes by makespan."""


@dataclass(frozen=True)
class PassDef:
    """One rewrite pass: what it is called, what it runs, which graphs it may rewrite, what it does."""

    name: str
    run: Callable[..., Rewrite]
    applies_to: tuple[str, ...]
    doc: str
    # a sited pass reports the anchor of each place it rewrites (Rewrite.sites) and takes
    # run(graph, only=frozenset of anchor ids) to rewrite only those: the `auto` search chooses where
    sited: bool = False
    # False: the `auto` search over passes leaves it out (layer fusion is chosen by the compiler's `fusion`
    # step option, which compiles the step with and without it)
    searched: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name or not callable(self.run):
            raise GraphError(f"pass {self.name!r}: a PassDef needs a non-empty name and a callable run, "
                             f"got run={self.run!r}")
        if self.name == AUTO:
            raise GraphError(f"pass name {AUTO!r} is reserved for the search over passes (pass_search/auto.py)")
        if not isinstance(self.sited, bool) or not isinstance(self.searched, bool):
            raise GraphError(f"pass {self.name!r}: sited and searched must be True or False, got "
                             f"{self.sited!r}, {self.searched!r}")
        if not self.applies_to or any(k not in GRAPH_KINDS for k in self.applies_to):
            raise GraphError(f"pass {self.name!r}: applies_to must name some of {GRAPH_KINDS}, got {self.applies_to!r}")


BOTH = GRAPH_KINDS
PASSES: dict[str, PassDef] = {p.name: p for p in (
    PassDef("cse", cse, BOTH, "common-subexpression elimination: same op, inputs and attributes -> one node"),
    PassDef("constant_fold", constant_fold, BOTH, "nodes whose inputs are all constants -> one constant"),
    PassDef("simplify", simplify, BOTH, "algebraic identities: x*1, x+0, -(-x), transpose of transpose, ..."),
    PassDef("fold_batchnorm", fold_batchnorm, ("inference",),
            "conv2d (+ bias) then inference batch norm -> one conv2d with folded weights and bias"),
    PassDef("merge_qkv", run_qkv, BOTH,
            "matmuls sharing their left operand (q, k, v) -> one matmul on concatenated weights, then slices",
            sited=True),
    PassDef("merge_parallel_convs", run_convs, BOTH,
            "conv2d nodes sharing their input and kernel -> one conv2d on stacked filters, then slices",
            sited=True),
    PassDef("fuse_epilogue", fuse_epilogue, BOTH,
            "matmul/conv2d, then a bias add and/or an activation -> one matmul_epilogue/conv2d_epilogue node",
            sited=True),
    PassDef("fuse_elementwise", fuse_elementwise, BOTH,
            "chains and trees of elementwise ops whose intermediates have no other reader -> one "
            "fused_elementwise node", sited=True),
    PassDef("fuse_optimizer", fuse_optimizer, ("training",),
            "each layer's Adam or SGD update nodes (~14 elementwise nodes per parameter) -> one multi-tensor "
            "fused_adam/fused_sgd node per layer and rank"),
) + tuple(
    PassDef(pass_name(t, staged), fuse_layers(t, staged), ("inference",),
            f"layer fusion: each chain of consecutive conv/pool/elementwise layers whose intermediates have no "
            f"other reader -> {t} depth-first tiles along H (halo rows recomputed, "
            + ("each weight staged once for the tiles" if staged else
               "every tile reading the weights itself: compile's fallback where the staged copies do not fit")
            + "), then a concat", sited=True, searched=False)
    for t in FUSION_TILES for staged in (True, False))}
