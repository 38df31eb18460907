"""The replicas' reduction of gradients summed from several stages' parts (StepWork, Topology -> bytes and
collective per stage): gpt2's tied vocabulary matrix, whose gradient is stage 0's part plus the LM head's part
the last stage sends it (ChunkWork.update_sends).

The task level all-reduces such a gradient once its sum exists: after the sent part has arrived and been added
to the stage's own part (gpt2-2 on a100_x8: 77 MB, 510K cycles), and updates the parameter from the reduced
sum, whether the other gradients go in buckets beside the backward pass or whole after it. So at stage level
those bytes leave the stage's gradient buckets (or, after-backward, its chunks' whole gradients) and are reduced
in one collective of their own, after the sum (compose.py).
"""
from __future__ import annotations

from accelsim.compiler.hierarchy.links import Booking, LinkBook, collective_hold
from accelsim.compiler.hierarchy.work import StepWork
from accelsim.hw.topology import Topology


def sent_gradient_bytes(work: StepWork) -> dict[int, int]:
    """Stage -> gradient bytes (per rank) of its parameters that other stages send it weight gradients for
    (ChunkWork.update_sends, at most its gradient bytes); none with one replica, where nothing is reduced."""
    p, out = work.pipeline_stages, {}
    if work.data_parallel == 1:
        return out
    for chunk in work.chunks:
        for dest, nbytes in chunk.update_sends:
            out[dest % p] = out.get(dest % p, 0) + nbytes
    return {s: min(n, work.stages[s].gradient_bytes) for s, n in sorted(out.items()) if n}


def sent_reductions(work: StepWork, topo: Topology | None, kind: str, sent: dict[int, int], book: LinkBook
                    ) -> dict[int, Booking]:
    """Stage -> the collective (of `kind`: allreduce, or reduce_scatter under ZeRO) over the replicas of its
    `sent` gradient bytes (sent_gradient_bytes); none without links."""
    out: dict[int, Booking] = {}
    if topo is None:
        return out
    for s, nbytes in sorted(sent.items()):
        booking = book.crossing(collective_hold(topo, kind, work.replica_groups(s), nbytes))
        if booking is not None:
            out[s] = booking
    return out
