"""Throughput against micro-batches: adding micro-batches must never make a step slower per sample.

For each case, every M compiles and throughput(M) >= 0.97 x the best throughput at any smaller M ("ok" in
the last column; "ratio" is throughput(M) / that best). Cases: bespoke_superres inference and training at
M = 1, 2, 4, ..., 256, and resnet50 training on groq_like (batch 1) at M = 1, 2, 3, 4, 8, 16, the case of
issue 27's regression (5,939 samples/s at M=16 against 7,211 at M=8: the gradient accumulations were taken
last, the gradients they free filled the SRAM, and every priority rule but micro-batch-first ran out of
memory; compiler/timing/priorities.py FIRST_CLASS). Each case runs under the list scheduler's own order and,
with --schedules, under every pipeline schedule the task-level compiler follows (gpipe, 1f1b, zb-h1: on one
chip a schedule orders the micro-batches' forward and backward passes; interleaved needs virtual stages,
which only stage granularity compiles); gpt2 with 2 layers on a100_x8 (p=1) too.
GPipe on one chip broke the property (resnet50 on groq_like: 6,260 samples/s at M=4, 5,908 at M=8): GPipe stashes
all M micro-batches, memory halved the window to 4, and the order of all 8 forwards before any backward
contradicted it; the order now runs in rounds of the window (schedules.windowed_order): 6,430 at M=8, 6,520 at
M=16 (measured with --case resnet50-train --schedule gpipe on this branch); 1F1B keeps one micro-batch in
flight on one chip (3,369 at every M), ZB-H1 all of them (3,369 to 4,123). gpt2-2 on a100_x8 keeps up under
every schedule (349 to 361 samples/s from M=1 to 16).
Run: python experiments/microbatch_sweep.py [--max-m 64] [--case resnet50-train] [--schedules] [--schedule gpipe]
"""
from __future__ import annotations

import argparse
import time

import accelsim as A
from accelsim.passes import inference_graph

TOLERANCE = 0.97
CASES = {
    "superres-infer": ("superres", {}, "bespoke_superres", False, [2 ** k for k in range(9)]),
    "superres-train": ("superres", {}, "bespoke_superres", True, [2 ** k for k in range(9)]),
    "resnet50-train": ("resnet50", {}, "groq_like", True, [1, 2, 3, 4, 8, 16]),
    "gpt2-2-train": ("gpt2", {"layers": 2}, "a100_x8", True, [1, 2, 3, 4, 8, 16]),
}
"""Case -> (model, its builder's options, hardware, training, the micro-batch counts)."""
TASK_LEVEL_SCHEDULES = (None, "gpipe", "1f1b", "zb-h1")


def sweep(model: str, hw: str, training: bool, ms: list[int], schedule: str | None = None,
          build: dict | None = None) -> list[dict]:
    """One row per M: throughput, its ratio to the best at a smaller M, makespan/bound, window, and whether
    it keeps up with smaller M."""
    fwd = A.models.build(model, **(build or {}))
    graph = A.training_graph(fwd) if training else inference_graph(fwd)
    rows, best = [], 0.0
    for m in ms:
        t0 = time.process_time()
        s = A.compile(graph, hw, microbatches=m, pipeline_schedule=schedule)
        seconds = time.process_time() - t0
        throughput = s.samples_per_step * s.clock_hz / s.makespan_cycles
        rows.append({"m": m, "throughput": throughput, "ratio": throughput / best if best else 1.0,
                     "bound_ratio": s.bound_ratio, "window": s.options.max_in_flight,
                     "ok": throughput >= TOLERANCE * best, "seconds": seconds})
        best = max(best, throughput)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", choices=sorted(CASES), action="append")
    parser.add_argument("--max-m", type=int, default=256)
    parser.add_argument("--schedules", action="store_true",
                        help="also every pipeline schedule the task-level compiler follows")
    parser.add_argument("--schedule", choices=[s for s in TASK_LEVEL_SCHEDULES if s], action="append",
                        help="only this pipeline schedule (repeatable)")
    args = parser.parse_args()
    failures = 0
    schedules = args.schedule or (TASK_LEVEL_SCHEDULES if args.schedules else (None,))
    for name in args.case or list(CASES):
        model, build, hw, training, ms = CASES[name]
        for schedule in schedules:
            order = schedule or "the list scheduler's own order"
            print(f"\n{name} on {hw}, pipeline schedule: {order}")
            print(f"{'M':>4s} {'samples/s':>11s} {'ratio':>6s} {'makespan/bound':>15s} {'in flight':>9s} "
                  f"{'compile s':>9s}  keeps up")
            for r in sweep(model, hw, training, [m for m in ms if m <= args.max_m], schedule, build):
                failures += not r["ok"]
                print(f"{r['m']:4d} {r['throughput']:11.1f} {r['ratio']:6.3f} {r['bound_ratio']:15.3f} "
                      f"{str(r['window']):>9s} {r['seconds']:9.2f}  {'ok' if r['ok'] else 'SLOWER'}", flush=True)
    print(f"\n{failures} point(s) slower than {TOLERANCE} x the best at a smaller M (ratio below {TOLERANCE})")


if __name__ == "__main__":
    main()
