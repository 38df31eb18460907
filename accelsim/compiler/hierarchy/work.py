"""The stage-level work of one step: what templates.py measures and compose.py times.

Cycles are at the hardware clock; bytes are per micro-batch unless said otherwise. A model chunk is the
part of the model one pipeline chip runs for one micro-batch; with v virtual stages (interleaved 1F1B)
chip s holds chunks s, s + p, s + 2p, ... and a micro-batch's forward pass visits chunks 0 .. p*v - 1 in
order (Narayanan et al., SC21, section 2.2.2).
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ChunkWork:
    """One model chunk's work for one micro-batch, compiled once on its stage's chips (its tensor-parallel
    ranks and their all-reduces inside)."""

    chunk: int
    """Position in the forward order, 0 .. p*v - 1; it runs on pipeline chip chunk % p."""
    forward_cycles: int
    backward_cycles: int
    """The whole backward pass of the chunk (input and weight gradients, recomputation included)."""
    weight_grad_cycles: int
    """The part of backward_cycles that only computes weight gradients (ZB-H1 defers it: its W pass)."""
    recompute_cycles: int
    """The part of backward_cycles that recomputes forward values (rematerialization)."""
    activation_bytes: int
    """The activation sent to the next chunk (and the gradient sent back to the previous one), per
    tensor-parallel rank: each rank sends its copy to the same rank of the next stage."""
    stash_bytes: int
    """Activations kept from this chunk's forward until its backward, per micro-batch in flight, on one chip
    (its busiest tensor-parallel rank)."""
    backward_bytes: int = -1
    """The backward values sent to earlier chunks per micro-batch, when they differ from activation_bytes
    (gpt2's logit gradients are far larger than its activations); -1: the previous chunk's activation_bytes,
    the activation that crossed the same boundary forward (compose.py)."""
    input_grad_after: int = -1
    """Cycles from the start of the backward pass until the previous chunk's backward pass may start on the
    input gradient it sends (handoffs.py: each gradient tensor leaves as it is computed); -1: not measured,
    taken as backward_cycles - weight_grad_cycles (the input gradient first, the weight gradients after)."""
    output_after: int = -1
    """Cycles from the start of the forward pass until the next chunk's forward pass may start on the
    activations it sends (handoffs.py: a chunk cut mid-block sends several tensors, each as it is computed);
    -1: at the pass's end."""
    update_sends: tuple[tuple[int, int], ...] = ()
    """(destination chunk, bytes) per micro-batch and tensor-parallel rank, as backward_bytes: the part of
    backward_bytes that is weight gradients of parameters earlier chunks hold (a tied embedding), which only
    those chunks' stages' updates wait for. The composition sends them once per step, summed over the
    micro-batches (the same bytes)."""
    sends_after_weight_grad: bool = False
    """The weight gradients of update_sends are computed in the W pass (a tied gradient's part summed over
    the step on this chunk's stage: planning/step_sums.py): a schedule that splits the backward pass (ZB-H1)
    sends them after the chunk's last W item, once they are complete; otherwise after its last B item."""
    update_send_after: int = -1
    """Cycles from the start of the backward item that completes the weight gradients of update_sends (the
    chunk's last) until they are computed (and, summed over the step, added into their sum), under a schedule
    that runs the backward pass whole: the task level sends them then, not at the pass's end (gpt2-2 on two
    A100s: the LM head's part of the tied matrix's gradient is computed 458K cycles before its pass ends);
    -1: at the item's end."""
    update_send_after_split: int = -1
    """As update_send_after, into the item that completes them under a schedule that splits the backward pass
    (ZB-H1): the last W item where sends_after_weight_grad, else the last B item."""
    forward_gathers: tuple[tuple[int, int, int, int, int], ...] = ()
    """ZeRO 3 (hierarchy/zero3.py): per parameter the forward pass reads, in the order it first reads them, (bytes
    per rank all-gathered over the replicas, cycles into the pass from which the gather may start (0: as the
    chip frees for the item; -1: once it starts the item before), cycles into the pass at which its first reader
    starts, cycles of the pass's later work that needs nothing computed from it, -1 or the chunk that gathered
    it first in the pass and sends it the copy); () without ZeRO 3 or replicas."""
    backward_gathers: tuple[tuple[int, int, int, int, int], ...] = ()
    """As forward_gathers, for the backward pass (its cycles counted as backward_cycles counts them)."""


@dataclass(frozen=True, slots=True)
class StageWork:
    """What a pipeline chip does once per step and holds throughout (per tensor-parallel rank)."""

    stage: int
    chips: tuple[int, ...]
    """The chips of this stage in replica 0, one per tensor-parallel rank; replica r adds r * p * t."""
    update_cycles: int
    """The optimizer update of the stage's parameters, after the gradients are reduced."""
    gradient_bytes: int
    """Gradient bytes per rank that the data-parallel replicas all-reduce (0 with one replica)."""
    parameter_bytes: int
    optimizer_bytes: int
    filler_cycles: int = 0
    """Work per step that reads no micro-batch's data (a weight's transpose per micro-batch, Adam's decay
    of its moments): it runs wherever the chip idles. Not part of update_cycles or any chunk's cycles;
    compile_stage_step adds to update_cycles what the composed step's idle time cannot hold."""
    sent_update_cycles: int = -1
    """The part of update_cycles that updates parameters whose gradients other stages send it
    (ChunkWork.update_sends: a tied embedding): only that part waits for the sends, and runs last, as the task
    level updates every other parameter once its own gradient is final; -1: the whole update waits for them."""
    sent_sum_cycles: int = 0
    """The part of sent_update_cycles that adds the sent gradients to the stage's own parts of them (once per
    step, after the sends: planning/step_sums.py); with replicas, the sums are reduced over them between this
    add and the rest of sent_update_cycles, which updates the parameters from the reduced sums."""


@dataclass(frozen=True, slots=True)
class StepWork:
    """The step at stage level: p stages of v chunks each, M micro-batches per replica, d replicas, t ranks."""

    stages: tuple[StageWork, ...]
    chunks: tuple[ChunkWork, ...]
    microbatches: int
    data_parallel: int
    tensor_parallel: int
    virtual_stages: int = 1

    @property
    def pipeline_stages(self) -> int:
        return len(self.stages)

    def replica_groups(self, stage: int) -> list[list[int]]:
        """Per chip of `stage` (one per tensor-parallel rank), its chip in every replica (StageWork.chips: replica r
        adds r * p * t): the groups a data-parallel collective of that stage spans."""
        step = self.pipeline_stages * self.tensor_parallel
        return [[chip + r * step for r in range(self.data_parallel)] for chip in self.stages[stage].chips]


@dataclass(frozen=True, slots=True)
class StageSpan:
    """One interval of the composed step's timeline."""

    stage: int
    kind: str
    """One of compose.py's SPAN_KINDS: forward, backward, weight_grad, transfer, allreduce, reduce_scatter,
    all_gather or update."""
    microbatch: int
    """-1 for per-step work (update, a gradient bucket's all-reduce)."""
    chunk: int
    start: int
    end: int
    replica: int = 0
