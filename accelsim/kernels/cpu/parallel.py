"""numba CPU kernel of tp_allreduce: the ranks' partial values summed in rank order, as the reference
does, with the numba add kernel (the sum a ring all-reduce's reduce-scatter phase performs)."""
from __future__ import annotations

import numpy as np

from accelsim.kernels.cpu.elementwise import add
from accelsim.kernels.registry import kernel


@kernel("tp_allreduce", "numba")
def tp_allreduce(*partials: np.ndarray) -> np.ndarray:
    total = np.array(partials[0], copy=True)
    for p in partials[1:]:
        total = add(total, p)
    return total
