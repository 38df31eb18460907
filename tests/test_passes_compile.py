"""Optimized graphs compile on a shipped machine and their schedules compute the right numbers with
the numba kernels (one small model per pass)."""
import pytest

import accelsim as A
from accelsim.models.sizes import SMALL
from accelsim.passes import freeze_batchnorm, inference_graph

CASES = [
    ("cse", "transformer_block", "train"),
    ("constant_fold", "superres", "train"),
    ("simplify", "gpt2", "train"),
    ("fold_batchnorm", "resnet_block", "inf"),
    ("merge_qkv", "transformer_block", "train"),
    ("merge_parallel_convs", "resnet50", "inf"),
    ("fuse_epilogue", "mlp", "train"),
    ("fuse_epilogue", "gpt2", "inf"),
    ("fuse_elementwise", "superres", "train"),
    ("fuse_elementwise", "transformer_block", "inf"),
]


@pytest.fixture(scope="module")
def hw() -> A.HwSpec:
    return A.load_hw("groq_like")


@pytest.mark.parametrize("name,model,kind", CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_optimized_graph_compiles_and_checks_on_groq_like(hw, name, model, kind):
    fwd = A.models.build(model, **SMALL[model])
    g = A.training_graph(fwd) if kind == "train" else freeze_batchnorm(inference_graph(fwd))
    opt = A.optimize(g, [name], hw=hw)
    assert len(opt) != len(g) or opt.dump() != g.dump()
    sched = A.compile(opt, hw)
    report = A.check(sched, backend="numba", graph=opt, hw=hw)
    assert report.passed


def test_schedule_of_an_optimized_graph_rebuilds_its_graph_to_check(hw):
    opt = A.optimize(A.training_graph(A.models.build("transformer_block", **SMALL["transformer_block"])),
                     ["merge_qkv"])
    assert A.check(A.compile(opt, hw)).passed  # the graph rebuilt from the schedule's source and passes


def test_cli_check_runs_the_passes_it_is_given_and_refuses_unknown_ones(capsys):
    from accelsim.cli import main

    model = ["--model", "mlp", "--batch", "4", "--set", "sizes=16,8,4"]
    assert main(["check", *model, "--passes", "cse,simplify"]) == 0
    out = capsys.readouterr().out
    assert "optimize: cse:" in out and "optimize: simplify:" in out and "check passed" in out
    assert main(["check", *model, "--passes", "cse,fold_bn"]) != 0
    assert "unknown pass 'fold_bn'" in capsys.readouterr().err
