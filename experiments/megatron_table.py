"""accelsim's TFLOP/s per GPU next to every row of Narayanan et al. (SC21) Table 1 and their GPT-3 175B figure.

Narayanan et al., "Efficient Large-Scale Language Model Training on GPU Clusters Using Megatron-LM", SC21,
Table 1: GPT models of 1.7B to 1T parameters (vocabulary 51,200, seq 2048) on 32 to 3,072 A100s, achieved
TFLOP/s per GPU by their eq. 3, 96 B s l h^2 (1 + s/6h + V/16lh) (accelsim/step_flops.megatron_flops: it counts
full activation recomputation). Parallel configurations, micro- and global batch sizes and the interleaved
schedule's layers per virtual stage are those of the paper's own launch script, examples/sc21/run_table_1.sh in
github.com/NVIDIA/Megatron-LM (TP, PP, MBS, GBS, --num-layers-per-virtual-pipeline-stage); every row recomputes
activations per layer (--recompute-method uniform: `remat="every:1"`). Section 5.1's training-time estimate
uses 140 TFLOP/s per GPU for GPT-3 175B on 1,024 A100s at batch 1536 (d8 x p16 x t8, micro-batch 1).

Each step is compiled at stage granularity on a100_superpod with the row's GPU count, Adam fused into one
multi-tensor update (apex FusedAdam) and elementwise chains fused (Megatron's fused bias-GeLU, bias-dropout-add,
softmax and layer-norm kernels): passes fuse_epilogue, fuse_elementwise, fuse_optimizer. The graph passes do not
take tensor-parallel graphs yet, so rows with t > 1 run unfused (marked): more, smaller kernels.

Columns: paper TFLOP/s; accelsim TFLOP/s (the same eq. 3 over the simulated step); their ratio; pipeline bubble
fraction; exposed communication per kind (cycles chips wait on it, as a share of the stages' time); and
`serial/busy`: the sum of one rank's kernel times per micro-batch over the composed chunks' busy time. A GPU
runs one compute stream, one kernel at a time; above 1, the task-level template overlapped Tensor Core and
CUDA-core kernels, which makes accelsim faster than the GPU by up to that factor (a100 configs run one stream
since issue 28, so it should read 1.00). `TC share`: the Tensor Core kernels' share of those serial cycles, and
`TC TFLOP/s` the rate they run at in the cost model (the 16x16 fold model over 432 Tensor Cores; peak 312).

Rows larger than a few minutes of CPU here are left out unless named (--rows); --layers-per-chunk K reduces a
row to K layers per model chunk (p x v chunks; the reduction is printed). --full runs every named row whole.
Run: python experiments/megatron_table.py [--rows 1.7B,3.6B] [--layers-per-chunk 8] [--full]

What it showed when written (issue 28; figures from the run, each difference by its breakdown):
- Whole rows do not compile yet: 1.7B (24 layers, micro-batch 16) fails the task-level memory plan with
  MemoryFitError (~83 GB of 80 GiB live at a recomputed attention node); 8 layers fit, 12 do not.
- Rows with one stage, reduced to 8 layers: 1.21-1.4x the paper. Tensor Core kernels are ~55-60% of the serial
  kernel time and run at ~277-300 TFLOP/s in the cost model (89-96% of the 312 peak: the fold model over 432
  Tensor Cores has no tile or wave quantization), and the reduced model's LM head weighs more than the whole one's.
- Pipelined rows (39.1B and up), reduced, were 0.43-0.55x with 63-73% bubble while the stage composition sent
  t x the full activation between stages; with per-rank bytes (layer templates' fix) 39.1B reduced to 16 of 48
  layers gives 193 TFLOP/s, 1.40x, bubble 8.1% (`--rows 39.1B`): the same Tensor Core rate as the other rows.
"""
from __future__ import annotations

import argparse
import time
from dataclasses import dataclass

import accelsim as A
from accelsim.compiler.hierarchy.layer_templates import recipe
from accelsim.compiler.hierarchy.step import compile_recipe_step
from accelsim.cost.model import best_cost
from accelsim.errors import MemoryFitError
from accelsim.hw.overrides import parse_assignments
from accelsim.models.transformer import GPT2_SIZES
from accelsim.ops.registry import get_op
from accelsim.remat import rematerialize
from accelsim.schedule.options import StepOptions
from accelsim.step_flops import megatron_flops

SEQ, VOCAB = 2048, 51_200
PASSES = ["fuse_epilogue", "fuse_elementwise", "fuse_optimizer"]


@dataclass(frozen=True)
class Row:
    """One configuration: the zoo preset, t, p, micro- and global batch, GPUs, layers per virtual stage
    (None: plain 1F1B) and the paper's TFLOP/s per GPU."""

    name: str
    size: str
    t: int
    p: int
    micro_batch: int
    global_batch: int
    gpus: int
    layers_per_virtual_stage: int | None
    paper_tflops: float

    @property
    def d(self) -> int:
        return self.gpus // (self.t * self.p)

    @property
    def layers(self) -> int:
        return GPT2_SIZES[self.size]["layers"]

    @property
    def v(self) -> int:
        """Model chunks per GPU: the interleaved schedule's virtual stages."""
        if self.layers_per_virtual_stage is None:
            return 1
        return self.layers // (self.p * self.layers_per_virtual_stage)

    @property
    def microbatches(self) -> int:
        """Micro-batches per replica and step."""
        return self.global_batch // (self.micro_batch * self.d)


ROWS = (  # Table 1 (TFLOP/s per GPU) and run_table_1.sh (TP, PP, MBS, GBS, nodes x 8 GPUs, layers per virtual stage)
    Row("1.7B", "megatron-1.7b", 1, 1, 16, 512, 32, None, 137),
    Row("3.6B", "megatron-3.6b", 2, 1, 16, 512, 64, None, 138),
    Row("7.5B", "megatron-7.5b", 4, 1, 16, 512, 128, None, 142),
    Row("18.4B", "megatron-18.4b", 8, 1, 8, 1024, 256, None, 135),
    Row("39.1B", "megatron-39.1b", 8, 2, 4, 1536, 512, None, 138),
    Row("76.1B", "megatron-76.1b", 8, 4, 2, 1792, 1024, 5, 140),
    Row("145.6B", "megatron-145.6b", 8, 8, 2, 2304, 1536, 5, 148),
    Row("310.1B", "megatron-310.1b", 8, 16, 1, 2160, 1920, 3, 155),
    Row("529.6B", "megatron-529.6b", 8, 35, 1, 2520, 2520, 1, 163),
    Row("1T", "megatron-1t", 8, 64, 1, 3072, 3072, None, 163),
    # Section 5.1: 140 TFLOP/s on 1,024 GPUs at batch 1536; d8 x p16 x t8 and micro-batch 1 as in issue 27.
    # ASSUMPTION: 3 layers per virtual stage (v = 2); the paper gives no interleaving for this estimate.
    Row("GPT-3 175B", "gpt3-175b", 8, 16, 1, 1536, 1024, 3, 140),
)
DEFAULT_ROWS = tuple(r.name for r in ROWS)
"""Every row: those with t > 1 whole from layer templates, 1.7B (t = 1, fused) reduced to --layers-per-chunk."""


KERNEL_LAYERS = 2
"""Layers of the small build whose kernels give a templated row's Tensor Core share and rate (per layer alike)."""


def model_options(row: Row, layers: int) -> dict:
    opts = dict(size=row.size, batch=row.micro_batch, layers=layers, vocab=VOCAB, seq=SEQ, limits=None)
    if row.t > 1:
        opts["tensor_parallel"] = row.t
    return opts


def build(row: Row, layers: int) -> A.Graph:
    """The row's training step for one micro-batch: Adam, vocabulary 51,200, seq 2048, and Megatron's fusions
    where the graph passes can place them (not yet on a tensor-parallel graph: those rows run unfused)."""
    step = A.training_graph(A.models.build("gpt2", **model_options(row, layers)), optimizer="adam")
    return step if row.t > 1 else A.optimize(step, PASSES)


@dataclass(frozen=True)
class Kernels:
    """One rank's kernels of one micro-batch (forward, recomputation, backward), each at its cheapest unit, back
    to back as a GPU's single compute stream runs them: all of them, and the Tensor Core ones (tensor ops)."""

    cycles: int
    tensor_cycles: int
    tensor_flops: int


def kernels(graph: A.Graph, hw: A.HwSpec) -> Kernels:
    total = tensor = flops = 0
    for node in graph.nodes:
        if node.is_leaf or node.phase == "update" or node.rank not in (-1, 0):
            continue
        cost = best_cost(hw, graph, node)
        total += cost.cycles
        if get_op(node.op).category == "tensor":
            tensor += cost.cycles
            flops += cost.flops
    return Kernels(total, tensor, flops)


def templated(row: Row, layers: int) -> bool:
    """A whole unfused row (t > 1: the graph passes do not take tensor-parallel graphs) is measured from layer
    templates (compiler/hierarchy/layer_templates.py, `--granularity stage` on the CLI): never built whole."""
    return row.t > 1 and layers == row.layers


def compile_row(row: Row, layers: int, hw: A.HwSpec, options: dict):
    """The row's step at stage granularity: from layer templates where `templated`, else from the whole graph.
    Returns the StageStep and the graph whose kernels the breakdown sums (the whole one, or KERNEL_LAYERS')."""
    if templated(row, layers):
        opts = {k: v for k, v in model_options(row, layers).items() if k != "limits"}
        found = recipe("gpt2", opts, {"optimizer": "adam"}, "every:1")
        step = compile_recipe_step(found, hw, StepOptions.of(tensor_parallel=row.t, **options))
        return step, found.build(KERNEL_LAYERS)
    graph = build(row, layers)
    return A.compile(graph, hw, **options), rematerialize(graph, "every:1")


def run(row: Row, layers_per_chunk: int | None) -> str:
    """One row's line. `layers_per_chunk` reduces a row compiled from its whole graph (t = 1: fused); a row
    measured from layer templates runs whole (a few seconds of CPU) unless its whole step does not fit the
    GPU's memory, and then reduced as well (the line says so)."""
    start = time.process_time()
    reduced = row.layers if layers_per_chunk is None else min(row.layers, layers_per_chunk * row.p * row.v)
    hw = A.load_hw("a100_superpod", overrides=parse_assignments([f"chips.0.count={row.gpus}"]))
    options = dict(data_parallel=row.d, pipeline_stages=row.p, microbatches=row.microbatches, remat="every:1",
                   granularity="stage", pipeline_schedule="interleaved" if row.v > 1 else "1f1b")
    if row.v > 1:
        options["virtual_stages"] = row.v
    layers, note = (row.layers, "") if row.t > 1 else (reduced, "")
    while True:
        label = f"{row.name:10s} t{row.t} p{row.p} d{row.d} v{row.v} M{row.microbatches:<3d}" + (
            f" [{layers} of {row.layers} layers{note}]" if layers < row.layers else "") + (
            " [unfused, templates]" if templated(row, layers) else " [unfused]" if row.t > 1 else "")
        try:
            step, kernel_graph = compile_row(row, layers, hw, options)
            break
        except MemoryFitError as e:
            if layers == reduced:
                return f"{label}  {row.paper_tflops:6.0f}  does not fit: {str(e).splitlines()[0][:200]}"
            layers, note = reduced, "; whole: MemoryFitError"
        except A.AccelsimError as e:
            first = str(e).splitlines()[0]
            return f"{label}  {row.paper_tflops:6.0f}  does not compile today: {type(e).__name__}: {first[:300]}"
    flops = megatron_flops(row.global_batch, SEQ, layers, GPT2_SIZES[row.size]["d_model"], VOCAB)
    tflops = flops / step.makespan_seconds / row.gpus / 1e12
    stage_time = row.p * step.makespan_cycles
    exposed = ", ".join(f"{kind} {cycles / stage_time:.1%}" for kind, cycles in step.exposed_cycles.items() if cycles)
    busy = sum(c.forward_cycles + c.backward_cycles for c in step.work.chunks)
    k = kernels(kernel_graph, hw)
    tensor_rate = k.tensor_flops / (k.tensor_cycles / hw.clock_hz) / 1e12
    serial = "     -" if templated(row, layers) else f"{k.cycles / busy:6.2f}"  # a small build's kernels: no sum
    recompute = sum(c.recompute_cycles for c in step.work.chunks) / sum(c.forward_cycles for c in step.work.chunks)
    return (f"{label}  {row.paper_tflops:6.0f}  {tflops:8.1f}  {tflops / row.paper_tflops:5.2f}  "
            f"{step.bubble_fraction:6.1%}  {recompute:6.2f}  {serial}  {k.tensor_cycles / k.cycles:6.1%}  "
            f"{tensor_rate:6.0f}  {exposed or 'none'}  ({time.process_time() - start:.0f} s CPU)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default=",".join(DEFAULT_ROWS), help="comma-separated row names, or 'all'")
    parser.add_argument("--layers-per-chunk", type=int, default=8, help="reduce a row compiled from its whole graph "
                        "(t = 1) to this many layers per model chunk (default 8: 1.7B fails to fit in HBM from 12)")
    parser.add_argument("--full", action="store_true", help="run the t = 1 rows with all their layers too")
    args = parser.parse_args()
    names = [r.name for r in ROWS] if args.rows == "all" else args.rows.split(",")
    known = {r.name: r for r in ROWS}
    unknown = [n for n in names if n not in known]
    if unknown:
        parser.error(f"unknown rows {', '.join(unknown)}; known: {', '.join(known)}")
    print(f"{'row':10s} {'config':22s} {'paper':>6s}  {'accelsim':>8s}  {'ratio':>5s}  {'bubble':>6s}  {'recomp':>6s}  "
          f"{'serial/busy':>6s}  {'TC share':>8s}  {'TC TFLOP/s':>6s}  exposed communication (share of the stages' time)")
    for name in names:
        print(run(known[name], None if args.full else args.layers_per_chunk), flush=True)


if __name__ == "__main__":
    main()
