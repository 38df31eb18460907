"""The pipeline bubble of an interleaved stage-level step with communication stays at the paper's
(p - 1) / (v M + p - 1) (Narayanan et al., SC21, sec. 2.2.2): a tied weight's gradient is sent once per step,
not per micro-batch, and pipeline sends pass the gradient buckets queued on their links (compose.py,
links.py). Before, each of these alone tripled the bubble of GPT-3-like stages (issue 27: Megatron's 1T model
on 3,072 A100s measured 44.5% against ~6%). And the CLI reports exposed communication as a share of the step.
"""
from __future__ import annotations

import dataclasses

import pytest
from rich.console import Console

from accelsim import fmt
from accelsim.cli.stage_step import print_stage_step
from accelsim.compiler.hierarchy.compose import compose
from accelsim.compiler.hierarchy.step import StageStep
from accelsim.compiler.hierarchy.work import ChunkWork, StageWork, StepWork
from accelsim.hw.load import load_hw
from accelsim.schedule.options import StepOptions

P, V, M, T = 8, 2, 32, 4
FORMULA = (P - 1) / (V * M + P - 1)
TOLERANCE = 0.02
"""Absolute, on a formula of 9.9%: the formula takes a backward pass's input gradient to leave at its end
(here it leaves before the weight-gradient third: 2.3 points less bubble without communication) and ignores
communication, which the simulation exposes where nothing can hide it (the first micro-batch's forward
transfers, the last chunk's gradient buckets after the last backward pass: up to 3 points here)."""


@pytest.fixture(scope="module")
def hw():
    return load_hw("a100_x64")


def gpt3_like(d: int, gradient_bytes: int, tied_bytes: int) -> StepWork:
    """P stages of V equal chunks on T ranks each, in GPT-3's proportions per chunk (forward 10M cycles,
    backward 30M of which 10M weight gradients, 50 MiB of activations per rank), each stage's gradients
    (`gradient_bytes` per rank) all-reduced over d replicas, and the last chunk sending `tied_bytes` of a tied
    weight's gradient to the first chunk per micro-batch (gpt2's LM head to its embedding)."""
    stages = tuple(StageWork(s, tuple(range(s * T, (s + 1) * T)), 5_000_000, gradient_bytes, 0, 0) for s in range(P))
    chunks = [ChunkWork(c, 10_000_000, 30_000_000, 10_000_000, 0, 50 * 2**20, 0) for c in range(P * V)]
    chunks[-1] = dataclasses.replace(chunks[-1], update_sends=((0, tied_bytes),))
    return StepWork(stages, tuple(chunks), M, d, T, V)


def test_a_tied_weights_gradient_goes_once_per_step_and_the_bubble_stays_the_papers(hw):
    # 1.2 GiB per rank over a 25 GB/s NIC is ~72M cycles, nearly the last chip's 80M of work per micro-batch:
    # sent per micro-batch it held the chip's input gradients back (bubble 31.7%)
    comp = compose(gpt3_like(1, 0, 1200 * 2**20), "interleaved", hw)
    last_chunk_sends = [s for s in comp.spans if s.kind == "transfer" and s.stage == P - 1 and s.chunk == P * V - 1]
    assert len(last_chunk_sends) == M + 1  # an input gradient per micro-batch, the tied gradient once
    assert comp.bubble_fraction == pytest.approx(FORMULA, abs=TOLERANCE)


def test_pipeline_sends_pass_gradient_buckets_and_the_bubble_stays_the_papers(hw):
    # 3 GiB of gradients per rank in 25 MiB buckets, all-reduced over 2 replicas as each chunk's last backward
    # pass produces them: the cool-down's input gradients queued behind them (bubble 17.0%)
    comp = compose(gpt3_like(2, 3 * 2**30, 0), "interleaved", hw)
    assert any(s.kind == "allreduce" for s in comp.spans)
    assert comp.bubble_fraction == pytest.approx(FORMULA, abs=TOLERANCE)


def test_the_cli_reports_exposed_communication_as_a_share_of_the_step(hw):
    # the exposed cycles lie on the step's critical path: divided by p stages as well, 40.7% of the 1T step
    # once read as 0.6%
    work = gpt3_like(2, 3 * 2**30, 0)
    comp = compose(work, "interleaved", hw)
    options = StepOptions(microbatches=M, data_parallel=2, pipeline_stages=P, tensor_parallel=T, virtual_stages=V,
                          pipeline_schedule="interleaved", granularity="stage")
    step = StageStep("gpt3_like", hw.name, hw.clock_hz, options, True, 2 * M, work, comp)
    console = Console(record=True, width=400)
    print_stage_step(console, step, 0.0)
    text = console.export_text()
    transfer = comp.exposed_cycles["transfer"]
    assert transfer > 0
    assert f"transfer {fmt.cycles(transfer)} ({fmt.percent(transfer / comp.makespan_cycles)} of the step)" in text
