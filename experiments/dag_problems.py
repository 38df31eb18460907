"""Generated abstract DAG scheduling problems for the scheduler benchmark (seed -> [(name, problem)]).

Two families, both deterministic for a seed: layered random DAGs, and training steps shaped the way accelsim
expands them (forward/backward per micro-batch, gradient accumulation over micro-batches, one update).
Sizes stay at 10-60 tasks so that CP-SAT proves most optima within seconds.
"""
from __future__ import annotations

import numpy as np

KIND_NAMES = ("mxu", "vpu", "dma")


def _delay(rng: np.random.Generator, p_delay: float) -> int:
    """0 most of the time; else 1-10 cycles (a transfer or a pipeline latency between two tasks)."""
    return int(rng.integers(1, 11)) if rng.random() < p_delay else 0


def layered_dag(rng: np.random.Generator, layers: int, width: int, edge_prob: float,
                n_kinds: int, p_delay: float = 0.3) -> dict:
    """`layers` layers of 1..width tasks; each task depends on every task of the previous layer with
    probability edge_prob (at least one) and on older layers with edge_prob / 4 (skip connections).

    n_kinds unit kinds with 1-3 instances each; durations 1-50 cycles; delays 0-10 cycles.
    """
    kinds = KIND_NAMES[:n_kinds]
    units = {k: int(rng.integers(1, 4)) for k in kinds}
    tasks, deps, rows = [], [], []
    for layer in range(layers):
        row = []
        for j in range(int(rng.integers(1, width + 1))):
            tid = f"L{layer}_{j}"
            tasks.append({"id": tid, "kind": kinds[int(rng.integers(len(kinds)))],
                          "duration": int(rng.integers(1, 51))})
            row.append(tid)
            if layer == 0:
                continue
            prev = rows[-1]
            preds = [a for a in prev if rng.random() < edge_prob] or [prev[int(rng.integers(len(prev)))]]
            preds += [a for older in rows[:-1] for a in older if rng.random() < edge_prob / 4]
            deps += [[a, tid, _delay(rng, p_delay)] for a in preds]
        rows.append(row)
    return {"units": units, "tasks": tasks, "deps": deps}


def training_step(rng: np.random.Generator, forward: int, microbatches: int, p_delay: float = 0.2) -> dict:
    """A training step: per micro-batch m a forward chain f0..f{F-1} alternating mxu (matmul) / vpu
    (elementwise), the backward chain in reverse on the same kinds, and for each matmul a weight-gradient
    task; each weight gradient is summed over micro-batches by a chain of M-1 vpu accumulations, then one
    vpu update per parameter. 1-3 instances per kind, delays 0-10 cycles on some dependencies. Tasks carry
    their micro-batch as compile's expansion labels them (an accumulation that of the gradient it adds; the
    updates none: they belong to the whole step).
    """
    units = {"mxu": int(rng.integers(1, 4)), "vpu": int(rng.integers(1, 3))}
    kinds = ["mxu" if i % 2 == 0 else "vpu" for i in range(forward)]
    fwd_cycles = [int(rng.integers(5, 41)) if k == "mxu" else int(rng.integers(2, 16)) for k in kinds]
    params = [i for i, k in enumerate(kinds) if k == "mxu"]
    tasks, deps = [], []

    def add(tid: str, kind: str, duration: int, preds: list[str], microbatch: int | None) -> str:
        tasks.append({"id": tid, "kind": kind, "duration": duration}
                     | ({"microbatch": microbatch} if microbatch is not None else {}))
        deps.extend([a, tid, _delay(rng, p_delay)] for a in preds)
        return tid

    grad_of: dict[tuple[int, int], str] = {}  # (param layer, micro-batch) -> task producing its gradient
    for m in range(microbatches):
        prev: list[str] = []
        for i, kind in enumerate(kinds):
            prev = [add(f"f{i}_m{m}", kind, fwd_cycles[i], prev, m)]
        for i in reversed(range(forward)):
            incoming = prev
            # backward costs about twice the forward: one product for the input, one for the weight
            prev = [add(f"b{i}_m{m}", kinds[i], fwd_cycles[i], incoming, m)]
            if kinds[i] == "mxu":
                grad_of[(i, m)] = add(f"w{i}_m{m}", "mxu", fwd_cycles[i], incoming + [f"f{i}_m{m}"], m)
    for i in params:
        last = grad_of[(i, 0)]
        for m in range(1, microbatches):
            last = add(f"acc{i}_m{m}", "vpu", int(rng.integers(2, 7)), [last, grad_of[(i, m)]], m)
        add(f"upd{i}", "vpu", int(rng.integers(3, 11)), [last], None)
    return {"units": units, "tasks": tasks, "deps": deps}


def _task_count(forward: int, microbatches: int) -> int:
    """Tasks of training_step: per micro-batch 2F plus one weight gradient per matmul; M-1 accumulations
    and one update per matmul."""
    params = (forward + 1) // 2
    return microbatches * (2 * forward + params) + microbatches * params


def problems(n: int = 40, seed: int = 0, min_tasks: int = 10, max_tasks: int = 60) -> list[tuple[str, dict]]:
    """n problems, alternating layered DAGs and training steps, each of min_tasks..max_tasks tasks."""
    rng = np.random.default_rng(seed)
    out = []
    for k in range(n):
        if k % 2 == 0:
            while True:  # redraw the shape until the size fits; the draws come from rng, so still seeded
                layers, width = int(rng.integers(3, 10)), int(rng.integers(2, 9))
                edge_prob, n_kinds = float(rng.uniform(0.2, 0.6)), int(rng.integers(1, 4))
                p = layered_dag(rng, layers, width, edge_prob, n_kinds)
                if min_tasks <= len(p["tasks"]) <= max_tasks:
                    break
            name = f"layered{k:02d}_l{layers}w{width}k{n_kinds}"
        else:
            while True:
                forward, microbatches = int(rng.integers(2, 8)), int(rng.integers(1, 5))
                if min_tasks <= _task_count(forward, microbatches) <= max_tasks:
                    break
            p = training_step(rng, forward, microbatches)
            assert len(p["tasks"]) == _task_count(forward, microbatches)
            name = f"train{k:02d}_f{forward}m{microbatches}"
        out.append((name, p))
    return out
