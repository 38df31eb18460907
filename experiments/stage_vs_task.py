"""Stage granularity against task granularity: the makespan of a step composed from stage templates
(compile(..., granularity="stage")) next to the whole-task schedule of the same step under the same pipeline
schedule, their ratio and the CPU seconds of each. Issue 27 asks for agreement within 3% (AGREEMENT).
Run: python experiments/stage_vs_task.py [--models transformer_block gpt2 resnet50] [--layers 2 4 12]
     [--p 1 2 4] [--d 1 2] [--t 1 2] [--m 1 4 8] [--schedules gpipe 1f1b zb-h1] [--hw a100_x8]
     [--gradient-reduction overlap after-backward] [--zero 0 1 2 3]

ZeRO 1 and 2 on h8-zero12 (2026-11-26; `--models gpt2 --layers 2 --p 1 2 --d 2 4 --t 1 2 --m 1 4 --zero 1`, and
`--zero 2`, 26 rows each, ~100 CPU s each). ZeRO 1: every row within 3%, 0.970 to 1.016. The lowest, d=4 p=2 t=1
M=4 GPipe and 1F1B (0.970, ZB-H1 0.986): under ZeRO the task level sums no gradient over the step, so stage 0 adds
the LM head's part of the tied matrix's gradient (sent every micro-batch) into its own and accumulates it once it
has arrived: its last backward work ends at 17,764,137 where the stage level's, which counts those adds in the
chunk's backward cycles without waiting for the send, ends at 17,106,112. ZeRO 2: 24 rows within 3%, 0.990 to
1.030; d=2 p=2 t=2 M=1 GPipe and 1F1B are 1.031 (ZB-H1 1.030; every other row 0.990 to 1.019). Compared per stage (1F1B), stage 0's update at the
task level starts when its reduce-scatters end, 3,380,722, 1,400 cycles after its backward pass (it reduces each
gradient, the tied matrix's sum included, as soon as it is complete) and its last all-gather ends 1,454 cycles
after the update; at the stage level the sum of the tied matrix's parts is reduced once the stage's last item and
its own buckets are done (3,405,822-3,520,615), and the last 25 MB bucket's all-gather follows the update (63K
cycles): 203K of the 210K gap. How they are composed, as the task level plans them (planning/zero.py): the update
is one shard's rows parts (the ZeRO 3 cut); ZeRO 1 reduce-scatters every stage's buckets once every stage's last
item has ended (the accumulation boundary), ZeRO 2 each micro-batch's as its backward pass completes them; a
weight gradient for another stage is sent every micro-batch; every stage's update waits for every stage's
reductions; each bucket of updated parameters is all-gathered once its share of the update has run. zero=1 and 2
with d=1 are zero=0 at both levels (tests/test_hier_zero12.py).

ZeRO 3 on h8-zero3 (2026-11-26; `--models gpt2 --layers 2 --p 1 2 --d 2 4 --t 1 2 --m 1 4 --zero 3`, 26 rows, 133
CPU s; a100_x8's 8 chips hold d=4 p=2 at t=1 only): 22 rows within 3%, 0.971 to 1.021; one stage 1.002 to 1.021
(d=4 M=4); p=2 t=2 0.998 to 1.020; p=2 t=1 0.971 to 0.988 but for four rows where the stage level is the faster:
d=2 M=4 ZB-H1 0.967, d=4 M=4 ZB-H1 0.969, d=4 M=1 GPipe and 1F1B 0.962 (largest gap 3.8%). Compared per stage
(d=2 p=2 M=4 1F1B), the task level's LM head waits 281K cycles for the vocabulary matrix's backward all-gather
(77 MB) with its chip all but idle: its list scheduler places a task whole, in priority order, so the
438K-cycle matmul of the LM head's part of the tied gradient (sent to stage 0 every micro-batch under ZeRO) runs
after the input gradient's chain, not in the wait. The stage level lets the pass's work that needs neither the
gathered parameter nor anything computed from it run during a wait (zero3.pass_gathers' slack), as the task level
does with the other layers' weight gradients (without any slack: one stage d=4 M=4 1.069, p=2 t=2 M=1 1.057;
with only what fits whole in the wait: 1.047 and 1.053), but not a weight gradient sent to another stage (d=4
M=4 1F1B 0.960 -> 0.988, d=2 M=4 1F1B 0.973 -> 0.979, ZB-H1 0.962 -> 0.967, d=4 M=4 ZB-H1 0.952 -> 0.969).
Under ZB-H1 the task level's B item cannot fill a wait with W work either (with none of the W item's work as
slack: d=2 M=4 ZB-H1 0.977 but p=2 t=2 M=1 ZB-H1 1.035). At M=1 the task level sends the gathered matrix from
stage 0 to the LM head (508K cycles) only after stage 1's own gathers on its links (from 1,387,258 at d=2, not
at stage 0's forward end, 875,099, as it does at M=4), which a transfer at stage level passes. Either is the
task-level list scheduler's order, which one stage-level rule does not reproduce in every row.
How ZeRO 3 is composed, as the task level plans it (planning/zero.py): per chunk and pass the parameters it
reads are all-gathered over the replicas' links, each issued as far ahead of its first reader as the task level
issues it (zero.PREFETCH: one task ahead of the reader's inputs; a reader of the micro-batch's own input
prefetches from the item before), the pass waiting where a reader would start before its gather ends; a
parameter another chunk gathered first in the pass (the tied matrix) comes from that chunk's item by transfer;
every micro-batch's gradients are reduce-scattered and the weight gradient sent to another stage crosses every
micro-batch (no step sums under ZeRO); the update, one shard's rows parts, waits for every reduction; no
all-gather follows it. zero=3 with d=1 is zero=0 at both levels (gpt2-2 d=1 p=2 M=4 1F1B: task 22,167,703,
stage 22,171,228 cycles either way).

Measured on h6-dptail (2026-11-26), with StepOptions.gradient_reduction (after-backward: each stage's gradients
all-reduced after its backward pass, then its whole update, as Megatron-LM of 2021; overlap: the default):
- transformer_block, p 2 and 4, d 1 and 2, t 1 and 2, M 1 and 4, every schedule (`--models transformer_block --p
  2 4 --d 1 2 --t 1 2 --m 1 4 --gradient-reduction overlap after-backward`, 60 rows, 141 s CPU): overlap (42 rows)
  p=2 0.994-1.003, p=4 0.999-1.020 (t=1 M=4 ZB-H1); after-backward (the 18 rows with d=2, 42 s CPU) 0.990 (p=2 M=4
  1F1B) to 1.013 (p=4 M=4 ZB-H1). Largest gap 2.0%.
- resnet50, p 2 and 4, M=4, 1F1B (`--models resnet50 --p 2 4 --d 1 2 --t 1 --m 4 --schedules 1f1b
  --gradient-reduction overlap after-backward`, 39 s CPU): d=1 1.000 and 0.999; d=2 overlap 1.000 and 1.000,
  after-backward 1.000 and 0.993.
- gpt2-2, d=2, p=2, M 1 and 4, every schedule, after-backward (`--models gpt2 --layers 2 --p 2 --d 2 --t 1 --m 1 4
  --gradient-reduction after-backward`): 0.989 (M=1 ZB-H1) to 1.020 (M=4 GPipe and 1F1B). Its overlap rows at
  M=1 were outside 3% there: 1.036 (1F1B) and 1.033 (ZB-H1) (M=4: 1.023, ZB-H1 1.010); mended on h6-agree (below).

Mended on h6-agree (gpt2-2 on a100_x8, overlap: `--models gpt2 --layers 2 --p 2 4 --d 2 --t 1 2 --m 1 4 8`, 24
rows, 111 CPU s): a stage's whole update waited for its last gradient bucket. gpt2-2 d=2 p=2 M=1 1F1B: stage 0's
last item ended at 4,677,322, its last bucket, held on its links behind the tied embedding's gradient sent from
stage 1 (4,442,137-4,897,067), was reduced at 5,030,179, and only then did its 4,652,484-cycle update start; at
task level stage 0's backward ends at 4,689,827 and its update ends 4,654,606 cycles later, its last all-reduces
(the tied matrix's, 4,675,727-5,185,449) under the update of parameters reduced before them. compose.py now runs
each bucket's share of the update (by bytes) once that bucket is reduced; only the part updating parameters
other stages send gradients for waits for every bucket and the sends. p=2: t=1 M=1 0.998 (every schedule; was
1.036 1F1B, 1.033 ZB-H1), M=4 1.000 (ZB-H1 1.005), M=8 0.996 (ZB-H1 1.001); t=2 0.979 (M=8 1F1B) to 1.000. p=4
t=1: 1.012 (M=1), 1.006 (M=4), 1.004 (M=8) but ZB-H1 M=4 0.962 (the same before) and M=8 0.978. Left: that
row's cause is the tied gradient's all-reduce. The task level all-reduces the matrix's summed gradient (stage
0's part plus the LM head's part from the last stage, 77 MB, 510K cycles) once the sent part arrived, then
updates it; the stage level reduces those bytes in stage 0's buckets during its backward pass (its d=2 makespan,
12,895,009, is its d=1 one). Reducing them after the send arrives gives 0.997 there but 1.032 at p=2 M=1 GPipe
and 1F1B, because the stage level sends that gradient after the last stage's whole backward item (arriving at
4,897,067) where the task level sends it once the LM head has computed it: both need mending together
(mended on h7-agree, below).
Unmoved: transformer_block and resnet50 d=2 p 2 and 4 M=4 1F1B and ZB-H1 (`--models transformer_block resnet50
--p 2 4 --d 2 --t 1 --m 4 --schedules 1f1b zb-h1`, 32 CPU s): 0.996 to 1.020, resnet50 1.000, as before. At scale
(bench_scale_compile.py) the update now starts under the last buckets: GPT-3 175B 35,057,524,830 -> 35,044,938,730
cycles (-0.04%), the 1T model 114,947,863,715 -> 114,931,427,380 (-0.01%).

Mended on h7-agree: the tied gradient's send and all-reduce. Compared per stage, the task level sends the LM
head's part of the tied matrix's gradient once computed (p=2 M=1: 3,984,023-4,492,335, inside stage 1's
backward pass, which ends 4,442,137; p=4 M=4 ZB-H1: from 10,424,203, in stage 3's last W item), adds it to
stage 0's part (183,392 cycles at M > 1), all-reduces the sum (77 MB, 509,722 cycles; p=4 M=4 ZB-H1:
11,115,907-11,625,629, under either gradient reduction) and then updates the matrix (to 13,401,713). The stage
level sent it at the end of the item completing it and reduced its bytes with stage 0's other gradients. Now
the composition sends it that far into its item (ChunkWork.update_send_after and update_send_after_split,
templates.update_send_lags: the item's busy cycles before it is computed, plus the add into its step sum), and
with replicas its bytes leave stage 0's buckets (after-backward: its chunk's whole gradients) and are
all-reduced in one collective after the add (sent_sums.py; StageWork.sent_sum_cycles, which cuts into the
update running when the part arrives, as the task level's add is backward work); the matrix's update waits for
it. Overlap (`--models gpt2 --layers 2 --p 2 4 --d 2 --t 1 2 --m 1 4 8`, 27 rows, 99 CPU s), every row within
3%, largest gap 2.1% (p=4 t=1 M=1 1.012, as before): p=4 t=1 M=4 ZB-H1 0.962 -> 0.997 (the sum reduced
11,115,423-11,581,003), M=8 ZB-H1 0.978 -> 0.996; p=2 t=1 M=1 0.998 -> 1.009 (every schedule: stage 0's own
15.7 MB are now one DDP bucket, complete at its pass's end and reduced 4,677,322-4,772,666 before its update,
where the task level reduces each tensor as computed), M=4 ZB-H1 1.005 -> 1.010, M=8 ZB-H1 1.001 -> 1.004; the
other 20 rows unchanged. After-backward (`... --m 1 4 8 --gradient-reduction after-backward`, 18 rows, 58 CPU
s), largest gap 1.1%: p=4 M=4 ZB-H1 0.963 -> 0.997; p=2 M=1 1.011 -> 0.989, M=4 GPipe and 1F1B 1.020 -> 0.998,
ZB-H1 1.007 -> 1.000. d=1 (`--p 2 4 --d 1 --t 1 --m 1 4 8`, 18 rows): only p=4 ZB-H1 moved, the send leaving
before the last W item ends (M=4 12,895,009 -> 12,891,507 cycles, 1.000; M=8 1.000 -> 0.999).
transformer_block and resnet50 d=2 p 2 and 4 M=4 1F1B and ZB-H1 (`--models transformer_block resnet50 --p 2 4
--d 2 --t 1 --m 4 --schedules 1f1b zb-h1`, 32 CPU s): 0.996 to 1.019 (transformer_block p=4 ZB-H1, was
1.020: chunk 1 sends chunk 0 a 256 KiB part of a gradient, now 141,000 cycles into its 229,125-cycle backward
pass, and with replicas its sum is reduced after it), resnet50 1.000, as before. Also mended: with t ranks,
ChunkWork.update_sends counted every rank's bytes (t times one rank's), which compose sent per rank,
subtracted from the per-rank backward_bytes (the input gradient went with no bytes) and reduced as the sum;
now per rank (backward_sends.py). gpt2-2 t=2 (`--p 2 4
--d 1 2 --t 2 --m 1 4 8`, 27 rows, 87 CPU s), largest gap 2.7% (p=4 d=1 M=4 1F1B 1.027, was 1.026): most
stage-level rows +10,651 cycles (the input gradient's transfer), d=2 p=2 M=1 0.998 -> 1.007 (stage 0's own
8.7 MB, one bucket reduced after its pass, as at t=1); transformer_block t=2 (`--models transformer_block --p 2
4 --d 1 2 --t 2 --m 1 4`, 18 rows), largest gap 0.6%: only p=4 M=4 moved, by +1,155 cycles. At scale
(bench_scale_compile.py), the tied matrix's gradient crosses once per step per rank (154 MB on 175B, not 8
ranks' 1.24 GB) and its sum is reduced over the 8 replicas after stage 0's own buckets (175B: 16.6M cycles,
ending 35,015,237,642): GPT-3 175B 35,044,938,730 -> 35,015,847,154 cycles (-0.08%), the 1T model
114,931,427,380 -> 114,829,934,625 (-0.09%).
The whole gpt2-2 grid after merging h7-agree (`--models gpt2 --layers 2 --p 2 4 --d 1 2 --t 1 2 4 --m 1 4 16`,
72 rows: a100_x8's 8 chips hold t=4 only at d=1 p=2; 247 CPU s): every row within 3%,
0.984 (d=2 p=2 t=2 M=16 1F1B) to 1.027 (d=1 p=4 t=2 M=4 1F1B).

Re-measured on a100_x8 (Adam) on h3-agree2, whose kernels now pay the GPU's launch overhead (most of
transformer_block's nodes cost 14,100 cycles each, so the figures below replace the earlier ones, taken before):
the default table (transformer_block and gpt2-2, 150 rows) is within 3% but for two rows where the task level
is the slow one (below). CPU seconds: transformer_block's 75 rows 151 s, gpt2-2's 75 rows 216 s (`/usr/bin/time
-v python experiments/stage_vs_task.py --models transformer_block`, then `--models gpt2 --layers 2`).
- transformer_block: one stage 1.000; p=2 (d, t in 1, 2; M 1, 4, 8; every schedule) 0.986 to 0.998; p=4 0.976
  (t=2 M=1 ZB-H1) to 1.011 (d=2 M=4 GPipe). Before handoffs.py (below) p=4 was 1.037 to 1.113 (t=1 M=1 1.107).
- gpt2-2: one stage 1.000 to 1.001; p=2 0.974 (t=2 M=8) to 1.023 (d=2 M=1); p=4 t=1 0.986 to 1.010; p=4 t=2
  0.977 to 1.006 but ZB-H1 M=1 0.969 and M=4 0.940 (the task level's; mended on h5-zbh1, below). p=2 t=4 (`--models gpt2
  --layers 2 --p 2 --d 1 --t 4 --m 1 4`): 0.970 (M=4 GPipe) to 1.000 (M=4 ZB-H1).
- resnet50 p=2 and p=4, M=4, 1F1B: 1.000 and 0.999; gpt2 small (12 layers) p=2 and p=4, M=4, 1F1B: 0.999 and
  0.999 (`--models resnet50 gpt2 --layers 12 --p 2 4 --d 1 --t 1 --m 4 --schedules 1f1b`, 22 CPU s).

Mended here (the stage level's modelling errors, commits on h2-agree):
- A backward pass sent its input gradient when the whole pass (weight gradients included) ended; the task
  level sends it once computed. backward_sends.py measured how much of the pass precedes it in the template's
  task schedule (handoffs.py does now), and compose hands it on then (transformer_block p=2 M=1: 1.095 ->
  1.015; M=4 1F1B 1.105 -> 1.025).
- gpt2's tied embedding: the LM head on the last stage computes the vocabulary matrix's gradient (77 of the
  79 MB sent back per micro-batch) for stage 0, which holds the matrix. The composition made stage 0's
  backward pass wait for it; only stage 0's update reads it (ChunkWork.update_sends). gpt2-2 p=2 M=4: 1F1B
  1.144 -> 1.004, GPipe 1.078 -> 1.003.
- (h3-bubble) A pipeline send queued behind every gradient bucket on its links; it now passes them (links.py),
  and a tied weight's gradient goes once per step, summed (compose.py; the task level still sends it per
  micro-batch, over NVLink on a100_x8 in a fraction of a micro-batch's work). gpt2-2 p=2 d=2 M=1 GPipe and
  1F1B 1.037 -> 1.029, M=4 1.006 -> 1.003; d=1 rows unchanged (`--models gpt2 --layers 2 --p 2 --d 1 2 --t 1
  --m 1 4`, 33 CPU s).
- (h3-agree2) A chunk's pass let its neighbour's start only at its end (forward) or once its last input
  gradient was computed (backward); at task level the neighbour starts on the first tensor it reads (a block cut
  into four chunks sends the residual before the attention it computes: chunk 1 starts 16,127 cycles into chunk
  0's 70,500). handoffs.py measures how far into a pass the neighbour may start and still find each tensor it
  reads computed when it reaches it (ChunkWork.output_after, input_grad_after). transformer_block p=4 M=1: the
  forward chain ended 445,645 cycles in against the task level's 344,481; ratio 1.107 -> 0.995; M=4 1F1B 1.080
  -> 1.005; t=2 M=8 1.038 -> 0.994.
The task level was the one that was wrong (mended in schedules.py, compile.py follows):
- ZB-H1 ran with a window of p micro-batches, under which micro-batch k + p starts after every task of k,
  including the W pass the last chip defers past k + p - 1's B: task-level ZB-H1 was slower than its own 1F1B
  (transformer_block p=2 M=8: 179,622 against 152,432 cycles); with a window of M, 153,101 (ratio 0.888 -> 1.041).
- GPipe under a window halved for memory ordered all M forwards first, which the window contradicts
  (resnet50 on groq_like, microbatch_sweep.py); it now runs in rounds of the window.

Mended on h5-zbh1 (gpt2-2 on a100_x8: `--models gpt2 --layers 2 --p 2 4 --d 1 --t 1 2 --m 1 4 8`, 36 rows, 116
CPU s, every row within 3%, largest gap 2.7%; transformer_block p=2 and 4, d=1, t=1 and 2, M=1 and 4, every
schedule: 0.991 to 1.019):
- ZB-H1 with ranks on four stages (gpt2-2 p=4 t=2 was M=1 0.969, M=4 0.940): six reshapes of stashed
  activations that feed only weight gradients (84,600 cycles on stage 1) belonged to the W item, which the
  item gates (compiler/timing/pipeline_order.ItemGates) held until B started; they ran after B. A W task that
  reads no backward task now passes B's gate with W's priority, as under 1F1B (M=1 0.982). The last stage's
  loss seed (7 kernels, 98,700 cycles per micro-batch, reading no micro-batch data) ran between each forward
  and backward pass: the stage level counts it as filler, run while the chip idles, and the task level now
  lets such tasks wait for no item. Now M=1 0.999, M=4 0.981, M=8 1.004.
- The tied embedding's gradient: the task level sent the LM head's part to stage 0 once per micro-batch; it
  now sums it on the last stage and sends it once per step (planning/step_sums.py), as compose.py and
  Megatron-LM do, and the stage level charges that accumulation to the last stage (templates.accumulate_cycles).
- gpt2 12 layers with remat every:1 on a100_x64 (bench_scale_compile.py --only compare) was 0.928: the stage
  partition put rematerialization's glue (slice, reshape, pow 0 of a bias gradient, tying a recomputation to
  it) on the next stage, so the gradient went there and back, and at task level the recomputation waited for
  that stage's stream, busy with later micro-batches (2.7M cycles per boundary; the M=1 templates saw it idle).
  planning/glue.py keeps it home: 0.999.
Mended on h5-zbfix (gpt2-2 on a100_x8: `--models gpt2 --layers 2 --p 2 4 --d 1 --t 1 2 --m 1 4 8`, 36 rows, 108
CPU s, every row within 3%, largest gap 2.6% (p=4 t=2 M=4 1F1B 1.026); ZB-H1 rows 0.997 to 1.005): gpt2-2 p=4 t=1
M=4 ZB-H1 was 0.973. The LM head's part of the tied gradient is summed on the last stage and sent once per step;
the task level made it (a 438,430-cycle matmul per micro-batch) and its accumulations (3 x 183,392) B work, as
their sum crossed to stage 0, and the stage level made the matmul B and the accumulation W. ZB-H1's W computes
weight gradients: both levels now count the part and its accumulation as W (pipeline_order.input_gradient_tasks:
a per-step reader is no micro-batch's input gradient; templates.weight_grad_nodes), the composition sends it
after the last stage's last W item, not its last B item, and of stage 0's update only the tied matrix's (with the
once-per-step add of the gradient's parts) waits for it (StageWork.sent_update_cycles), as the task level
updates every other parameter once its gradient is final. Now task 12,891,991, stage 12,895,009 cycles (1.000);
p=2 M=8 ZB-H1 1.001 (1.046 with the send after W but the whole update waiting).
Earlier analyses of classes now within 3% (measured before the launch overheads; kept as the reasons the two
levels can differ): with replicas, compose all-reduces a stage's gradients in 25 MiB DDP buckets, the task level
every gradient tensor as computed (transformer_block d=2 M=1 was 1.088, now 0.996 to 1.000); with ranks and
several micro-batches the stage level runs a chip's items one at a time (transformer_block t=2 p=1 M=8 was
1.107, now 1.000); the task level updates a parameter as soon as its gradient is final, the composition a stage
after its last item (transformer_block p=4 M=1 was 1.137; now the task level's stages 0 and 1 end their
updates 676,800 cycles, their whole update, after their backward passes, and the gap was handoffs.py's);
ZB-H1 on transformer_block (1.04 to 1.16, now 0.976 to 1.008); gpt2-2 p=2 t=4 M=4 1F1B (1.056, now 0.972);
GPipe at task level with ranks on four stages (transformer_block t=2 p=4 M=8 was 0.787, now 0.997).
Interleaved 1F1B needs virtual stages, which only stage granularity compiles (compile.py refuses
pipeline_schedule='interleaved' at task level): it has no task-level row.
"""
from __future__ import annotations

import argparse
import itertools
import time
from dataclasses import dataclass

import accelsim as A
from accelsim.schedule.options import GRADIENT_REDUCTIONS

AGREEMENT = 0.03
SCHEDULES = ("gpipe", "1f1b", "zb-h1")
"""The pipeline schedules both granularities follow. Interleaved 1F1B needs virtual stages, which only stage
granularity compiles (compile.py refuses pipeline_schedule='interleaved' at task level): it has no task-level
row to agree with."""
MODELS = {"transformer_block": (1,), "gpt2": (1, 2, 4, 12), "resnet50": (1,)}
"""Model -> its layer counts (gpt2's blocks; 12 is GPT-2 small)."""


@dataclass(frozen=True)
class Config:
    """One step: model (gpt2 with `layers` blocks, a one-block transformer_block, or resnet50 at batch 1),
    replicas d, stages p, tensor-parallel ranks t, micro-batches M and the pipeline schedule."""

    model: str
    layers: int
    d: int
    p: int
    t: int
    m: int
    schedule: str
    reduction: str = "overlap"
    """StepOptions.gradient_reduction: data-parallel gradients in buckets beside the backward pass, or after it."""
    zero: int = 0
    """StepOptions.zero: 0 to 3 (ZeRO 3: parameters all-gathered before each pass, hierarchy/zero3.py)."""

    @property
    def name(self) -> str:
        return self.model + (f"-{self.layers}" if self.model == "gpt2" else "")

    def graph(self) -> A.Graph:
        opts = {"layers": self.layers} if self.model == "gpt2" else {}
        if self.t > 1:
            opts["tensor_parallel"] = self.t
        return A.training_graph(A.models.build(self.model, **opts), optimizer="adam")


def compare(config: Config, hw: A.HwSpec) -> dict:
    """Both makespans (cycles), the relative gap (stage / task - 1) and the CPU seconds of each. The task level
    follows the same pipeline schedule (its in-flight window is the schedule's: GPipe M, 1F1B and ZB-H1 p)."""
    graph = config.graph()
    step = dict(microbatches=config.m, data_parallel=config.d, pipeline_stages=config.p,
                pipeline_schedule=config.schedule, gradient_reduction=config.reduction, zero=config.zero)
    t0 = time.process_time()
    stage = A.compile(graph, hw, granularity="stage", **step)
    t1 = time.process_time()
    task = A.compile(graph, hw, granularity="task", validate=False, **step)
    t2 = time.process_time()
    gap = stage.makespan_cycles / task.makespan_cycles - 1
    return {"stage": stage.makespan_cycles, "task": task.makespan_cycles, "gap": gap,
            "bubble": stage.bubble_fraction, "ok": abs(gap) <= AGREEMENT, "stage_s": t1 - t0, "task_s": t2 - t1}


def configs(models: list[str], layers: list[int] | None, ps: list[int], ds: list[int], ts: list[int], ms: list[int],
            schedules: list[str], chips: int, reductions: tuple[str, ...] = ("overlap",),
            zero: int = 0) -> list[Config]:
    """Every combination that fits the chips (d * p * t of them); one stage runs every schedule alike, so
    p = 1 gets 1F1B only; resnet50 has no tensor-parallel ranks; with one replica there is nothing to reduce,
    so d = 1 gets the first gradient reduction only."""
    out = []
    for model in models:
        counts = (layers or MODELS[model]) if model == "gpt2" else MODELS[model]
        for n, p, d, t, m, schedule, reduction in itertools.product(counts, ps, ds, ts, ms, schedules, reductions):
            if d * p * t <= chips and (p > 1 or schedule == "1f1b") and (t == 1 or model != "resnet50") and (
                    d > 1 or reduction == reductions[0]):
                out.append(Config(model, n, d, p, t, m, schedule, reduction, zero))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=["transformer_block", "gpt2"], choices=sorted(MODELS))
    ap.add_argument("--layers", nargs="+", type=int, help="gpt2's layer counts (default 2 and 4)")
    ap.add_argument("--p", nargs="+", type=int, default=[1, 2, 4])
    ap.add_argument("--d", nargs="+", type=int, default=[1, 2])
    ap.add_argument("--t", nargs="+", type=int, default=[1, 2])
    ap.add_argument("--m", nargs="+", type=int, default=[1, 4, 8])
    ap.add_argument("--schedules", nargs="+", default=list(SCHEDULES), choices=SCHEDULES)
    ap.add_argument("--hw", default="a100_x8")
    ap.add_argument("--gradient-reduction", nargs="+", default=["overlap"], choices=GRADIENT_REDUCTIONS,
                    help="StepOptions.gradient_reduction values to run (default overlap)")
    ap.add_argument("--zero", type=int, default=0, choices=(0, 1, 2, 3),
                    help="StepOptions.zero for every row (ZeRO 1 to 3: only 'overlap' reduces them)")
    args = ap.parse_args()
    hw = A.load_hw(args.hw)
    layers = args.layers or ([2, 4] if "gpt2" in args.models else None)
    print(f"{'model':<18} {'d':>2} {'p':>2} {'t':>2} {'M':>2} {'schedule':<8} {'reduction':<14} {'task':>12} {'stage':>12} "
          f"{'ratio':>6} {'bubble':>6}  ok   CPU s (task/stage)")
    worst = 0.0
    for c in configs(args.models, layers, args.p, args.d, args.t, args.m, args.schedules, hw.n_chips,
                     tuple(args.gradient_reduction), args.zero):
        r = compare(c, hw)
        worst = max(worst, abs(r["gap"]))
        print(f"{c.name:<18} {c.d:>2} {c.p:>2} {c.t:>2} {c.m:>2} {c.schedule:<8} {c.reduction:<14} {r['task']:>12,} "
              f"{r['stage']:>12,} "
              f"{1 + r['gap']:>6.3f} {r['bubble']:>6.2f}  {'ok' if r['ok'] else '--':<4} "
              f"{r['task_s']:.1f}/{r['stage_s']:.1f}", flush=True)
    print(f"largest gap {worst:.1%} (agreement: {AGREEMENT:.0%})")


if __name__ == "__main__":
    main()
