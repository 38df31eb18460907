"""Hostile command lines run in-process: each is refused with exit 1 (or argparse's 2) and a message naming the
option and the rule, never a traceback; the few that are legal must work."""
from __future__ import annotations

import pytest

pytestmark = pytest.mark.timeout(300)  # a hang guard, not a speed limit: see tests/conftest.py

MLP = ["--model", "mlp", "--set", "batch=2", "--set", "sizes=16,8,4"]
RUN = ["run", "--hw", "groq_like", *MLP, "--no-sim"]
SHIPPED = "schedules/superres_train_groq_like.json"
LR = ("lr", "learning rate")

# (argv, words the error must contain, accepted exit codes); a word may be a tuple of alternatives
REFUSED = {
    # --set values are YAML: parse errors, tags and aliases are the user's error, named by key
    "set_unclosed_list": (["graph", *MLP, "--set", "sizes=[1, 2"], ["sizes"], (1, 2)),
    "set_python_tag": (["graph", *MLP, "--set", 'batch=!!python/object/apply:os.system ["echo hi"]'], ["batch"],
                       (1, 2)),
    "set_python_name_tag": (["graph", *MLP, "--set", "batch=!!python/name:os.system"], ["batch"], (1, 2)),
    "set_undefined_alias": (["graph", *MLP, "--set", "sizes=*nowhere"], ["sizes"], (1, 2)),
    "set_recursive_alias": (["graph", *MLP, "--set", "batch=&a [*a]"], ["batch"], (1, 2)),
    "set_mapping_for_tuple": (["graph", *MLP, "--set", "sizes={a: 1}"], ["sizes"], (1, 2)),
    "set_empty_key": (["graph", *MLP, "--set", "=3"], [("key=value", "--set")], (1, 2)),
    "set_no_equals": (["graph", *MLP, "--set", "batch"], [("key=value", "--set")], (1, 2)),
    "set_batch_1e400": (["graph", *MLP, "--set", "batch=1e400"], ["batch"], (1, 2)),
    "set_batch_nan": (["graph", *MLP, "--set", "batch=.nan"], ["batch"], (1, 2)),
    "set_batch_inf": (["graph", *MLP, "--set", "batch=.inf"], ["batch"], (1, 2)),
    "set_batch_negative": (["graph", *MLP, "--set", "batch=-2"], ["batch"], (1, 2)),
    "set_batch_fraction": (["graph", *MLP, "--set", "batch=2.5"], ["batch"], (1, 2)),
    "set_batch_bool": (["graph", *MLP, "--set", "batch=true"], ["batch"], (1, 2)),
    "set_sizes_zero": (["graph", *MLP, "--set", "sizes=16,0,4"], ["sizes"], (1, 2)),
    "set_sizes_inf": (["graph", *MLP, "--set", "sizes=[16, 8, .inf]"], ["sizes"], (1, 2)),
    "set_sizes_empty": (["graph", *MLP, "--set", "sizes="], ["sizes"], (1, 2)),
    "set_sizes_one": (["graph", *MLP, "--set", "sizes=[16]"], ["sizes"], (1, 2)),
    "set_dtype_float16": (["graph", *MLP, "--set", "dtype=float16"], ["dtype"], (1, 2)),
    "set_seed_negative": (["graph", *MLP, "--set", "seed=-1"], ["seed"], (1, 2)),
    "set_unknown_option": (["graph", *MLP, "--set", "colour=red"], ["colour"], (1, 2)),
    "gpt2_zero_layers": (["graph", "--model", "gpt2", "--set", "layers=0"], ["layers"], (1, 2)),
    "transformer_zero_heads": (["graph", "--model", "transformer_block", "--set", "heads=0"], ["heads"], (1, 2)),
    "superres_zero_upscale": (["graph", "--model", "superres", "--set", "upscale=0"], ["upscale"], (1, 2)),
    "unknown_model": (["graph", "--model", "nope"], ["nope"], (1, 2)),
    "batch_zero": (["graph", *MLP, "--batch", "0"], ["batch"], (1, 2)),
    "batch_not_int": (["graph", *MLP, "--batch", "abc"], ["batch"], (1, 2)),
    "graph_lr_inf": (["graph", *MLP, "--training", "--lr", "inf"], [LR], (1, 2)),
    "graph_json_is_dir": (["graph", *MLP, "--json", "."], [("json", "directory")], (1, 2)),
    # roofline output paths
    "roofline_txt": (["roofline", "--hw", "groq_like", *MLP, "-o", "x.txt"], ["x.txt"], (1, 2)),
    "roofline_unwritable": (["roofline", "--hw", "groq_like", *MLP, "-o", "/proc/nope/x.png"],
                            ["/proc/nope"], (1, 2)),
    # grad
    "grad_fd_coords_negative": (["grad", *MLP, "--no-torch", "--fd-coords", "-1"], [("fd-coords", "fd_coords")],
                                (1, 2)),
    "grad_batch_zero": (["grad", *MLP, "--no-torch", "--batch", "0"], ["batch"], (1, 2)),
    # run: learning rates that are not finite and positive
    "run_lr_inf": ([*RUN, "--lr", "inf"], [LR], (1, 2)),
    "run_lr_nan": ([*RUN, "--lr", "nan"], [LR], (1, 2)),
    "run_lr_minus_inf": ([*RUN, "--lr", "-inf"], [LR], (1, 2)),
    "run_lr_negative": ([*RUN, "--lr", "-1"], [LR], (1, 2)),
    "run_lr_zero": ([*RUN, "--lr", "0"], [LR], (1, 2)),
    "run_lr_1e400": ([*RUN, "--lr", "1e400"], [LR], (1, 2)),
    "check_lr_nan": (["check", "--hw", "groq_like", *MLP, "--lr", "nan"], [LR], (1, 2)),
    # run: step options
    "run_microbatches_zero": ([*RUN, "--microbatches", "0"], ["microbatches"], (1, 2)),
    "run_microbatches_negative": ([*RUN, "--microbatches", "-3"], ["microbatches"], (1, 2)),
    "run_microbatches_not_int": ([*RUN, "--microbatches", "abc"], ["microbatches"], (1, 2)),
    "run_data_parallel_zero": ([*RUN, "--data-parallel", "0"], [("data_parallel", "data-parallel")], (1, 2)),
    "run_pipeline_stages_zero": ([*RUN, "--pipeline-stages", "0"], [("pipeline_stages", "pipeline-stages")], (1, 2)),
    "run_more_stages_than_chips": ([*RUN, "--pipeline-stages", "3"], [("pipeline_stages", "pipeline-stages"),
                                                                       "chip"], (1, 2)),
    "run_x4_five_stages": (["run", "--hw", "groq_like_x4", *MLP, "--no-sim", "--pipeline-stages", "5"],
                           [("pipeline_stages", "pipeline-stages"), "chip"], (1, 2)),
    "run_unknown_hw": (["run", "--hw", "nope_hw", *MLP, "--no-sim"], ["nope_hw"], (1, 2)),
    "run_hw_is_dir": (["run", "--hw", ".", *MLP, "--no-sim"], [("directory", "not a file")], (1, 2)),
    "run_unknown_optimizer": ([*RUN, "--optimizer", "lion"], ["optimizer"], (2,)),
    "run_unknown_model": (["run", "--hw", "groq_like", "--model", "nope", "--no-sim"], ["nope"], (1, 2)),
    "run_json_unwritable": ([*RUN, "--json", "/proc/nope/run.json"], ["/proc/nope"], (1, 2)),
    "check_unknown_backend": (["check", "--hw", "groq_like", *MLP, "--backend", "tpu"], ["backend"], (2,)),
    # compile
    "compile_output_unwritable": (["compile", "--hw", "groq_like", *MLP, "-o", "/proc/nope/s.json"],
                                  ["/proc/nope"], (1, 2)),
    "compile_output_is_dir": (["compile", "--hw", "groq_like", *MLP, "-o", "."], ["directory"],
                              (1, 2)),
    # simulate
    "simulate_missing_file": (["simulate", "/nonexistent/sched.json"], ["sched.json"], (1, 2)),
    "simulate_dir": (["simulate", "."], [("directory", "not a file")], (1, 2)),
    "simulate_other_hw": (["simulate", "@" + SHIPPED, "--hw", "tpu_v1_like"], ["tpu_v1_like"], (1, 2)),
    "simulate_other_hw_same_chip": (["simulate", "@" + SHIPPED, "--hw", "groq_like_x4"], ["groq_like_x4"], (1, 2)),
    "simulate_unknown_hw": (["simulate", "@" + SHIPPED, "--hw", "nope_hw"], ["nope_hw"], (1, 2)),
    "simulate_out_unwritable": (["simulate", "@" + SHIPPED, "--out", "/proc/nope"], ["/proc/nope"], (1, 2)),
    # hw
    "hw_validate_no_files": (["hw", "validate"], [("files", "argument")], (2,)),
    "hw_show_missing": (["hw", "show", "/nonexistent/x.yaml"], ["x.yaml"], (1, 2)),
    "hw_no_subcommand": (["hw"], [("hw_command", "validate", "required")], (2,)),
    # cost of one layer
    "cost_gemm_zero": (["cost", "--hw", "groq_like", "--gemm", "0,1,2"], ["gemm"], (1, 2)),
    "cost_gemm_two_values": (["cost", "--hw", "groq_like", "--gemm", "1,2"], ["gemm"], (1, 2)),
    "cost_gemm_letters": (["cost", "--hw", "groq_like", "--gemm", "a,b,c"], ["gemm"], (1, 2)),
    "cost_gemm_negative": (["cost", "--hw", "groq_like", "--gemm", "-1,2,3"], ["gemm"], (1, 2)),
    "cost_conv_stride_zero": (["cost", "--hw", "groq_like", "--conv", "1,1,8,8,1,3,3,0,0"], ["stride"], (1, 2)),
    "cost_conv_padding_negative": (["cost", "--hw", "groq_like", "--conv", "1,1,8,8,1,3,3,1,-1"], ["padding"],
                                   (1, 2)),
    "cost_conv_kernel_too_big": (["cost", "--hw", "groq_like", "--conv", "1,1,2,2,1,5,5"], ["conv2d"], (1, 2)),
    "cost_unknown_unit": (["cost", "--hw", "groq_like", "--gemm", "2,2,2", "--unit", "warp_core"], ["warp_core"],
                          (1, 2)),
    "no_command": ([], [("command", "required")], (2,)),
    "unknown_command": (["teleport"], ["teleport"], (2,)),
}


def _argv(hostile, argv):
    return [str(hostile.repo / a[1:]) if a.startswith("@") else a for a in argv]


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_hostile_command_line_is_refused_naming_the_option(case, hostile):
    argv, words, codes = REFUSED[case]
    hostile.cli_refuses(_argv(hostile, argv), *words, codes=codes)


def test_yaml_tag_in_set_is_not_executed(hostile):
    marker = hostile.tmp / "pwned"
    argv = ["graph", *MLP, "--set", f'batch=!!python/object/apply:os.system ["touch {marker}"]']
    hostile.cli_refuses(argv, "batch", codes=(1,))
    assert not marker.exists()


def test_roofline_into_a_directory_never_writes_beside_it(hostile):
    out = hostile.tmp / "figs"
    out.mkdir()
    run = hostile.cli(["roofline", "--hw", "groq_like", *MLP, "-o", str(out)])
    assert not (hostile.tmp / "figs.png").exists(), "roofline -o DIR wrote DIR.png"
    if run.code == 0:  # writing a default name inside DIR is fine, if it says where
        written = [p for p in out.iterdir() if p.is_file()]
        assert written and any(str(p) in run.out for p in written), run.out
    else:
        assert run.code == 1 and "figs" in run.err, run.text


def test_roofline_to_svg_writes_the_svg_or_refuses(hostile):
    run = hostile.cli(["roofline", "--hw", "groq_like", *MLP, "-o", "r.svg"])
    assert run.code in (0, 1)
    if run.code == 0:
        assert (hostile.tmp / "r.svg").is_file()
    else:
        assert "r.svg" in run.err


def test_huge_gemm_is_costed_or_refused(hostile):
    run = hostile.cli(["cost", "--hw", "groq_like", "--gemm", "99999999999999999999,2,2"])
    assert run.code in (0, 1)
    if run.code == 1:
        assert "gemm" in run.err.lower() or "limit" in run.err.lower()


def test_hw_validate_reports_the_bad_file_among_good_ones(hostile):
    bad = hostile.write("bad.yaml", "name: x\nclock_hz: .inf\n")
    run = hostile.cli(["hw", "validate", str(hostile.repo / "hwconfigs/groq_like.yaml"), str(bad)])
    assert run.code == 1 and "groq_like.yaml: ok" in run.out
    assert "bad.yaml" in run.err and "groq_like.yaml" not in run.err


def test_adam_with_two_stages_two_replicas_two_microbatches_compiles(hostile):
    """Issue 10, bug 6: a dict rebound to an int inside a closure of compiler/planning/expand.py."""
    hostile.cli_ok(["run", "--hw", "groq_like_x4", *MLP, "--optimizer", "adam", "--microbatches", "2",
                    "--data-parallel", "2", "--pipeline-stages", "2", "--no-sim"])


def test_adam_with_two_stages_default_mlp_compiles(hostile):
    hostile.cli_ok(["run", "--hw", "groq_like_x4", "--model", "mlp", "--optimizer", "adam", "--microbatches", "2",
                    "--data-parallel", "2", "--pipeline-stages", "2", "--no-sim"])


@pytest.mark.parametrize("optimizer", ["sgd", "momentum", "adam"])
def test_small_run_with_every_optimizer_works(optimizer, hostile):
    hostile.cli_ok([*RUN, "--optimizer", optimizer, "--microbatches", "2"])


def test_simulate_of_the_shipped_schedule_works(hostile):
    run = hostile.cli_ok(["simulate", str(hostile.repo / SHIPPED), "--out", str(hostile.tmp / "sim")])
    assert "1.000x" in run.out
