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
    assert set(data) == {"model", "outputs", "grads", "fd_max_rel_err", "torch_max_rel_err", "nonfinite"}
    assert data["nonfinite"] == []
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
    (["cost", "--hw", "groq_like", "--gemm", ""], "--gemm expects 3"),
    (["cost", "--hw", "groq_like", "--model", "mlp", "--unit", "mxm"], "--unit mxm applies to one layer"),
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
    from accelsim.api import load_schedule
    path = tmp_path / "s.json"
    assert main(["compile", "--hw", "tpu_v1_like", "--model", "mlp", "--inference", "-o", str(path)]) == 0
    assert load_schedule(path).graph_name == "mlp.infer"


@pytest.mark.parametrize("argv, match", [
    (["run", "--pipeline-stages", "2"], "needs 2 chips"),
    (["run", "--hw", "bespoke_superres", "--model", "mlp"], "no unit of bespoke_superres"),
])
def test_run_user_errors(argv, match, capsys):
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert match in err and "Traceback" not in err


# ---- hostile arguments: exit 2 (argparse) or 1, one paragraph naming the input, never a traceback -------------

MLP = ["--model", "mlp", "--set", "batch=2", "--set", "sizes=16,8,4"]


def _run(argv, capsys):
    """(exit code, stderr) of main(argv), whether argparse exits or main returns."""
    try:
        code = main(argv)
    except SystemExit as e:
        code = e.code
    captured = capsys.readouterr()
    assert "Traceback" not in captured.out + captured.err
    return code, captured.err


@pytest.mark.parametrize("command, flag", [
    ("run", "--microbatches"), ("run", "--data-parallel"), ("run", "--pipeline-stages"), ("compile", "--batch"),
    ("check", "--microbatches"), ("graph", "--batch"), ("grad", "--fd-coords"), ("run", "--max-tasks"),
    ("check", "--max-bytes"), ("grad", "--max-bytes"), ("compile", "--max-tasks"),
])
@pytest.mark.parametrize("value", ["0", "-1", "2.5", "", "abc", "1e3"])
def test_count_options_must_be_positive_integers(command, flag, value, capsys):
    code, err = _run([command, flag, value], capsys)
    assert code == 2 and f"argument {flag}" in err and repr(value) in err and "positive integer" in err


@pytest.mark.parametrize("command", ["run", "check", "compile", "graph"])
@pytest.mark.parametrize("value", ["inf", "-inf", "nan", "1e400", "fast"])
def test_learning_rate_must_be_a_finite_number(command, value, capsys):
    code, err = _run([command, f"--lr={value}"], capsys)
    assert code == 2 and "argument --lr" in err and repr(value) in err


@pytest.mark.parametrize("item, match", [
    ("sizes=[1, 2", "--set 'sizes=[1, 2': the value is not a plain YAML"),
    ("batch=*nowhere", "undefined alias"),
    ("sizes={a: 1}", "is a mapping"),
    ("sizes=[[16, 8], [4]]", "is nested"),
    ("sizes=" + "[" * 5000 + "]" * 5000, "nested too deeply"),
    ("batch=.inf", "not finite"),
    ("1x=3", "'1x' is not an option name"),
    ("a b=3", "'a b' is not an option name"),
    ("=3", "KEY=VALUE"),
])
def test_bad_set_items_are_refused_naming_the_item(item, match, capsys):
    code, err = _run(["graph", "--model", "mlp", "--set", item], capsys)
    assert code == 1 and match in err and err.count("\n") == 1


def test_a_python_tag_in_set_is_refused_and_never_run(tmp_path, capsys):
    marker = tmp_path / "ran"
    code, err = _run(["graph", "--model", "mlp", "--set", f'batch=!!python/object/apply:os.system ["touch {marker}"]'],
                     capsys)
    assert code == 1 and "--set 'batch=!!python" in err and "constructor" in err and not marker.exists()


def test_an_option_set_twice_is_refused(capsys):
    code, err = _run(["graph", "--model", "mlp", "--set", "batch=2", "--set", "batch=3"], capsys)
    assert code == 1 and "--set batch is given twice ('batch=2' and 'batch=3')" in err
    code, err = _run(["graph", "--model", "mlp", "--set", "batch=2", "--batch", "3"], capsys)
    assert code == 1 and "--batch 3 and --set batch=2" in err


@pytest.mark.parametrize("command", ["graph", "grad", "cost", "roofline", "run", "check", "compile"])
def test_every_model_command_takes_the_same_model_options(command, capsys):
    with pytest.raises(SystemExit) as e:
        main([command, "--help"])
    out = capsys.readouterr().out
    assert e.value.code == 0
    for flag in ("--model MODEL", "--batch BATCH", "--set KEY=VALUE"):
        assert flag in out, (command, flag)
    assert ("--lr LR" in out) == (command != "grad")


def test_roofline_refuses_a_suffix_matplotlib_cannot_write_before_any_work(tmp_path, capsys):
    code, err = _run(["roofline", "--hw", "groq_like", *MLP, "-o", str(tmp_path / "x.txt")], capsys)
    assert code == 1 and "x.txt" in err and ".png, .pdf, .svg" in err
    code, err = _run(["roofline", "--hw", "groq_like", *MLP, "-o", str(tmp_path / "noext")], capsys)
    assert code == 1 and "no suffix" in err


def test_roofline_into_an_existing_directory_writes_the_default_name_inside(tmp_path, capsys):
    out = tmp_path / "figs"
    out.mkdir()
    assert main(["roofline", "--hw", "groq_like", *MLP, "-o", str(out)]) == 0
    written = out / "roofline_mlp_train_groq_like.png"  # was roofline_mlp_groq_like.png: graphs train by default
    assert written.read_bytes()[:4] == b"\x89PNG" and f"wrote {written}" in capsys.readouterr().out
    assert not (tmp_path / "figs.png").exists()


def test_roofline_writes_svg_and_its_points_as_json(tmp_path):
    out, js = tmp_path / "r.svg", tmp_path / "r.json"
    assert main(["roofline", "--hw", "groq_like", *MLP, "-o", str(out), "--json", str(js)]) == 0
    assert out.read_text().lstrip().startswith("<?xml")
    data = json.loads(js.read_text())
    assert data["figure"] == str(out) and all(p["attained_ops_per_s"] > 0 and p["name"] for p in data["nodes"])


@pytest.mark.parametrize("argv, match", [
    (["run", *MLP, "--out", "{file}"], "--out {file}: {file} is an existing file, not a directory"),
    (["run", *MLP, "--out", "{file}/sub"], "{file} is an existing file"),
    (["run", *MLP, "--no-sim", "--json", "{dir}"], "--json {dir}: is a directory"),
    (["graph", *MLP, "--json", "{file}/x.json"], "--json {file}/x.json: {file} is an existing file"),
    (["compile", *MLP, "-o", "{dir}"], "-o {dir}: is a directory"),
    (["roofline", "--hw", "groq_like", *MLP, "-o", "{file}/r.png"], "{file} is a file, not a directory"),
    (["hw", "validate", "{dir}"], "accelsim hw validate: error: {dir}"),
    (["simulate", "{dir}"], "{dir}"),
])
def test_output_and_input_paths_of_the_wrong_kind_are_refused(argv, match, tmp_path, capsys):
    paths = {"file": tmp_path / "a_file", "dir": tmp_path / "a_dir"}
    paths["file"].write_text("x")
    paths["dir"].mkdir()
    code, err = _run([a.format(**paths) for a in argv], capsys)
    assert code == 1 and match.format(**paths) in err


@pytest.mark.parametrize("flag", ["--json", "--hw", "--out"])
def test_empty_paths_are_refused_by_argparse(flag, capsys):
    code, err = _run(["run", flag, ""], capsys)
    assert code == 2 and f"argument {flag}: expected a path" in err


def test_json_that_cannot_be_written_names_the_path(capsys):
    code, err = _run(["graph", *MLP, "--json", "/proc/no/such/x.json"], capsys)
    assert code == 1 and "/proc/no/such/x.json" in err


def test_max_tasks_refuses_a_step_with_its_estimate(capsys):
    code, err = _run(["compile", "--hw", "groq_like", *MLP, "--microbatches", "4", "--max-tasks", "5",
                      "-o", "never.json"], capsys)
    assert code == 1 and "above the limit of 5" in err and "--max-tasks" in err


def test_max_tasks_can_be_raised(tmp_path, capsys):
    assert main(["compile", "--hw", "groq_like", *MLP, "--max-tasks", "1000000", "-o", str(tmp_path / "s.json")]) == 0


def test_check_sizes_its_tensors_before_compiling(capsys):
    code, err = _run(["check", "--hw", "groq_like", *MLP, "--max-bytes", "1000"], capsys)
    assert code == 1 and "checking mlp.train" in err and "above the limit of 1,000 bytes" in err
    assert "--max-bytes" in err
    code, err = _run(["check", "--hw", "groq_like", *MLP, "--microbatches", "1000", "--max-bytes", "100000"], capsys)
    assert code == 1 and "(1,000 samples)" in err and "limit" in err


def test_grad_sizes_its_gradient_graph(capsys):
    code, err = _run(["grad", *MLP, "--no-torch", "--max-bytes", "100"], capsys)
    assert code == 1 and "differentiating mlp" in err and "--max-bytes" in err


def test_simulate_refuses_other_hardware(tmp_path, capsys):
    path = tmp_path / "s.json"
    assert main(["compile", "--hw", "groq_like", *MLP, "-o", str(path)]) == 0
    code, err = _run(["simulate", str(path), "--hw", "tpu_v1_like"], capsys)
    assert code == 1 and "compiled for groq_like, not tpu_v1_like" in err
    code, err = _run(["simulate", str(path), "--hw", "no_such_hw"], capsys)
    assert code == 1 and "no_such_hw" in err


def test_gemm_and_conv_are_exclusive(capsys):
    code, err = _run(["cost", "--hw", "groq_like", "--gemm", "4,4,4", "--conv", "1,1,4,4,1,3,3"], capsys)
    assert code == 2 and "not allowed with argument --gemm" in err


@pytest.mark.parametrize("argv", [["check"], ["run", "--check", "--no-sim"]])
def test_cuda_without_a_gpu_is_refused_before_compiling(argv, monkeypatch, capsys):
    from accelsim.kernels import registry

    monkeypatch.setattr(registry, "cuda_available", lambda: (False, "no CUDA GPU is available"))
    code, err = _run([*argv, "--hw", "groq_like", *MLP, "--backend", "cuda"], capsys)
    assert code == 1 and "the cuda backend cannot run: no CUDA GPU" in err
