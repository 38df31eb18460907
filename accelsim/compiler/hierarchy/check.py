"""Check stage-level work before it is composed (StepWork, HwSpec -> None or one ScheduleError naming every
problem): cycles and bytes are counts, chunks and stages are numbered in order, and every replica's chips
exist on the hardware."""
from __future__ import annotations

import numbers

from accelsim.compiler.hierarchy.work import StepWork
from accelsim.errors import ScheduleError
from accelsim.hw.spec import HwSpec
from accelsim.schedule.options import GRADIENT_REDUCTIONS

MAX_COMPOSE_ITEMS = 5_000_000
"""The most work items (forward, backward, weight-gradient passes over all chips) one composition simulates:
about 10 us of CPU each, so under a minute; GPT-3 175B's 1,024-chip step (p=16, v=3, M=192) has 18,432."""


def _count(value: object) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _need(problems: list[str], where: str, value: object, least: int, what: str) -> None:
    if not _count(value) or value < least:
        problems.append(f"{where} must be {what}, got {value!r}")


def _gathers(problems: list[str], where: str, gathers: object, chunk: int, n_chunks: int) -> None:
    """ChunkWork.forward_gathers / backward_gathers of chunk `chunk`: (bytes, ready, need, slack, source) of
    integers, ready from -1 to need and never decreasing (a pass issues its gathers in order), bytes, need and
    slack non-negative, source -1 or another chunk."""
    if not isinstance(gathers, tuple):
        problems.append(f"{where} must be a tuple of (bytes, ready, need, slack, source) tuples, got {gathers!r}")
        return
    ready_before = -1
    for j, gather in enumerate(gathers):
        if not (isinstance(gather, tuple) and len(gather) == 5 and all(_count(x) for x in gather)
                and min(gather[1], gather[4]) >= -1 and min(gather[0], gather[2], gather[3]) >= 0):
            problems.append(f"{where}[{j}] must be (bytes, ready, need, slack, source): integers, ready and source at "
                            f"least -1, the others non-negative, got {gather!r}")
            return
        _, ready, need, _, source = gather
        if ready > need or ready < ready_before:
            problems.append(f"{where}[{j}] is {gather!r}: expected ready ({ready}) at most need ({need}) and at least "
                            f"the ready of the gather before it ({ready_before})")
            return
        if source == chunk or source >= n_chunks:
            problems.append(f"{where}[{j}] is {gather!r}: expected source -1 (an all-gather) or another chunk's "
                            f"number, 0 .. {n_chunks - 1}, not {chunk}")
            return
        ready_before = ready


def check_work(work: StepWork, hw: HwSpec, bucket_bytes: int, zero: int = 0, reduction: str = "overlap") -> None:
    """ScheduleError listing every problem of `work` on `hw`, in one paragraph; nothing when it is sound."""
    if not isinstance(work, StepWork):
        raise ScheduleError(f"compose needs a StepWork, got {type(work).__name__}")
    if not isinstance(hw, HwSpec):
        raise ScheduleError(f"compose needs an HwSpec (accelsim.load_hw), got {type(hw).__name__}")
    problems: list[str] = []
    for key in ("microbatches", "data_parallel", "tensor_parallel", "virtual_stages"):
        _need(problems, key, getattr(work, key), 1, "a positive integer")
    _need(problems, "bucket_bytes", bucket_bytes, 1, "a positive integer of bytes")
    if not _count(zero) or zero not in (0, 1, 2, 3):
        problems.append(f"zero must be the ZeRO stage 0, 1, 2 or 3, got {zero!r}")
    if reduction not in GRADIENT_REDUCTIONS:
        problems.append(f"reduction must be one of {', '.join(GRADIENT_REDUCTIONS)} (StepOptions.gradient_reduction), "
                        f"got {reduction!r}")
    elif reduction != "overlap" and zero:
        problems.append(f"reduction {reduction!r} all-reduces whole gradients; ZeRO stage {zero} reduce-scatters "
                        f"them: use 'overlap' with ZeRO")
    if not work.stages:
        problems.append("stages is empty: a step needs at least one pipeline stage")
    if problems:
        raise ScheduleError(f"StepWork: {len(problems)} problem(s): " + "; ".join(problems))
    p, v, t, d = work.pipeline_stages, work.virtual_stages, work.tensor_parallel, work.data_parallel
    if len(work.chunks) != p * v:
        problems.append(f"chunks holds {len(work.chunks)} chunks, expected p * v = {p} * {v} = {p * v}")
    for i, chunk in enumerate(work.chunks):
        where = f"chunks[{i}]"
        if chunk.chunk != i:
            problems.append(f"{where}.chunk is {chunk.chunk!r}, expected {i} (chunks in forward order)")
        for key in ("forward_cycles", "backward_cycles"):
            _need(problems, f"{where}.{key}", getattr(chunk, key), 1, "a positive integer of cycles")
        for key in ("weight_grad_cycles", "recompute_cycles"):
            value = getattr(chunk, key)
            _need(problems, f"{where}.{key}", value, 0, "a non-negative integer of cycles")
            if _count(value) and _count(chunk.backward_cycles) and value > chunk.backward_cycles:
                problems.append(f"{where}.{key} is {value}, more than the backward_cycles ({chunk.backward_cycles}) "
                                f"it is part of")
        for key in ("activation_bytes", "stash_bytes"):
            _need(problems, f"{where}.{key}", getattr(chunk, key), 0, "a non-negative integer of bytes")
        for key in ("update_send_after", "update_send_after_split"):
            _need(problems, f"{where}.{key}", getattr(chunk, key), -1,
                  "an integer of cycles, at least -1 (the item's end)")
        for key in ("forward_gathers", "backward_gathers"):
            _gathers(problems, f"{where}.{key}", getattr(chunk, key), i, len(work.chunks))
    seen: dict[int, int] = {}
    for i, stage in enumerate(work.stages):
        where = f"stages[{i}]"
        if stage.stage != i:
            problems.append(f"{where}.stage is {stage.stage!r}, expected {i} (stages in pipeline order)")
        _need(problems, f"{where}.update_cycles", stage.update_cycles, 0, "a non-negative integer of cycles")
        _need(problems, f"{where}.sent_update_cycles", stage.sent_update_cycles, -1,
              "an integer of cycles, at least -1 (the whole update)")
        _need(problems, f"{where}.sent_sum_cycles", stage.sent_sum_cycles, 0, "a non-negative integer of cycles")
        for key in ("gradient_bytes", "parameter_bytes", "optimizer_bytes"):
            _need(problems, f"{where}.{key}", getattr(stage, key), 0, "a non-negative integer of bytes")
        chips = stage.chips
        if not isinstance(chips, tuple) or len(chips) != t or not all(_count(c) for c in chips):
            problems.append(f"{where}.chips must be a tuple of {t} chip numbers (one per tensor-parallel rank), "
                            f"got {chips!r}")
            continue
        for chip in chips:
            if not 0 <= chip < p * t:
                problems.append(f"{where}.chips holds chip {chip}, expected 0 .. p * t - 1 = {p * t - 1} (replica 0; "
                                f"replica r adds r * p * t)")
            elif chip in seen:
                problems.append(f"{where}.chips holds chip {chip}, already a chip of stages[{seen[chip]}]")
            else:
                seen[chip] = i
    if d * p * t > hw.n_chips:
        problems.append(f"the step needs d * p * t = {d} * {p} * {t} = {d * p * t} chips, but {hw.name!r} has "
                        f"{hw.n_chips}")
    items = 3 * p * v * work.microbatches
    if items > MAX_COMPOSE_ITEMS:
        problems.append(f"p * v * M = {p} * {v} * {work.microbatches} gives up to {items:,} work items, above the "
                        f"limit of {MAX_COMPOSE_ITEMS:,}; use fewer micro-batches or stages")
    if problems:
        raise ScheduleError(f"StepWork: {len(problems)} problem(s): " + "; ".join(problems))
