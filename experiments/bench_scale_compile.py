"""Compile + simulate cost of production-scale training steps at stage granularity (issue 27, "Speed"), from
the CLI, and the whole-task path beside the stage path on a step the whole-task path can handle.

1. The two large configurations, each `accelsim run ... --granularity stage` in a child process (its CPU
   seconds and max RSS from os.wait4), against the issue's targets: GPT-3 175B on 1,024 A100s (d8 x p16 x
   t8, global batch 1536 = 8 x 192 micro-batches of 1, seq 2048, interleaved 1F1B with 2 virtual stages,
   recomputation of every layer) under 60 s and 4 GiB, and Megatron-LM's 1T model on 3,072 A100s (Narayanan
   et al., SC21, Table 1's last row: t=8, p=64, d=6, global batch 3072; micro-batches of 1, interleaved
   with 2 virtual stages, recomputation) under 120 s. The gpt3-175b preset keeps gpt2's seq 1024, so
   `--set seq=2048` is given (the 1T preset has seq 2048). Both are measured from layer templates
   (compiler/hierarchy/layer_templates.py): their graphs are never built whole. TFLOP/s per GPU follows
   Megatron-LM's convention, 96 B s l h^2 (1 + s/6h + V/16lh) per step (accelsim.step_flops.megatron_flops).
2. A step the whole-task path handles (GPT-2 small widths, 12 layers, seq 128, 4 stages, 4 micro-batches,
   1F1B): the task-level makespan (every task list-scheduled under the same pipeline schedule and in-flight
   window), the stage-level makespan measured from the whole graph, and from layer templates, with the
   ratios and the CPU seconds of each.

3. On request (`--only 175b-zero3`), GPT-3 175B as in 1 at ZeRO 3 (`--zero 3`: parameters sharded over the 8
   replicas and all-gathered before every forward and backward pass of every micro-batch, gradients
   reduce-scattered every micro-batch; compiler/hierarchy/zero3.py), with its data-parallel bytes against
   ZeRO 0's all-reduce. Measured 2026-11-26 on h8-zero3: 20.5 to 26.1 s CPU (machine under load), 282 MiB max
   RSS; makespan 104,267,081,956 cycles, step 73.95 s (ZeRO 0: 24.83 s), 59.6 TFLOP/s per GPU, bubble 68.8%,
   all-gathers exposed on 67.4% of the critical path (each stage's 2.5 GiB of parameters per rank cross the 8 nodes' NICs
   twice per micro-batch, 192 times a step). Data-parallel bytes sent per rank and step, summed over the 16
   stages: ZeRO 0 71.2 GiB, ZeRO 3 20,515 GiB (x288); per micro-batch x1.50, Rajbhandari et al.'s 3 psi
   against 2 psi (SC'20, section 7.2.1), which counts one forward and one backward pass per step. Peak gathered
   parameters 1.46 GiB per chip (stage 0: the embedding and its chunk's blocks).
4. On request (`--only 175b-zero1`), GPT-3 175B as in 1 with Adam (Megatron-LM's distributed optimizer is
   ZeRO 1 of Adam's state) at ZeRO 0 and at ZeRO 1 (`--zero 1`: optimizer state sharded over the 8 replicas,
   gradients reduce-scattered once all are computed, the updated parameters all-gathered; compose.py). Measured
   2026-11-26 on h8-zero12 (machine under load): ZeRO 0 10.0 s CPU, 136 MiB, makespan 35,018,773,376 cycles,
   step 24.84 s; ZeRO 1 11.2 s CPU, 137 MiB, makespan 35,162,859,988 cycles, step 24.94 s (x1.0041), bubble
   7.4%, exposed on the critical path: reduce-scatter 0.5%, all-gather 0.4%, transfer 0.4%; optimizer state
   per rank (mean over the 16 stages) 5.09 -> 0.64 GiB; the data-parallel bytes are the all-reduce's, 71.2 GiB
   per rank and step.
Run: python experiments/bench_scale_compile.py [--only 175b|1t|compare|175b-zero3|175b-zero1] [--phases]
(--phases: per stage, its busy share of the step and its idle share in warm-up, steady state and cool-down)
Measured 2026-11-26 on the shared 2-core machine under load (CPU seconds of the whole `accelsim run`; wall
time is several times more), on the code with the GPU GEMM model (cost/gpu_gemm.py), the bubble mends of issue
27's note (compose.py, links.py) and the stage hand-offs (hierarchy/handoffs.py) merged; every row
re-measured on h7-agree (`python experiments/bench_scale_compile.py`, 33 CPU s in all):
  gpt3-175b (seq 2048): 8.5 s CPU, 104 MiB max RSS; makespan 35,015,847,154 cycles, step 24.83 s,
    177.4 TFLOP/s per GPU, pipeline bubble 7.1%; 10,482 nodes list-scheduled (9 of the 96 blocks)
    (before layer templates: 22 s CPU building the graph, then a refusal: ~352,000 tasks to measure)
  (h8-zero3: 6.6 s CPU, 104 MiB, the same makespan: a step is composed a second time with its filler only
  where its idle time could not hold it, which here it could; megatron-1t 9.2 s CPU, 199 MiB, the same)
  megatron-1t: 13.7 s CPU, 266 MiB max RSS; makespan 114,829,934,625 cycles, step 81.44 s, 205.4 TFLOP/s
    per GPU, pipeline bubble 11.6%; 3,630 nodes list-scheduled (3 of the 128 blocks)
  (before h7-agree: 35,044,938,730 and 114,931,427,380 cycles. h7-agree sends the tied embedding's gradient
  per rank (175B: 154 MB; it sent all 8 ranks' 1.24 GB over each rank's route) and reduces its sum over the
  replicas once the last stage's part has arrived and been added, as the task level does, no longer in stage
  0's buckets during its backward passes: -0.08% and -0.09% (experiments/stage_vs_task.py).
  h5-zbh1 measured 33,477,979,713 and 111,994,406,896; the merges between it and h7-agree's base brought them
  to 35,044,938,730 and 114,931,427,380. Before h5-zbh1: 33,461,515,912 and 111,654,351,005 cycles. On 175B
  the LM head's part of the tied embedding's gradient, now accumulated on the last stage as the task level
  plans it (templates.accumulate_cycles), adds 64.3M cycles; rematerialization's glue kept on its stage
  (planning/glue.py) saves 47.9M.)
  gpt2 12 layers, 4 stages on a100_x64 (GPU launch overheads: 14,100 cycles a kernel), remat every:1: task
    level 43,720,776 cycles (4.2 s CPU), stage level x1.0001 (43,724,301) both from the whole graph (2.3 s)
    and from layer templates (2.9 s); x0.928 (task level 47,154,470) before rematerialization's glue stayed on
    the stage of the gradient it reads (compiler/planning/glue.py, h5-zbh1)
The TFLOP/s are above Megatron-LM's published ~140 (175B) and ~163 (1T) per GPU: this run recomputes with
`every:1` (only what the backward pass reads), Megatron re-runs the whole forward (`full:1`; experiments/
megatron_table.py sets every row beside the paper). The bubbles were 12.1% and 44.5% before two
mends: the tied embedding's gradient went from the last stage to the first once per micro-batch (1T: 2.6 GB
per rank, 512 times, 49% of the step on the last stage's NICs, holding its input gradients back: every stage
idled 31-35% of the step in the steady state), now once per step as Megatron-LM all-reduces it; and pipeline
sends queued behind the gradient buckets on their links (175B: the cool-down idled 6-8%), now they pass
them. What remains above the interleaved schedule's (p - 1) / (v M + p - 1) (3.8% and 5.8%) is the last
stage's extra work, the LM head and its loss (busy 96.2% and 94.2% of the step against 92.4% and 88.1% for
the middle stages: they idle the difference in the steady state), then activation transfers; with every
chunk equal and free transfers the composition gives 3.4% and 4.7%. No memory window is involved: the
composition runs each schedule's own order in one round (compose.py never calls windowed_order).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

LARGE = {
    "gpt3-175b": dict(size="gpt3-175b", d=8, p=16, t=8, m=192, v=2, gpus=1024, hw_set=[], target_s=60.0,
                      layers=96, hidden=12288, vocab=50257, seq=2048),
    "megatron-1t": dict(size="megatron-1t", d=6, p=64, t=8, m=512, v=2, gpus=3072, hw_set=["chips.0.count=3072"],
                        target_s=120.0, layers=128, hidden=25600, vocab=51200, seq=2048),
}
TARGET_RSS_BYTES = 4 * 2**30


def cli_argv(c: dict, json_path: str, zero: int = 0, optimizer: str | None = None) -> list[str]:
    """The `accelsim run` command line of one large configuration (`zero`: its ZeRO stage; `optimizer`: the
    update's, the CLI's default SGD where None)."""
    argv = ["run", "--hw", "a100_superpod", "--model", "gpt2", "--set", f"size={c['size']}", "--set", f"seq={c['seq']}",
            "--data-parallel", str(c["d"]), "--pipeline-stages", str(c["p"]), "--tensor-parallel", str(c["t"]),
            "--microbatches", str(c["m"]), "--pipeline-schedule", "interleaved", "--virtual-stages", str(c["v"]),
            "--remat", "every:1", "--granularity", "stage", "--json", json_path]
    if zero:
        argv += ["--zero", str(zero)]
    if optimizer:
        argv += ["--optimizer", optimizer]
    for a in c["hw_set"]:
        argv += ["--hw-set", a]
    return argv


def run_large(name: str, c: dict, zero: int = 0, optimizer: str | None = None) -> dict | None:
    """One large configuration through the CLI in a child process: its CPU seconds, max RSS and figures; returns
    the run's JSON (None if it failed)."""
    from accelsim.step_flops import megatron_flops

    with tempfile.TemporaryDirectory() as tmp:
        out = str(Path(tmp) / "run.json")
        argv = [sys.executable, "-m", "accelsim", *cli_argv(c, out, zero, optimizer)]
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        _, status, usage = os.wait4(proc.pid, 0)
        stderr = proc.stderr.read().decode() if proc.stderr else ""
        if os.waitstatus_to_exitcode(status) != 0:
            print(f"{name}: accelsim run failed:\n{stderr}")
            return None
        payload = json.loads(Path(out).read_text())
    cpu = usage.ru_utime + usage.ru_stime
    rss = usage.ru_maxrss * 1024  # kilobytes on Linux
    batch = c["d"] * c["m"]
    flops = megatron_flops(batch, c["seq"], c["layers"], c["hidden"], c["vocab"])
    step_s = payload["makespan_s"]
    tflops = flops / step_s / c["gpus"] / 1e12
    met = cpu < c["target_s"] and rss < TARGET_RSS_BYTES
    print(f"{name} on {c['gpus']:,} GPUs (d{c['d']} x p{c['p']} x t{c['t']}, v={c['v']}, {c['m']} micro-batches, "
          f"global batch {batch}): {cpu:.1f} s CPU, max RSS {rss / 2**20:,.0f} MiB "
          f"(target < {c['target_s']:.0f} s, < 4 GiB: {'met' if met else 'MISSED'}); makespan "
          f"{payload['makespan_cycles']:,} cycles, step {step_s:.2f} s, {tflops:.1f} TFLOP/s per GPU (Megatron's "
          f"96BslH^2 convention), pipeline bubble {payload['bubble_fraction']:.1%}; measured from "
          f"{payload['template_layers']} layers' templates ({payload['measured_graph_nodes']:,} nodes scheduled)"
          + (f"; exposed on the critical path: {_exposed(payload)}" if zero else ""), flush=True)
    return payload


def _exposed(payload: dict) -> str:
    makespan = payload["makespan_cycles"]
    return ", ".join(f"{kind} {cycles / makespan:.1%}" for kind, cycles in payload["exposed_cycles"].items())


def data_parallel_bytes(payload: dict) -> tuple[int, int]:
    """(ZeRO 0's, ZeRO 3's) data-parallel payload per step and rank, summed over the pipeline's stages, from a
    ZeRO 3 run's JSON: without ZeRO each stage all-reduces its gradients once per step (a ring sends 2(d-1)/d
    of them; ZeRO 1 and 2 move the same bytes, as a reduce-scatter and an all-gather); under ZeRO 3 every
    micro-batch reduce-scatters them and all-gathers the parameters its forward and its backward passes read
    ((d-1)/d each), as the task level plans it (compiler/planning/zero.py)."""
    d, m = payload["options"]["data_parallel"], payload["options"]["microbatches"]
    gradients = sum(s["gradient_bytes"] for s in payload["stages"])
    gathered = sum(c["forward_gather_bytes"] + c["backward_gather_bytes"] for c in payload["chunks"])
    return 2 * gradients * (d - 1) // d, m * (gradients + gathered) * (d - 1) // d


def zero3(name: str, c: dict) -> None:
    """The configuration at ZeRO 3 (parameters sharded over the replicas, hierarchy/zero3.py) through the CLI,
    with its data-parallel traffic against ZeRO 0's all-reduce (Rajbhandari et al., SC'20, section 7.2.1: 3 psi
    against 2 psi, 1.5x, for one forward and one backward pass per step)."""
    payload = run_large(f"{name} ZeRO 3", c, zero=3)
    if payload is None:
        return
    base, sharded = data_parallel_bytes(payload)
    m = payload["options"]["microbatches"]
    print(f"  data-parallel bytes sent per rank and step, summed over the {len(payload['stages'])} stages: ZeRO 0 "
          f"{base / 2**30:,.1f} GiB (all-reduce), ZeRO 3 {sharded / 2**30:,.1f} GiB (x{sharded / base:.1f}); per "
          f"micro-batch x{sharded / m / base:.2f} (the paper's 1.5x is per forward and backward pass; with {m} "
          f"micro-batches ZeRO 3 gathers the parameters and reduce-scatters the gradients {m} times a step); "
          f"peak gathered parameters {max(payload['peak_gathered_bytes']) / 2**30:.2f} GiB per chip", flush=True)


def zero1(name: str, c: dict) -> None:
    """The configuration with Adam at ZeRO 1 (Megatron-LM's distributed optimizer: optimizer state sharded over the
    replicas, gradients reduce-scattered once all are computed and the updated parameters all-gathered) through the
    CLI, beside ZeRO 0 run the same way: step time, the optimizer state held per rank and the data-parallel bytes
    (a reduce-scatter and an all-gather move the all-reduce's bytes)."""
    base = run_large(f"{name} Adam ZeRO 0", c, optimizer="adam")
    payload = run_large(f"{name} Adam ZeRO 1", c, zero=1, optimizer="adam")
    if base is None or payload is None:
        return
    held = [sum(s["optimizer_bytes"] for s in p["stages"]) / len(p["stages"]) / 2**30 for p in (base, payload)]
    print(f"  ZeRO 1 step {payload['makespan_s']:.2f} s against ZeRO 0's {base['makespan_s']:.2f} s "
          f"(x{payload['makespan_cycles'] / base['makespan_cycles']:.4f}); optimizer state per rank, mean over the "
          f"{len(payload['stages'])} stages: {held[0]:.2f} GiB -> {held[1]:.2f} GiB "
          f"(1/{payload['options']['data_parallel']})"
          f"; data-parallel bytes sent per rank and step: {data_parallel_bytes(payload)[0] / 2**30:,.1f} GiB "
          f"either way", flush=True)


def compare() -> None:
    """Task level, stage level from the whole graph, and stage level from layer templates on one step."""
    import accelsim as A
    from accelsim.compiler.hierarchy import step as step_module

    hw = A.load_hw("a100_x64")
    model = dict(batch=1, seq=128, layers=12, d_model=256, heads=4, vocab=1024)
    graph = A.rematerialize(A.training_graph(A.models.build("gpt2", **model), optimizer="adam"), "every:1")
    step = dict(pipeline_stages=4, microbatches=4, pipeline_schedule="1f1b", remat="every:1")
    results = {}
    start = time.process_time()
    task = A.compile(graph, hw, granularity="task", max_in_flight=4, validate=False, **step)
    results["task"] = (task.makespan_cycles, time.process_time() - start, len(task.tasks))
    start = time.process_time()
    whole = A.compile(graph, hw, granularity="stage", **step)
    results["stage (whole graph)"] = (whole.makespan_cycles, time.process_time() - start, whole.measured_graph_nodes)
    threshold = step_module.TEMPLATE_TASKS
    step_module.TEMPLATE_TASKS = 0  # this step is small: force the layer templates
    try:
        start = time.process_time()
        templated = A.compile(graph, hw, granularity="stage", **step)
    finally:
        step_module.TEMPLATE_TASKS = threshold
    results["stage (layer templates)"] = (templated.makespan_cycles, time.process_time() - start,
                                          templated.measured_graph_nodes)
    base = results["task"][0]
    print("gpt2 (12 layers, d_model 256, seq 128) on a100_x64, 4 stages, 4 micro-batches, 1F1B, remat every:1:")
    for name, (makespan, cpu, size) in results.items():
        what = "tasks" if name == "task" else "nodes measured"
        print(f"  {name:24s} makespan {makespan:>12,} cycles  x{makespan / base:.4f} of the task level  "
              f"{cpu:6.1f} s CPU  ({size:,} {what})", flush=True)


def phases(name: str, c: dict) -> None:
    """Where each pipeline stage of one large configuration idles: the step compiled in this process from the
    same command line, then per stage its busy share of the step and its idle share before its first backward
    item (warm-up), until its last forward item ends (steady state) and after (cool-down), the slowest stage
    and the stages around the middle; then what each kind of exposed communication adds to the step."""
    from accelsim.cli import make_parser
    from accelsim.cli.common import limits_from, load_hw_arg
    from accelsim.cli.sched_cmds import stage_recipe
    from accelsim.cli.step_flags import step_options
    from accelsim.compiler.hierarchy.step import compile_recipe_step

    args = make_parser("run").parse_args(cli_argv(c, os.devnull))
    step = compile_recipe_step(stage_recipe(args), load_hw_arg(args), step_options(args), limits_from(args))
    comp, p = step.composition, c["p"]
    makespan = comp.makespan_cycles
    formula = (p - 1) / (c["v"] * c["m"] + p - 1)
    exposed = ", ".join(f"{k} {x / makespan:.2%}" for k, x in comp.exposed_cycles.items())
    print(f"{name}: bubble {comp.bubble_fraction:.1%}, (p - 1) / (v M + p - 1) = {formula:.1%}; exposed on the "
          f"critical path: {exposed}")
    work_kinds = ("forward", "backward", "weight_grad", "update")
    by_stage: dict[int, list] = {}
    for span in comp.spans:
        if span.kind in work_kinds:
            by_stage.setdefault(span.stage, []).append(span)
    for s in sorted({0, 1, p // 2, p - 2, p - 1}):
        spans = by_stage[s]
        first_backward = min(x.start for x in spans if x.kind == "backward")
        last_forward = max(x.end for x in spans if x.kind == "forward")

        def idle(a: int, b: int) -> float:
            return ((b - a) - sum(max(0, min(b, x.end) - max(a, x.start)) for x in spans)) / makespan

        print(f"  stage {s:3d}: busy {comp.busy_cycles[s] / makespan:6.1%}, "
              f"idle in warm-up {idle(0, first_backward):5.1%}, "
              f"steady state {idle(first_backward, last_forward):5.1%}, cool-down {idle(last_forward, makespan):5.1%}; "
              f"peak stash {comp.peak_stash_bytes[s] / 2**30:.1f} GiB", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", choices=("175b", "1t", "compare", "175b-zero3", "175b-zero1"), default=None,
                    help="one part (175b-zero3, 175b-zero1: GPT-3 175B at ZeRO 3 or 1, run only when asked for)")
    ap.add_argument("--phases", action="store_true",
                    help="also compile each large configuration in this process and print where its stages idle")
    args = ap.parse_args()
    if args.only in (None, "175b"):
        run_large("gpt3-175b", LARGE["gpt3-175b"])
        if args.phases:
            phases("gpt3-175b", LARGE["gpt3-175b"])
    if args.only == "175b-zero3":
        zero3("gpt3-175b", LARGE["gpt3-175b"])
    if args.only == "175b-zero1":
        zero1("gpt3-175b", LARGE["gpt3-175b"])
    if args.only in (None, "1t"):
        run_large("megatron-1t", LARGE["megatron-1t"])
        if args.phases:
            phases("megatron-1t", LARGE["megatron-1t"])
    if args.only in (None, "compare"):
        compare()


if __name__ == "__main__":
    main()
