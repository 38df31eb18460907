"""Stage granularity against task granularity: the makespan of a step composed from stage templates
(compile(..., granularity="stage")) next to the whole-task schedule of the same step, with the gap.

The task-level step is given the same pipeline_schedule and the schedule's in-flight window (GPipe: all M
micro-batches, 1F1B: p), which stands for the schedule where the list scheduler does not follow it. Issue 27 asks for
agreement within 3% (AGREEMENT); "ok" marks the rows within it.
Run: python experiments/stage_vs_task.py [--models transformer_block gpt2] [--hw a100_x8] [--quick]

Where the two differ by more than 3% (a100_x8, Adam; measured when this was written):
- The baseline: an in-flight window is not a pipeline schedule. With all M in flight the list scheduler
  interleaves forward and backward passes freely (GPipe would not): gpt2-2 p=2 M=4 GPipe is +6.0% although
  stage 0's busy cycles agree to two cycles in 13.8M. With a window of p, micro-batch k+p waits for all of
  micro-batch k, which is stricter than 1F1B (gpt2-2 p=2 M=8 1F1B: -8.7%). These rows compare different
  schedules until the task level follows pipeline_schedule.
- The partition (compiler/planning/stages.py as of this branch) puts backward nodes on the lowest stage of
  their inputs and cuts inside residual blocks: gradients skip chunks and backward work starts before the
  next chunk's is done, which the composition's chain of chunks cannot express (transformer_block p=4:
  +18% to +26%); gpt2's logits gradient (2 x 103 MB) goes back to stage 0 where the forward sends 1.5 MB
  (compose sent activation_bytes both ways when this was measured; it now sends ChunkWork.backward_bytes
  back, and the rows have not been measured again).
- Replicas: compose all-reduces gradients in 25 MB DDP buckets and updates after the last; the task level
  all-reduces every gradient as soon as it is ready and updates each parameter after its own. A 1.7 MB
  transformer_block is one bucket sent after its backward pass (+9% at M=1); with t=2 the task level pays
  each tensor's all-reduce latency, serialized with the ranks' all-reduces on each chip (-34%).
- Backward passes across a stage boundary: the composition sends a chunk's input gradient when its whole
  backward item (weight gradients included) ends; the task level sends each gradient as soon as it is
  computed and the previous stage starts on it while the weight gradients run. With the layer partition
  and the task level following pipeline_schedule (h-partition and h-effort merged, tried in a scratch
  clone), this is most of what remains at p=2: +9% to +13% at M=1, +2% to +4% at M=8.
- Tensor-parallel ranks with M > 1 on a small block: the task level runs one micro-batch's compute while
  another's latency-bound rank all-reduces and gradient accumulations are in flight; the composition runs a
  chunk's items one at a time (transformer_block t=2 M=4: +8%; gpt2-2: under 1%).
"""
from __future__ import annotations

import argparse
import itertools
import time
from dataclasses import dataclass

import accelsim as A

AGREEMENT = 0.03
SCHEDULES = ("gpipe", "1f1b")


@dataclass(frozen=True)
class Config:
    """One step: model (gpt2 with `layers` blocks, or a one-block transformer_block), replicas d, stages p,
    tensor-parallel ranks t, micro-batches M and the pipeline schedule."""

    model: str
    layers: int
    d: int
    p: int
    t: int
    m: int
    schedule: str

    def graph(self) -> A.Graph:
        opts = {"layers": self.layers} if self.model == "gpt2" else {}
        if self.t > 1:
            opts["tensor_parallel"] = self.t
        return A.training_graph(A.models.build(self.model, **opts), optimizer="adam")

    def window(self) -> int:
        """The task level's in-flight micro-batches that stand for the schedule (GPipe: all; 1F1B: p)."""
        return self.m if self.schedule == "gpipe" else min(self.p, self.m)


def compare(config: Config, hw: A.HwSpec) -> dict:
    """Both makespans (cycles), the relative gap (stage / task - 1) and the CPU seconds of each."""
    graph = config.graph()
    step = dict(microbatches=config.m, data_parallel=config.d, pipeline_stages=config.p)
    t0 = time.process_time()
    stage = A.compile(graph, hw, granularity="stage", pipeline_schedule=config.schedule, **step)
    t1 = time.process_time()
    task = A.compile(graph, hw, granularity="task", pipeline_schedule=config.schedule, max_in_flight=config.window(),
                     validate=False, **step)
    t2 = time.process_time()
    gap = stage.makespan_cycles / task.makespan_cycles - 1
    return {"stage": stage.makespan_cycles, "task": task.makespan_cycles, "gap": gap,
            "bubble": stage.bubble_fraction, "ok": abs(gap) <= AGREEMENT, "stage_s": t1 - t0, "task_s": t2 - t1}


def configs(models: list[str], quick: bool) -> list[Config]:
    """The issue's small configurations: transformer_block and gpt2 with 2-4 layers; p in {1, 2, 4},
    d and t in {1, 2}, M in 1..8 (quick: fewer)."""
    layer_counts = {"gpt2": (2,) if quick else (2, 4), "transformer_block": (1,)}
    ms = (1, 4) if quick else (1, 2, 4, 8)
    out = []
    for model in models:
        for layers, p, d, t, m, schedule in itertools.product(layer_counts[model], (1, 2, 4), (1, 2), (1, 2), ms,
                                                              SCHEDULES):
            if d * p * t <= 8 and (p > 1 or schedule == "1f1b"):  # one stage: every schedule is the same
                out.append(Config(model, layers, d, p, t, m, schedule))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=["transformer_block", "gpt2"],
                    choices=["transformer_block", "gpt2"])
    ap.add_argument("--hw", default="a100_x8")
    ap.add_argument("--quick", action="store_true", help="M in {1, 4} and gpt2 with 2 layers only")
    args = ap.parse_args()
    hw = A.load_hw(args.hw)
    print(f"{'model':<20} {'d':>2} {'p':>2} {'t':>2} {'M':>2} {'schedule':<8} {'stage':>12} {'task':>12} "
          f"{'gap':>7} {'bubble':>6}  ok   CPU s (stage/task)")
    for c in configs(args.models, args.quick):
        r = compare(c, hw)
        name = c.model + (f"-{c.layers}" if c.model == "gpt2" else "")
        print(f"{name:<20} {c.d:>2} {c.p:>2} {c.t:>2} {c.m:>2} {c.schedule:<8} {r['stage']:>12,} {r['task']:>12,} "
              f"{r['gap']:>+7.1%} {r['bubble']:>6.2f}  {'ok' if r['ok'] else '--':<4} "
              f"{r['stage_s']:.1f}/{r['task_s']:.1f}", flush=True)


if __name__ == "__main__":
    main()
