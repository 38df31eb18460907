"""Pipeline bubbles of every pipeline schedule, simulated by the stage-level composition, next to the papers'
closed forms; then what activation transfers and gradient all-reduces add on a DGX-like machine, and the CPU
time of composing a GPT-3 175B-sized 1,024-chip step.

Closed forms, for equal chunks with free transfers, F and B a stage's forward and backward per micro-batch
(B = 2F here), W the weight-gradient part of B, p stages, v chunks per chip, M micro-batches (the first three
take a backward pass to send its input gradient at its end, so their rows are simulated with W = 0; with a W
part the composition sends it before W, as the task level does, and the bubble is smaller):
  GPipe, 1F1B (Huang et al. 2019; Narayanan et al. 2021):  bubble (p - 1) / (M + p - 1)
  interleaved 1F1B (Narayanan et al. SC21, sec. 2.2.2):      bubble (p - 1) / (v M + p - 1)
  ZB-H1 (Qi et al. ICLR 2024, sec. 3.1), B' = B - W:          idle I = (p - 1)(F + B' - W) per chip, so
                                                             bubble I / (M (F + B) + I)
Run: python experiments/pipeline_bubbles.py
"""
from __future__ import annotations

import time

from accelsim.compiler.hierarchy.compose import compose
from accelsim.compiler.hierarchy.work import ChunkWork, StageWork, StepWork
from accelsim.hw.load import load_hw

F, B, W = 300, 600, 300  # a stage's cycles per micro-batch: B = 2F, W = B / 2 (ZB-H1 splits it off)


def closed_form(name: str, p: int, v: int, M: int) -> float:
    """The bubble fraction the papers give for equal chunks and free transfers."""
    if name == "interleaved":
        return (p - 1) / (v * M + p - 1)
    if name == "zb-h1":
        idle = (p - 1) * (F + (B - W) - W)
        return idle / (M * (F + B) + idle)
    return (p - 1) / (M + p - 1)


def work(p: int, v: int, M: int, t: int = 1, d: int = 1, activation_bytes: int = 0, gradient_bytes: int = 0,
         f: int = F, b: int = B, w: int = W, update: int = 0) -> StepWork:
    """p stages of v equal chunks (each 1/v of a stage's work), stage s on chips s*t .. s*t + t - 1."""
    stages = tuple(StageWork(s, tuple(range(s * t, (s + 1) * t)), update, gradient_bytes, 0, 0) for s in range(p))
    chunks = tuple(ChunkWork(c, f // v, b // v, w // v, 0, activation_bytes, 0) for c in range(p * v))
    return StepWork(stages, chunks, M, d, t, v)


def bubbles() -> None:
    hw = load_hw("a100_x64")
    print("Bubble fraction, simulated vs closed form (equal chunks, free transfers, F=300, B=600 cycles; W=300 "
          "for ZB-H1, 0 for the others)")
    print(f"{'schedule':12s} {'p':>3s} {'v':>2s} {'M':>4s} {'simulated':>10s} {'closed form':>12s}")
    for p in (4, 8, 16):
        for M in (p, 2 * p, 8 * p):
            for name, v in (("gpipe", 1), ("1f1b", 1), ("interleaved", 2), ("interleaved", 3), ("zb-h1", 1)):
                # the papers' passes send their input gradient at their end: no W part, except ZB-H1's
                simulated = compose(work(p, v, M, w=W if name == "zb-h1" else 0), name, hw).bubble_fraction
                print(f"{name:12s} {p:3d} {v:2d} {M:4d} {simulated:10.4f} {closed_form(name, p, v, M):12.4f}")


# Six GPT-3 175B layers per stage (h = 12288, seq 2048, micro-batch 1) on t = 8 A100s at ~140 TFLOP/s each:
# forward 24 s h^2 FLOPs per layer and token (Megatron's 96 B s l h^2 for forward, backward and recomputation,
# over 4), 6 layers, 2048 tokens, / 8 ranks / 140e12 FLOP/s * 1.41e9 cycles/s. Backward with recomputation 3F,
# of which W (weight gradients) about F. Activations cross stages scattered over the ranks (Narayanan et al.
# sec. 4.1: s h * 2 bytes / t per rank); gradients per rank: 175e9 / (16 * 8) parameters * 2 bytes. Adam's
# update reads and writes ~32 bytes per parameter in HBM (2 TB/s).
STAGE_F = round(24 * 12288**2 * 2048 * 6 / 8 / 140e12 * 1.41e9)
ACTIVATION_BYTES = 2048 * 12288 * 2 // 8
GRADIENT_BYTES = 175 * 10**9 // (16 * 8) * 2
UPDATE = round(175e9 / (16 * 8) * 32 / 2.039e12 * 1.41e9)


def communication() -> None:
    hw = load_hw("a100_x64")
    print("\nGPT-3 175B-like stages with communication (a100_x64: p=4 stages of 6 layers, t=8, d=2, M=16)")
    print(f"{'schedule':12s} {'makespan':>12s} {'bubble':>7s} {'exposed transfer':>17s} {'exposed allreduce':>18s}")
    for name, v in (("gpipe", 1), ("1f1b", 1), ("interleaved", 2), ("zb-h1", 1)):
        comp = compose(work(4, v, 16, t=8, d=2, activation_bytes=ACTIVATION_BYTES, gradient_bytes=GRADIENT_BYTES,
                            f=STAGE_F, b=3 * STAGE_F, w=STAGE_F, update=UPDATE), name, hw)
        exposed = comp.exposed_cycles
        print(f"{name:12s} {comp.makespan_cycles:12d} {comp.bubble_fraction:7.3f} {exposed['transfer']:17d} "
              f"{exposed['allreduce']:18d}")


def speed() -> None:
    # GPT-3 175B on 1,024 A100s as Narayanan et al. run it: p=16, t=8, d=8, interleaved with v=3, M=192
    hw = load_hw("a100_x64", {"chips.a100.count": 1024})
    p, v, M, t, d = 16, 3, 192, 8, 8
    step = work(p, v, M, t=t, d=d, activation_bytes=ACTIVATION_BYTES, gradient_bytes=GRADIENT_BYTES,
                f=STAGE_F, b=3 * STAGE_F, w=STAGE_F, update=UPDATE)
    print(f"\n1,024 chips (p={p}, v={v}, M={M}, t={t}, d={d}), CPU seconds (the first call also costs the "
          f"collectives; the timeline's span records are made on first use)")
    for attempt in range(3):
        start = time.process_time()
        comp = compose(step, "interleaved", hw)
        composed = time.process_time() - start
        spans = len(comp.spans)
        cpu = time.process_time() - start
        print(f"  compose {composed:.2f} s, with {spans:,} spans {cpu:.2f} s; bubble {comp.bubble_fraction:.3f}, "
              f"exposed {comp.exposed_cycles}" + (" (first call)" if attempt == 0 else ""))


if __name__ == "__main__":
    bubbles()
    communication()
    speed()
