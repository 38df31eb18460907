"""CLI: output, JSON keys, and one-paragraph errors with exit 1 (no tracebacks)."""
import json

import pytest

from accelsim.cli import main


def test_models_lists_the_zoo(capsys):
    assert main(["models"]) == 0
    out = capsys.readouterr().out
    assert "gpt2" in out and "superres" in out


def test_graph_training_reports_phases_and_writes_json(tmp_path, capsys):
    path = tmp_path / "g.json"
    assert main(["graph", "--model", "mlp", "--training", "--batch", "8", "--json", str(path)]) == 0
    assert "by phase:    forward" in capsys.readouterr().out
    data = json.loads(path.read_text())
    assert set(data["by_phase"]) == {"forward", "backward", "update"}
    assert data["flops"] > 0 and data["param_count"] == 784 * 100 + 100 + 100 * 10 + 10


def test_graph_dump_prints_every_node(capsys):
    assert main(["graph", "--model", "seed_autodiff", "--dump"]) == 0
    assert "= sin(%1)" in capsys.readouterr().out


def test_grad_json_has_the_seed_numbers(tmp_path):
    path = tmp_path / "grad.json"
    assert main(["grad", "--model", "seed_autodiff", "--json", str(path)]) == 0
    data = json.loads(path.read_text())
    assert set(data) == {"model", "outputs", "grads", "fd_max_rel_err", "torch_max_rel_err"}
    assert data["grads"]["x1"] == pytest.approx(5.5) and data["grads"]["x2"] == pytest.approx(1.716, abs=1e-3)
    assert data["fd_max_rel_err"] < 1e-6


def test_grad_summarizes_large_tensors_by_shape_and_norm(tmp_path):
    path = tmp_path / "grad.json"
    assert main(["grad", "--model", "mlp", "--set", "sizes=[20, 5, 3]", "--batch", "2", "--no-torch",
                 "--json", str(path)]) == 0
    data = json.loads(path.read_text())
    assert data["grads"]["fc1.w"]["shape"] == [20, 5] and data["grads"]["fc1.w"]["l2_norm"] > 0
    assert len(data["grads"]["fc2.b"]) == 3


@pytest.mark.parametrize("argv, match", [
    (["graph", "--model", "nope"], "unknown model 'nope'"),
    (["graph", "--model", "mlp", "--batch", "0"], "batch=0"),
    (["graph", "--model", "mlp", "--set", "colour=red"], "no option 'colour'"),
    (["graph", "--model", "mlp", "--set", "sizes"], "KEY=VALUE"),
    (["graph", "--model", "transformer_block", "--set", "d_model=10", "--set", "heads=3"], "divisible"),
    (["grad", "--model", "mlp", "--json", "/proc/no/such/dir/x.json", "--batch", "1",
      "--set", "sizes=[3, 2]", "--no-torch"], "cannot write JSON"),
])
def test_user_errors_exit_1_with_one_paragraph(argv, match, capsys):
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert match in err and "Traceback" not in err and err.count("\n") == 1


def test_hw_show_prints_units_memories_and_ridge_points(capsys):
    assert main(["hw", "show", "tpu_v1_like"]) == 0
    out = capsys.readouterr().out
    assert "256x256 systolic, ws" in out and "unified_buffer" in out and "ridge point" in out


def test_cost_of_one_gemm_as_json(tmp_path):
    path = tmp_path / "gemm.json"
    assert main(["cost", "--hw", "tpu_v1_like", "--gemm", "512,256,384", "--unit", "mxu", "--json", str(path)]) == 0
    data = json.loads(path.read_text())
    for key in ("compute_cycles", "memory_cycles", "cycles", "utilization", "bound"):
        assert key in data
    assert data["cycles"] == data["latency_cycles"] + max(data["compute_cycles"], data["memory_cycles"])


def test_cost_of_a_model_lists_every_node(tmp_path, capsys):
    path = tmp_path / "cost.json"
    assert main(["cost", "--hw", "bespoke_superres", "--model", "superres", "--training", "--json", str(path)]) == 0
    data = json.loads(path.read_text())
    assert {n["unit"] for n in data["nodes"] if n["op"] == "conv2d"} == {"conv5x5", "conv2_3x3", "conv3_3x3", "conv4_3x3"}
    assert data["total_cycles"] == sum(n["cycles"] for n in data["nodes"])


def test_roofline_writes_a_png(tmp_path):
    path = tmp_path / "roof.png"
    assert main(["roofline", "--hw", "groq_like", "--model", "mlp", "-o", str(path)]) == 0
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 20_000


@pytest.mark.parametrize("argv, match", [
    (["cost", "--hw", "groq_like", "--gemm", "1,2"], "--gemm expects 3"),
    (["cost", "--hw", "groq_like", "--gemm", "4,4,4", "--unit", "vxm"], "cannot run matmul"),
    (["cost", "--hw", "bespoke_superres", "--model", "mlp"], "no unit of bespoke_superres"),
])
def test_cost_user_errors(argv, match, capsys):
    assert main(argv) == 1
    assert match in capsys.readouterr().err


def test_run_prints_the_summary_and_writes_the_json_keys(tmp_path, capsys):
    path = tmp_path / "run.json"
    assert main(["run", "--hw", "groq_like_x4", "--model", "mlp", "--batch", "8", "--microbatches", "2",
                 "--data-parallel", "2", "--json", str(path)]) == 0
    out = capsys.readouterr().out
    assert "makespan" in out and "all-reduce" in out
    data = json.loads(path.read_text())
    for key in ("makespan_cycles", "makespan_s", "throughput_samples_per_s", "latency_s", "utilization",
                "peak_memory_bytes", "bound_cycles", "bound_ratio"):
        assert key in data
    assert data["samples_per_step"] == 8 * 2 * 2
    assert data["makespan_cycles"] >= data["bound_cycles"]


def test_run_defaults_to_superres_training_on_groq_like(capsys):
    assert main(["run"]) == 0
    assert "training step of superres.train on groq_like" in capsys.readouterr().out


def test_compile_writes_a_schedule_that_loads(tmp_path):
    from accelsim.schedule.io import load_schedule
    path = tmp_path / "s.json"
    assert main(["compile", "--hw", "tpu_v1_like", "--model", "mlp", "--inference", "-o", str(path)]) == 0
    assert load_schedule(path).graph_name == "mlp.infer"


@pytest.mark.parametrize("argv, match", [
    (["run", "--microbatches", "0"], "microbatches must be >= 1"),
    (["run", "--pipeline-stages", "2"], "needs 2 chips"),
    (["run", "--hw", "bespoke_superres", "--model", "mlp"], "no unit of bespoke_superres"),
])
def test_run_user_errors(argv, match, capsys):
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert match in err and "Traceback" not in err
