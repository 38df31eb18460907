"""Chains of gradient glue on the stage they connect (a graph, its consumers and each node's stage -> the
stages with every such chain moved home).

Rematerialization ties a recomputation to the gradient it must follow with a short chain of backward nodes
that read no forward value: a slice, a reshape and a pow 0 of a bias gradient, multiplied into the
recomputation's input (passes/remat.py). The layer walk (layers.backward_layers) leaves such nodes in the
layer it has reached, the next stage's, while the gradient they read and the recomputation they feed are on
the earlier stage: the gradient then crosses to the next stage and back, and the earlier stage's
recomputation waits for the next stage's stream, busy with later micro-batches' work (gpt2 12 layers,
remat every:1, 4 stages, 4 micro-batches on a100_x64: 2.7M cycles per boundary at task level).
"""
from __future__ import annotations

from typing import Sequence

from accelsim.graph.ir import Graph


def glue_home(graph: Graph, consumers: list[list[int]], stage: Sequence[int]) -> list[int]:
    """`stage` with every glue chain on the stage of both its ends. A chain is a maximal run of backward
    nodes each with one input and one reader, the first reading a backward node, none reading a forward
    value; it moves only where its first node's input and its last node's reader are on one stage."""
    nodes = graph.nodes
    out = list(stage)

    def glue(i: int) -> bool:
        v = nodes[i]
        return (not v.is_leaf and v.phase == "backward" and len(v.inputs) == 1 and len(consumers[i]) == 1
                and nodes[v.inputs[0]].phase == "backward")

    for v in nodes:
        if not glue(v.id) or glue(v.inputs[0]):
            continue  # not a chain's first node
        chain = [v.id]
        while glue(consumers[chain[-1]][0]):
            chain.append(consumers[chain[-1]][0])
        home = out[v.inputs[0]]
        if out[consumers[chain[-1]][0]] == home:
            for i in chain:
                out[i] = home
    return out
