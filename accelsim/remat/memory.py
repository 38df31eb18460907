"""The cheap memory estimate rematerialization policies choose by (steps or Graph -> peak bytes).

Liveness in topological order: run the nodes one at a time in id order; a computed tensor is allocated
when its node runs and freed after its last reader ran; outputs and the loss stay to the end. Bytes are
the graph dtype's numpy bytes (a machine that stores fewer bytes per element needs proportionally
less). Leaves (inputs, parameters, optimizer state, constants) are the same under every policy and are
not counted: the figure is the step's peak of computed tensors (activations, gradients, update
temporaries). The real schedule runs nodes concurrently and in another order, so its peak differs; the
estimate only has to rank policies, and the tests compare it with compiled schedules.
"""
from __future__ import annotations

from typing import Sequence

from accelsim.graph.ir import Graph
from accelsim.remat.rewrite import Emission, Step, emit


def peak_bytes(steps: Sequence[Step], results: set[int]) -> int:
    """Peak bytes of computed tensors alive when `steps` run in order; `results` (positions) live to the end."""
    last = [-1] * len(steps)
    for k, s in enumerate(steps):
        for i in s.inputs:
            last[i] = k
    live = peak = 0
    for k, s in enumerate(steps):
        if s.leaf:
            continue
        live += s.nbytes
        peak = max(peak, live)
        for i in set(s.inputs):
            if last[i] == k and i not in results:
                live -= steps[i].nbytes
        if last[k] < 0 and k not in results:
            live -= s.nbytes
    return peak


def emission_peak_bytes(graph: Graph, emission: Emission) -> int:
    return peak_bytes(emission.steps, emission.outputs(graph))


def activation_peak_bytes(graph: Graph) -> int:
    """The estimate for `graph` as it is (see the module docstring), in bytes."""
    return emission_peak_bytes(graph, emit(graph, frozenset()))
