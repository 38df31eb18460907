"""Which chip each (replica, stage, tensor-parallel rank) of a step runs on (StepOptions -> chip map)."""
from __future__ import annotations

from accelsim.errors import ScheduleError
from accelsim.schedule.options import StepOptions


def chip_map(n_chips: int, options: StepOptions) -> dict[tuple[int, int, int], int]:
    """(replica, stage, rank) -> chip, as Megatron-LM orders a d x p x t job: the tensor-parallel ranks
    of a stage on consecutive chips (one node's fastest links carry the most frequent collectives), a
    replica's stages next, replicas outermost. With more replicas than chips allow (and no pipeline or
    tensor parallelism), replicas share the chips' units."""
    d, p, t = options.data_parallel, options.pipeline_stages, options.tensor_parallel
    tp = f" x tensor_parallel={t}" if t > 1 else ""
    if p * t > n_chips:
        raise ScheduleError(f"pipeline_stages={p}{tp} needs {p * t} chips, but the hardware has {n_chips}")
    if (p > 1 or t > 1) and d * p * t > n_chips:
        raise ScheduleError(f"data_parallel={d} x pipeline_stages={p}{tp} needs {d * p * t} chips, the hardware "
                            f"has {n_chips}")
    return {(r, s, k): ((r * p + s) * t + k) % n_chips for r in range(d) for s in range(p) for k in range(t)}
