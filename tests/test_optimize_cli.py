"""CLI: `accelsim optimize` output, JSON and errors; --optimize on run, check and compile (with the older
--passes beside it, and --optimizer parsed apart from it); saved optimized schedules simulate and check."""
import json

import pytest

from accelsim.cli import main, make_parser

GPT2 = ["--model", "gpt2", "--batch", "1", "--set", "seq=8", "--set", "layers=2", "--set", "d_model=16",
        "--set", "heads=2", "--set", "vocab=32"]
BLOCK = ["--model", "transformer_block", "--batch", "1", "--set", "seq=8", "--set", "d_model=16", "--set", "heads=2"]
# One schedule per compile and no list-scheduling search inside it: these tests check what the CLI prints,
# records and refuses, which does not depend on the compile's effort.
FAST = ["--split", "off", "--effort", "fast"]


def test_optimize_auto_prints_each_rewrite_with_its_effect_and_writes_json(tmp_path, capsys):
    path = tmp_path / "opt.json"
    # optimize trains by default, as every command does (it defaulted to inference before)
    assert main(["optimize", *BLOCK, "--inference", "--hw", "tpu_v1_like", *FAST, "--json", str(path)]) == 0
    out = capsys.readouterr().out
    assert "optimize the inference of" in out and "with auto" in out and "numeric check: float64" in out
    assert "candidate graph(s) compiled" in out
    assert "best rule-based pipeline:" in out
    assert "1. merge_qkv" in out and "before: makespan" in out and "after:  makespan" in out
    assert "passes applied: merge_qkv" in out
    data = json.loads(path.read_text())
    assert data["applied"][0] == {"pass": "merge_qkv", "only": None} and not data["training"]
    assert data["after"]["makespan_cycles"] < data["before"]["makespan_cycles"]
    assert data["steps"][0]["before"] == data["before"] and data["steps"][-1]["after"] == data["after"]
    assert len(data["steps"]) == len(data["applied"])
    assert 1 < data["search"]["compiles"] <= 32 and data["search"]["time_limited"] is False


def test_optimize_a_pass_list_on_a_training_step_measures_every_step(tmp_path, capsys):
    path = tmp_path / "opt.json"
    assert main(["optimize", *GPT2, "--training", "--optimizer", "momentum", "--hw", "tpu_v1_like", *FAST,
                 "--optimize", "cse,merge_qkv,fold_batchnorm", "--json", str(path)]) == 0
    out = capsys.readouterr().out
    assert "training step of gpt2.train" in out and "1. cse" in out and "2. merge_qkv" in out
    assert "fold_batchnorm: skipped: applies to inference graphs" in out
    data = json.loads(path.read_text())
    assert [s["pass"] for s in data["steps"]] == ["cse", "merge_qkv"] and data["search"] is None
    assert data["steps"][1]["before"] == data["steps"][0]["after"]


def test_optimize_where_nothing_applies_says_so(capsys):
    assert main(["optimize", "--model", "mlp", "--batch", "2", "--set", "sizes=8,4", "--hw", "groq_like", *FAST,
                 "--optimize", "fold_batchnorm,merge_parallel_convs"]) == 0
    out = capsys.readouterr().out
    assert "passes applied: none" in out and "merge_parallel_convs: unchanged (nothing matched)" in out


@pytest.mark.parametrize("argv,match", [
    (["--optimize", "cse,fold_bn"], "unknown pass 'fold_bn'"),
    (["--optimize", "cse", "--budget", "4"], "--budget and --time-limit bound the search of --optimize auto"),
    (["--hw", "no_such_hw"], "no_such_hw"),
    (["--model", "no_such_model"], "no_such_model"),
    (["--microbatches", "4", "--max-tasks", "2"], "does not compile on groq_like, so there is no makespan"),
])
def test_optimize_user_errors_exit_1_with_one_paragraph(argv, match, capsys):
    assert main(["optimize", "--model", "mlp", "--batch", "2", "--set", "sizes=8,4", *argv]) == 1
    err = capsys.readouterr().err
    assert err.startswith("accelsim optimize: error:") and match in err and "Traceback" not in err


@pytest.mark.parametrize("flag,value", [("--budget", "0"), ("--budget", "2.5"), ("--time-limit", "nan"),
                                        ("--time-limit", "0"), ("--time-limit", "inf")])
def test_bad_budget_or_time_limit_is_refused_by_argparse(flag, value, capsys):
    with pytest.raises(SystemExit) as e:
        main(["optimize", flag, value])
    assert e.value.code == 2 and flag in capsys.readouterr().err


@pytest.mark.parametrize("command", ["run", "check", "compile", "optimize"])
def test_optimize_and_optimizer_parse_apart_on_every_command_that_has_both(command):
    parser = make_parser()
    args = parser.parse_args([command, "--optimize", "auto", "--optimizer", "adam"])
    assert (args.optimize, args.optimizer) == ("auto", "adam")
    args = parser.parse_args([command, "--optimizer", "momentum", "--optimize", "cse,simplify"])
    assert (args.optimize, args.optimizer) == ("cse,simplify", "momentum")
    assert parser.parse_args([command, "--passes", "cse"]).optimize == "cse"  # the older name


def test_compile_records_the_passes_and_simulate_and_check_use_the_saved_schedule(tmp_path, capsys):
    path = tmp_path / "gpt2.json"
    assert main(["compile", *GPT2, "--hw", "multicore_cpu", *FAST, "--optimize", "auto", "--budget", "6",
                 "-o", str(path)]) == 0
    assert "optimize: auto:" in capsys.readouterr().out
    passes = json.loads(path.read_text())["source"]["passes"]
    assert passes and all(set(p) == {"name", "only"} for p in passes)
    assert main(["simulate", str(path), "--out", str(tmp_path / "plots")]) == 0
    assert "simulated (static)" in capsys.readouterr().out
    assert main(["check", str(path), "--backend", "numpy"]) == 0
    assert "check passed" in capsys.readouterr().out


def test_check_of_a_saved_schedule_refuses_optimize_again(tmp_path, capsys):
    path = tmp_path / "block.json"
    assert main(["compile", *BLOCK, "--inference", "--hw", "tpu_v1_like", *FAST, "--optimize", "merge_qkv",
                 "-o", str(path)]) == 0
    capsys.readouterr()
    assert main(["check", str(path), "--optimize", "cse"]) == 1
    assert "is compiled already" in capsys.readouterr().err


def test_run_with_optimize_auto_scores_the_step_it_runs(capsys):
    assert main(["run", *BLOCK, "--inference", "--hw", "tpu_v1_like", *FAST, "--microbatches", "2",
                 "--optimize", "auto", "--budget", "3", "--no-sim"]) == 0
    out = capsys.readouterr().out
    chosen = int(out.split("chosen ")[1].split(" -> ")[1].split(" cycles")[0].replace(",", ""))
    assert f"makespan    {chosen:,} cycles" in out  # the search compiled the step as run compiles it
