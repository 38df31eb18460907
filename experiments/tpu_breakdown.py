"""Where a tpu_v1_like run spends its time (a simulated Result -> fractions of the makespan), in the terms of
Jouppi et al.'s Table 3: cycles the weight stream runs (a prefetch staging tiles, or a matrix-unit task streaming
the rest of its tiles), cycles it idles while the activation unit works (the RAW wait: the matrix unit waits
for a cell or layer's vector work in the in-order instruction stream, and the next weights have filled the
Weight FIFO) and the rest (neither: pipeline fill,
a stall on a port). The 256-cycle weight shift never shows: it runs under the 1,349 cycles of each tile's stream
(double-buffered, hwconfigs/tpu_v1_like.yaml's fold_overlap). Also the drain a matrix-unit task leaves unmodelled:
a task that streams its weights ends when its last tile has arrived, but that tile still has to be shifted in, its
B activation rows pushed through, and their sums drained from the array (one fold, cost/systolic.fold_cycles)
before the accumulators hold the result."""
from __future__ import annotations

from dataclasses import dataclass

from accelsim.cost.systolic import fold_cycles


def _union(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for a, b in sorted(spans):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def _length(spans: list[tuple[int, int]]) -> int:
    return sum(b - a for a, b in spans)


def _minus(spans: list[tuple[int, int]], cut: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """`spans` less `cut` (both unions: sorted, disjoint)."""
    out = []
    for a, b in spans:
        for c, d in cut:
            if d <= a or c >= b:
                continue
            if c > a:
                out.append((a, c))
            a = max(a, d)
            if a >= b:
                break
        if a < b:
            out.append((a, b))
    return out


@dataclass(frozen=True)
class StreamBreakdown:
    """Fractions of the makespan (they sum to 1)."""

    stream: float  # the weight stream runs
    raw_wait: float  # the stream idles while the activation unit works
    other: float  # neither

    def __str__(self) -> str:
        return f"{self.stream:4.0%}/{self.raw_wait:4.0%}/{self.other:4.0%}"


def stream_breakdown(result, matrix_unit: str = "mxu", vector_unit: str = "activation") -> StreamBreakdown:
    """Split `result`'s makespan (module docstring); `matrix_unit`, `vector_unit`: the units' names."""
    spans = [s for s in result.spans if s.end > s.start]
    stream = _union([(s.start, s.end) for s in spans if s.kind == "prefetch" or s.resource == matrix_unit])
    vector = _union([(s.start, s.end) for s in spans if s.resource == vector_unit])
    total = result.makespan_cycles
    if total <= 0:
        return StreamBreakdown(0.0, 0.0, 0.0)
    running, waiting = _length(stream), _length(_minus(vector, stream))
    return StreamBreakdown(running / total, waiting / total, (total - running - waiting) / total)


def drain_share(result, graph, array, matrix_unit: str = "mxu") -> float:
    """The drain after each matrix-unit task's last weight tile (module docstring; one fold of T = the rows of
    activations it streams, a matmul's first dimension, on `array`: a unit's SystolicArray), summed over the
    run's matrix-unit tasks, as a fraction of its makespan: what it would add if every drain were exposed."""
    drains = sum(fold_cycles(array.rows, array.cols, graph.nodes[s.node].shape[0], array.dataflow,
                             array.preload_rows_per_cycle)
                 for s in result.spans if s.kind == "node" and s.resource == matrix_unit)
    return drains / result.makespan_cycles if result.makespan_cycles > 0 else 0.0
