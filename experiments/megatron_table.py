"""accelsim's TFLOP/s per GPU next to every row of Narayanan et al. (SC21) Table 1 and their GPT-3 175B figure.

Narayanan et al., "Efficient Large-Scale Language Model Training on GPU Clusters Using Megatron-LM", SC21,
Table 1: GPT models of 1.7B to 1T parameters (vocabulary 51,200, seq 2048) on 32 to 3,072 A100s, achieved
TFLOP/s per GPU by their eq. 3, 96 B s l h^2 (1 + s/6h + V/16lh) (accelsim/step_flops.megatron_flops: it counts
full activation recomputation). Parallel configurations, micro- and global batch sizes and the interleaved
schedule's layers per virtual stage are those of the paper's own launch script, examples/sc21/run_table_1.sh in
github.com/NVIDIA/Megatron-LM (TP, PP, MBS, GBS, --num-layers-per-virtual-pipeline-stage); every row passes
--recompute-method uniform, and Megatron-LM's --recompute-num-layers defaults to 1: each transformer layer is one
checkpointed unit whose whole forward re-runs before its backward (full recomputation), here `remat="full:1"`
(REMAT; accelsim/remat/policy.py). What was read for this: run_table_1.sh and Megatron-LM's argument defaults;
the paper's own text (Section 3.5 on activation recomputation, Section 5's eq. 3, which counts a fourth,
recomputing forward pass) was not at hand, and CONFIG.sh, which sets the granularity, is not in the stored copy.
accelsim's layers are half-blocks (remat/layers.py), so full:1 keeps two residual-stream checkpoints per
transformer layer where Megatron keeps one: the same recomputed work, a little more memory. Section 5.1's
training-time estimate uses 140 TFLOP/s per GPU for GPT-3 175B on 1,024 A100s at batch 1536 (d8 x p16 x t8,
micro-batch 1).

Each step is compiled at stage granularity on a100_superpod with the row's GPU count. Rows with t > 1 are
measured from layer templates (compiler/hierarchy/layer_templates.py: the path of `accelsim run --granularity
stage` and experiments/bench_scale_compile.py), never built whole, and run unfused: the graph passes do not
take tensor-parallel graphs yet, so their layers are more, smaller kernels (marked). The 1.7B row (t = 1) is
built whole and fused as Megatron's kernels are (Adam as one multi-tensor update, apex FusedAdam; fused
bias-GeLU, bias-dropout-add, softmax and layer norm): passes fuse_epilogue, fuse_elementwise, fuse_optimizer.
Rows named in REDUCED (and any row whose whole step does not compile) run with --layers-per-chunk layers per
model chunk (p x v chunks; the line says so and why).

Columns: paper TFLOP/s; accelsim TFLOP/s (the same eq. 3 over the simulated step); their ratio; pipeline bubble
fraction; `recomp`: the recomputation's busy cycles over the forward pass's (with full:1 below 1 by the LM head
and loss, which neither Megatron nor full:K recomputes, and by the embedding and the segments' last residual
adds; it was 0.81-0.89 while the recomputed layers' tensor-parallel all-reduces could run beside backward
kernels, 0.89-0.98 since they hold the GPU's stream; a 2-layer build's kernel sums give recompute equal to
forward for the blocks' GEMMs, the difference being the LM head);
selective `--remat every:1` skips the attention output projection and second MLP GEMM: ~0.5-0.7);
`DP tail`: the data-parallel gradient all-reduce's exposed cycles on the step's critical path, as a share of
the step (Composition.exposed_cycles['allreduce']): every row runs with the paper's reduction, REDUCTION =
after-backward (StepOptions.gradient_reduction), so each stage all-reduces its chunks' whole gradients once its
last backward item ends and updates after them; `whole`: the same all-reduce of the slowest stage's gradients
costed alone (serial_gradient_allreduce_cycles), the check that the simulated tail is that collective, unhidden
(`--gradient-reduction overlap` gives accelsim's default, buckets beside the backward pass, where it is ~0);
`serial/busy`: one rank's kernel times per micro-batch over the composed chunks' busy time (1.00: one compute
stream; below 1 with t > 1 by the tensor-parallel all-reduces, which hold the stream but are not kernels; `-`
for templated rows, which are never built whole); `TC share`: the Tensor
Core kernels' share of the serial kernel cycles, `TC TFLOP/s` their rate in the cost model (for a templated
row, from a build of KERNEL_LAYERS layers); exposed communication per kind (cycles chips wait on it, as a
share of the stages' time).

Tensor Core GEMMs are timed by the chip's `gpu_gemm:` (cost/gpu_gemm.py): cuBLAS's thread-block tiles in waves
over 108 SMs, at most the best measured A100 GEMM's 85.9% of the 312 peak; they run at 244-261 TFLOP/s here.
Run: python experiments/megatron_table.py [--rows 1.7B,GPT-3 175B] [--layers-per-chunk 8] [--full] [--remat every:1]
     [--gradient-reduction after-backward|overlap]

Measured 2026-11-26 with full:1 and the paper's after-backward reduction (`python experiments/megatron_table.py`;
133 s CPU for the table, 193 MiB max RSS, `/usr/bin/time -v`; the
after-backward column re-measured after h7-agree's tied-gradient mend: 131 s CPU, 195 MiB; 39.1B, 310.1B, 529.6B
and 175B moved by 0.2 TFLOP/s or less). `overlap` is the same table with the all-reduce
in buckets beside the backward pass (the table's figures before the option existed; full:1, NCCL-rate links,
tensor-parallel all-reduces holding the GPU's stream):
  row          layers      paper  accelsim  ratio  bubble  recomp  DP tail  overlap
  1.7B         8 of 24       137     146.1  1.066    1.6%    0.87     1.6%    1.08
  3.6B         8 of 30       138     137.7  0.998    2.5%    0.89     2.5%    1.02
  7.5B         8 of 36       142     140.5  0.990    4.7%    0.89     4.7%    1.03
  18.4B        8 of 40       135     135.0  1.000    4.3%    0.90     4.3%    1.04
  39.1B       16 of 48       138     142.3  1.031    9.7%    0.94     3.1%    1.06
  76.1B        whole         140     157.1  1.122    6.6%    0.96     2.9%    1.153
  145.6B       whole         148     162.0  1.095    8.4%    0.97     1.7%    1.11
  310.1B       whole         155     174.9  1.128    7.4%    0.97     1.2%    1.14
  529.6B       whole         163     183.1  1.123    8.7%    0.98     0.7%    1.13
  1T           whole         163     180.3  1.106   13.2%    0.98     0.3%    1.11
  GPT-3 175B   whole         140     158.5  1.132    6.8%    0.97     0.8%    1.14
  (Tensor Cores at 245-261 TFLOP/s in the cost model; `DP tail` equals `whole` on every row: nothing hides the
  all-reduce after the backward pass; the bubble column now counts the chips' wait for it, besides the pipeline
  bubble; pipeline transfers exposed 0.1% or less.)
  Within 15%: 11 of 11 rows (0.990-1.132).
Each row's remaining difference, from the breakdown:
- 1.7B (1.066; t = 1, fused, M = 1): no tensor-parallel communication, and its DP tail (1.6%) is now in the
  step, so what remains is kernels: no dropout (Megatron-LM's default 0.1 on the attention probabilities and
  after both projections: memory-bound passes and their masks in forward, recomputation and backward), GEMMs at
  the cost model's cuBLAS tiles rather than measured kernels of these shapes, no data loading or launch gaps
  beyond the 10 us/1 us per kernel.
- 3.6B, 7.5B, 18.4B (0.990-1.000; t = 2, 4, 8, p = 1, d = 32 over HDR, the largest DP tails: 2.5-4.7%): as 1.7B
  (no dropout: accelsim faster), less the unfused elementwise kernels of the tensor-parallel graphs (slower
  than Megatron's fused ones: accelsim slower); the two about cancel here.
- 39.1B to 1T and GPT-3 175B (1.031-1.132; t = 8, p = 2-64): the bubbles are near (p - 1) / (v M) plus the DP
  tail (0.3-3.1%), and recomputation re-runs 0.94-0.98 of the forward (the rest is the LM head and loss, which
  Megatron does not recompute either), so what remains is in the chunks' busy time: no dropout (on attention
  probabilities of b a/t s^2 elements a layer, the largest elementwise tensors of the step), and Megatron's
  pipeline sends, which its p2p code waits for (megatron/p2p_communication.py: batch_isend_irecv, req.wait(),
  then torch.cuda.synchronize() "to protect against race condition"; accelsim overlaps them: 'transfer' 0.1% or
  less). Interleaving (v = 2-3) multiplies the sends by v: the rows with v > 1 are 1.095-1.132, the pipelined
  rows with v = 1 are 1.031 (39.1B, p = 2) and 1.106 (1T, p = 64).
- 76.1B (1.122, was 1.153 overlapped): the row with most gradient bytes per GPU (2.4 B parameters per GPU at
  d = 32); its DP tail (2.9%) is now paid as the paper's code paid it. It remains among the highest by its
  sends (v = 3, micro-batch 2), the synchronous sends and dropout not being measured.
What the table does not model and would move it: dropout (not in the zoo's GPT), synchronous pipeline sends, and
Megatron's scatter/gather of them (each rank sends 1/t of the activation over its NIC, then an all-gather over
NVLink; accelsim's ChunkWork.activation_bytes is each rank's whole copy, over its own NIC, overlapped); Megatron
2021's all-reduce of the tied embedding's gradient between the first and last stages after the data-parallel
one (accelsim sends it once per step as soon as it is summed, overlapped); and, the other way, the t > 1 rows'
unfused kernels. The reduction after the backward pass is the code's (megatron/training.py train_step: each
model chunk's allreduce_gradients() once forward_backward_func has returned, DDP_impl local by default;
megatron/model/distributed.py: one all_reduce of the chunk's contiguous gradient buffer), read in the stored
copy of github.com/NVIDIA/Megatron-LM, whose train_step and local DDP keep this form from 2021 on.
"""
from __future__ import annotations

import argparse
import time
from dataclasses import dataclass

import accelsim as A
from accelsim.compiler.hierarchy.layer_templates import recipe
from accelsim.compiler.hierarchy.step import compile_recipe_step
from accelsim.cost.model import best_cost
from accelsim.hw.overrides import parse_assignments
from accelsim.hw.topology import topology_of
from accelsim.models.transformer import GPT2_SIZES
from accelsim.ops.registry import get_op
from accelsim.remat import rematerialize
from accelsim.schedule.collectives import collective_cost
from accelsim.schedule.options import GRADIENT_REDUCTIONS, StepOptions
from accelsim.step_flops import megatron_flops

SEQ, VOCAB = 2048, 51_200
PASSES = ["fuse_epilogue", "fuse_elementwise", "fuse_optimizer"]
REDUCTION = "after-backward"
"""The paper's data-parallel gradient reduction (StepOptions.gradient_reduction): Megatron-LM's local DDP of 2021
all-reduces each model chunk's whole gradient buffer after forward_backward_func returns (megatron/training.py
train_step, megatron/model/distributed.py allreduce_gradients), not overlapped with the backward pass."""
REMAT = "full:1"
"""Megatron's full recomputation with a checkpoint per layer (remat/policy.py; `--remat every:1` gives accelsim's
selective recomputation of what the backward pass reads, the table's figures before full:K existed)."""


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
"""Every row: whole where that is cheap, the rows of REDUCED reduced to --layers-per-chunk layers per chunk."""
REDUCED = {  # why a row does not run whole by default (measured 2026-11-26; --full tries them whole first)
    "1.7B": "t = 1: fused, so compiled from its whole graph; 24 layers at micro-batch 16 fail its memory plan",
    "3.6B": "MemoryFitError whole: unfused attention scores (2 GiB a node at micro-batch 16) fill the 80 GiB",
    "7.5B": "MemoryFitError whole, as 3.6B (1 GiB score nodes)",
    "18.4B": "MemoryFitError whole: 40 layers of parameters, Adam state and activations on one pipeline stage",
    "39.1B": "ScheduleError whole: the layer templates do not take it (24 layers a chunk) and one micro-batch "
             "of the whole graph is ~270,000 tasks, above the 250,000 limit",
}


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


def serial_gradient_allreduce_cycles(step, hw: A.HwSpec, row: Row) -> int:
    """Cycles of the slowest stage's data-parallel all-reduce of its gradients (one rank's, at the step's
    precision) over the row's d replicas, run whole after the backward pass: Megatron-LM's train_step with its
    default local DDP calls allreduce_gradients() after the last micro-batch's backward pass, where accelsim
    overlaps buckets with the backward pass (issue 27). Not part of accelsim's step; the table shows its share."""
    topo = topology_of(hw)
    if row.d == 1 or topo is None:
        return 0
    span = row.p * row.t  # replica r's chips follow replica 0's at r * p * t (StageWork.chips)
    return max(collective_cost(topo, "allreduce", [stage.chips[0] + r * span for r in range(row.d)],
                               stage.gradient_bytes).cycles for stage in step.work.stages)


def templated(row: Row, layers: int) -> bool:
    """A whole unfused row (t > 1: the graph passes do not take tensor-parallel graphs) is measured from layer
    templates (compiler/hierarchy/layer_templates.py, `--granularity stage` on the CLI): never built whole."""
    return row.t > 1 and layers == row.layers


def compile_row(row: Row, layers: int, hw: A.HwSpec, options: dict):
    """The row's step at stage granularity: from layer templates where `templated`, else from the whole graph.
    Returns the StageStep and the graph whose kernels the breakdown sums (the whole one, or KERNEL_LAYERS')."""
    remat = options["remat"]
    if templated(row, layers):
        opts = {k: v for k, v in model_options(row, layers).items() if k != "limits"}
        found = recipe("gpt2", opts, {"optimizer": "adam"}, remat)
        step = compile_recipe_step(found, hw, StepOptions.of(tensor_parallel=row.t, **options))
        return step, found.build(KERNEL_LAYERS)
    graph = build(row, layers)
    return A.compile(graph, hw, **options), rematerialize(graph, remat)


def run(row: Row, layers_per_chunk: int, full: bool = False, remat: str = REMAT, reduction: str = REDUCTION) -> str:
    """One row's line: whole where that is cheap (rows not in REDUCED, or every row with `full`), falling back
    to `layers_per_chunk` layers per model chunk where the whole step does not compile (the line says so)."""
    start = time.process_time()
    reduced = min(row.layers, layers_per_chunk * row.p * row.v)
    hw = A.load_hw("a100_superpod", overrides=parse_assignments([f"chips.0.count={row.gpus}"]))
    options = dict(data_parallel=row.d, pipeline_stages=row.p, microbatches=row.microbatches, remat=remat,
                   granularity="stage", pipeline_schedule="interleaved" if row.v > 1 else "1f1b",
                   gradient_reduction=reduction)
    if row.v > 1:
        options["virtual_stages"] = row.v
    layers, note = (row.layers, "") if full or row.name not in REDUCED else (reduced, "")
    while True:
        label = f"{row.name:10s} t{row.t} p{row.p} d{row.d} v{row.v} M{row.microbatches:<3d}" + (
            f" [{layers} of {row.layers} layers{note}]" if layers < row.layers else "") + (
            " [unfused, templates]" if templated(row, layers) else " [unfused]" if row.t > 1 else "")
        try:
            step, kernel_graph = compile_row(row, layers, hw, options)
            break
        except A.AccelsimError as e:
            if layers > reduced:  # the whole row does not compile: reduce it
                layers, note = reduced, f"; whole: {type(e).__name__}"
                continue
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
    forward = sum(c.forward_cycles for c in step.work.chunks)
    recompute = sum(c.recompute_cycles for c in step.work.chunks)
    dp_tail = step.exposed_cycles["allreduce"] / step.makespan_cycles
    whole = serial_gradient_allreduce_cycles(step, hw, row) / step.makespan_cycles
    return (f"{label}  {row.paper_tflops:6.0f}  {tflops:8.1f}  {tflops / row.paper_tflops:5.3f}  "
            f"{step.bubble_fraction:6.1%}  {recompute / forward:6.2f}  {dp_tail:7.1%}  {whole:7.1%}  {serial}  "
            f"{k.tensor_cycles / k.cycles:6.1%}  "
            f"{tensor_rate:6.0f}  {exposed or 'none'}  ({time.process_time() - start:.0f} s CPU)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default=",".join(DEFAULT_ROWS), help="comma-separated row names, or 'all'")
    parser.add_argument("--layers-per-chunk", type=int, default=8, help="reduce the rows of REDUCED (and any row "
                        "whose whole step does not compile) to this many layers per model chunk (default 8)")
    parser.add_argument("--full", action="store_true", help="try every row whole first")
    parser.add_argument("--gradient-reduction", default=REDUCTION, choices=GRADIENT_REDUCTIONS,
                        help=f"how data-parallel gradients are reduced (default {REDUCTION}: as the paper's Megatron-LM; "
                        "overlap: in buckets beside the backward pass, accelsim's default)")
    parser.add_argument("--remat", default=REMAT, help=f"rematerialization policy (default {REMAT}: Megatron's full "
                        "recomputation per layer; every:1 recomputes only what the backward pass reads)")
    args = parser.parse_args()
    names = [r.name for r in ROWS] if args.rows == "all" else args.rows.split(",")
    known = {r.name: r for r in ROWS}
    unknown = [n for n in names if n not in known]
    if unknown:
        parser.error(f"unknown rows {', '.join(unknown)}; known: {', '.join(known)}")
    print(f"{'row':10s} {'config':22s} {'paper':>6s}  {'accelsim':>8s}  {'ratio':>5s}  {'bubble':>6s}  {'recomp':>6s}  "
          f"{'DP tail':>7s}  {'whole':>7s}  {'serial/busy':>6s}  {'TC share':>8s}  {'TC TFLOP/s':>6s}  "
          "exposed communication (share of the stages' time)")
    for name in names:
        print(run(known[name], args.layers_per_chunk, args.full, args.remat, args.gradient_reduction), flush=True)


if __name__ == "__main__":
    main()
