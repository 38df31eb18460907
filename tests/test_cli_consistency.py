"""CLI consistency: one default for training vs inference and for --hw on every command, compile's default
path, chips refused or shared in one paragraph, one number formatter (no Python float repr in any printed
line), help for every flag, progress only on a terminal, check's summary line, and the run summary's metrics
printed whatever figures the RunSummary has."""
from __future__ import annotations

import argparse
import dataclasses
import io
import json
import math
import re
from pathlib import Path

import pytest
from rich.console import Console

from accelsim import fmt
from accelsim.cli import main, make_parser, progress
from accelsim.cli.common import DEFAULT_HW, load_hw_arg
from accelsim.metrics import Rates
from accelsim.summary import ChipSummary, RunSummary

REPO = Path(__file__).resolve().parents[1]
MLP = ["--model", "mlp", "--set", "batch=2", "--set", "sizes=16,8,4"]
TINY_BLOCK = ["--model", "transformer_block", "--batch", "1", "--set", "seq=8", "--set", "d_model=16",
              "--set", "heads=8"]  # builds for 1, 2, 4 or 8 tensor-parallel ranks
STEP_COMMANDS = ["run", "compile", "check", "optimize", "graph", "cost", "roofline"]
HW_COMMANDS = ["run", "compile", "check", "optimize", "cost", "roofline"]


def _run(argv, capsys):
    """(exit code, stdout, stderr) of main(argv), whether argparse exits or main returns."""
    try:
        code = main([str(a) for a in argv])
    except SystemExit as e:
        code = e.code
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


def _help(argv, capsys) -> str:
    with pytest.raises(SystemExit) as e:
        main([*argv, "--help"])
    assert e.value.code == 0
    return " ".join(capsys.readouterr().out.split())  # argparse wraps help to the terminal's width


# ---- one default per question, the same on every command ------------------------------------------------

@pytest.mark.parametrize("command", STEP_COMMANDS)
def test_every_step_command_trains_by_default_and_says_so(command, capsys):
    parser = make_parser()
    assert parser.parse_args([command]).inference is False
    assert parser.parse_args([command, "--training"]).inference is False  # the older flag still parses
    assert parser.parse_args([command, "--inference"]).inference is True
    assert "unless --inference is given" in _help([command], capsys)
    code, _, err = _run([command, "--training", "--inference"], capsys)
    assert code == 2 and "not allowed with argument" in err


@pytest.mark.parametrize("command", HW_COMMANDS)
def test_every_hw_option_defaults_to_the_same_bundled_config(command, capsys):
    args = make_parser().parse_args([command])
    assert load_hw_arg(args).name == DEFAULT_HW
    assert f"(default {DEFAULT_HW}" in _help([command], capsys)


def test_hw_show_without_a_file_shows_the_default_config(capsys):
    code, out, _ = _run(["hw", "show"], capsys)
    assert code == 0 and out.startswith(f"{DEFAULT_HW}:")


def test_graph_cost_and_optimize_work_on_the_training_step_by_default(tmp_path, capsys):
    assert _run(["graph", *MLP, "--json", tmp_path / "g.json"], capsys)[0] == 0
    assert json.loads((tmp_path / "g.json").read_text())["name"] == "mlp.train"
    code, out, _ = _run(["cost", *MLP, "--summary"], capsys)
    assert code == 0 and out.startswith(f"mlp.train on {DEFAULT_HW}:")
    code, out, _ = _run(["optimize", *MLP, "--optimize", "cse", "--split", "off", "--json", tmp_path / "o.json"],
                        capsys)
    assert code == 0 and "optimize the training step of mlp.train" in out
    assert json.loads((tmp_path / "o.json").read_text())["training"] is True
    code, out, _ = _run(["graph", *MLP, "--inference"], capsys)
    assert code == 0 and out.startswith("graph mlp.infer:")


# ---- compile's default path ----------------------------------------------------------------------------

@pytest.mark.parametrize("flag, step", [([], "train"), (["--inference"], "infer")])
def test_compile_without_o_writes_below_schedules_and_says_where(flag, step, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    code, out, _ = _run(["compile", *MLP, *flag, "--split", "off"], capsys)
    path = Path("schedules") / f"mlp_{step}_{DEFAULT_HW}.json"
    assert code == 0 and out.startswith(f"wrote {path}:") and (tmp_path / path).is_file()


def test_the_default_compile_path_is_the_shipped_schedules_name():
    from accelsim.cli.sched_cmds import default_schedule_path

    args = make_parser().parse_args(["compile"])
    path = default_schedule_path(args, load_hw_arg(args))
    assert path == Path("schedules") / f"superres_train_{DEFAULT_HW}.json" and (REPO / path).is_file()


# ---- chips: refused in one paragraph saying what fits, or shared and said so -----------------------------

@pytest.mark.parametrize("argv, words", [
    (["run", "--hw", "groq_like_x4", "--data-parallel", "4", "--pipeline-stages", "2"],
     ["--data-parallel 4 x --pipeline-stages 2 needs 8 chips", "groq_like_x4 has 4 chips",
      "at most --data-parallel 2"]),
    (["compile", "--hw", "groq_like", "--pipeline-stages", "2"],
     ["--pipeline-stages 2 needs 2 chips", "groq_like has 1 chip:", "at most --pipeline-stages 1 on it"]),
    (["check", "--hw", "groq_like_x4", "--tensor-parallel", "8"],
     ["--tensor-parallel 8 needs 8 chips (one per stage and rank)", "has 4 chips", "--tensor-parallel at most 4"]),
    (["run", "--hw", "groq_like_x4", "--data-parallel", "8", "--zero", "1"],
     ["--data-parallel 8 needs 8 chips", "ZeRO shards", "at most --data-parallel 4", "--zero 0"]),
    (["optimize", "--hw", "groq_like_x4", "--data-parallel", "3", "--tensor-parallel", "2"],
     ["needs 6 chips", "at most --data-parallel 2 with these stages and ranks"]),
])
def test_more_parallelism_than_chips_is_refused_before_compiling(argv, words, monkeypatch, capsys):
    import accelsim.cli.optimize_cmd as optimize_cmd
    import accelsim.cli.sched_cmds as sched_cmds

    def never(*args, **kwargs):
        raise AssertionError("compiled before the chips were checked")

    monkeypatch.setattr(sched_cmds, "compile_schedule", never)
    monkeypatch.setattr(optimize_cmd, "optimize_step", never)
    code, _, err = _run([*argv, *TINY_BLOCK], capsys)
    assert code == 1 and err.count("\n") == 1 and all(w in err for w in words), err


def test_replicas_beyond_the_chips_share_them_and_the_output_says_so(capsys):
    code, out, _ = _run(["run", "--hw", "groq_like", *MLP, "--data-parallel", "3", "--no-sim", "--split", "off"],
                        capsys)
    assert code == 0 and "note: 3 replicas on 1 chip: replicas share chips (up to 3 on one)" in out


# ---- one formatter ---------------------------------------------------------------------------------------

HOSTILE = [0, 0.0, -0.0, -1, -1234.5, math.nan, math.inf, -math.inf, 1e300, -1e300, 1e-300, 5e-324, 2**70,
           0.30000000000000004, 1e-05, 8.38123e6]
PYTHON_REPR = re.compile(r"\d\.\d{6,}|\de[+-]0\d|\de\+\d")
"""Python's default float repr: long decimals (0.30000000000000004) or a padded or signed exponent (1e-05,
8.38e+06). Deliberate scientific notation has neither (1e-5, 5.04e-11, 1e300)."""


@pytest.mark.parametrize("value", HOSTILE, ids=repr)
@pytest.mark.parametrize("name", ["count", "cycles", "seconds", "nbytes", "rate", "percent", "ratio", "factor",
                                  "number", "error", "wall", "sci"])
def test_every_formatter_takes_hostile_values_without_python_repr(name, value):
    text = getattr(fmt, name)(value)
    assert isinstance(text, str) and text and not PYTHON_REPR.search(text), text
    if isinstance(value, float) and math.isnan(value):
        assert "nan" in text
    if value in (math.inf, -math.inf):
        assert "inf" in text


@pytest.mark.parametrize("call, expected", [
    (lambda: fmt.count(1234567), "1,234,567"), (lambda: fmt.count(-1234.5), "-1,234"), (lambda: fmt.count(0), "0"),
    (lambda: fmt.cycles(44338), "44,338 cycles"),
    (lambda: fmt.seconds(4.926e-5), "49.26 us"), (lambda: fmt.seconds(0), "0 s"), (lambda: fmt.seconds(2.5), "2.5 s"),
    (lambda: fmt.seconds(1e300), "1e300 s"), (lambda: fmt.seconds(1e-300), "1e-300 s"),
    (lambda: fmt.rate(8.38123e6), "8.381 Msamples/s"), (lambda: fmt.rate(999_960), "1 Msamples/s"),
    (lambda: fmt.rate(18.43e12, "B/s"), "18.43 TB/s"), (lambda: fmt.rate(-2e3), "-2 ksamples/s"),
    (lambda: fmt.nbytes(512), "512 B"), (lambda: fmt.nbytes(1863319), "1.777 MiB"),
    (lambda: fmt.nbytes(220 * 2**20), "220 MiB"), (lambda: fmt.nbytes(1023.999 * 1024), "1 MiB"),
    (lambda: fmt.nbytes(-3 * 2**30), "-3 GiB"), (lambda: fmt.nbytes(math.nan), "nan B"),
    (lambda: fmt.percent(0.434), "43.4%"), (lambda: fmt.percent(0), "0.0%"), (lambda: fmt.percent(math.inf), "inf%"),
    (lambda: fmt.ratio(1.01834), "1.018"), (lambda: fmt.factor(1), "1.000x"),
    (lambda: fmt.change(1363, 1360), "-0.22%"), (lambda: fmt.change(0, 5), "n/a"),
    (lambda: fmt.change(1, math.nan), "n/a"),
    (lambda: fmt.number(0.30000000000000004), "0.3"), (lambda: fmt.number(40.2512), "40.25"),
    (lambda: fmt.number(123456.7), "123,457"), (lambda: fmt.number(1e-05), "1e-5"),
    (lambda: fmt.number(0.004765), "4.765e-3"),
    (lambda: fmt.error(1.37e-08), "1.37e-8"), (lambda: fmt.error(1e-4), "1e-4"), (lambda: fmt.error(0.25), "0.25"),
    (lambda: fmt.error(math.inf), "inf"), (lambda: fmt.wall(0.561), "0.56 s"), (lambda: fmt.wall(125), "2 min 05 s"),
    (lambda: fmt.plural(1, "micro-batch", "micro-batches"), "1 micro-batch"),
    (lambda: fmt.plural(2, "micro-batch", "micro-batches"), "2 micro-batches"),
    (lambda: fmt.metric("mac_utilization", 0.04), "4.0%"), (lambda: fmt.metric("achieved_tops", 29.47), "29.47 Top/s"),
    (lambda: fmt.metric("peak_memory_bytes", 3 * 2**20), "3 MiB"), (lambda: fmt.metric("latency_s", 1e-6), "1 us"),
    (lambda: fmt.metric("pct_of_peak", 43.21), "43.21%"), (lambda: fmt.metric("x_cycles", None), "n/a"),
    (lambda: fmt.metric("per_unit", {"mxm": 0.5}), "mxm 0.5"),
])
def test_formatters_write_each_kind_of_quantity_one_way(call, expected):
    assert call() == expected


# ---- every command's printed lines --------------------------------------------------------------------------

@pytest.fixture(scope="module")
def saved_schedule(tmp_path_factory):
    path = tmp_path_factory.mktemp("sched") / "mlp.json"
    assert main(["compile", *MLP, "--split", "off", "--microbatches", "2", "-o", str(path)]) == 0
    return path


COMMANDS = {
    "run": ["run", *MLP, "--split", "off", "--microbatches", "2", "--no-sim"],  # simulate prints the sim lines
    "run_x4_check": ["run", "--hw", "groq_like_x4", *MLP, "--data-parallel", "2", "--split", "off", "--no-sim",
                     "--check", "--backend", "numpy", "--verbose"],
    "compile": ["compile", *MLP, "--inference", "--hw", "tpu_v1_like", "-o", "{tmp}/s.json"],
    "simulate": ["simulate", "{schedule}", "--dynamic", "--out", "{tmp}/sim"],
    "check": ["check", "{schedule}", "--backend", "numpy", "--verbose"],
    "hw_show": ["hw", "show", "a100_x8"],
    "hw_validate": ["hw", "validate", str(REPO / "hwconfigs" / "groq_like.yaml")],
    "cost": ["cost", *MLP],
    "cost_gemm": ["cost", "--hw", "tpu_v1_like", "--gemm", "512,256,384"],
    "graph": ["graph", *MLP],
    "grad": ["grad", *MLP, "--no-torch"],
    "grad_seed": ["grad", "--model", "seed_autodiff", "--no-torch"],
    "optimize": ["optimize", *MLP, "--optimize", "cse,fuse_epilogue", "--split", "off"],
    "roofline": ["roofline", *MLP, "-o", "{tmp}/r.png"],
}
@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_no_printed_line_has_a_python_float_repr_and_stderr_stays_clean(name, saved_schedule, tmp_path, capsys):
    argv = [a.format(tmp=tmp_path, schedule=saved_schedule) for a in COMMANDS[name]]
    code, out, err = _run(argv, capsys)
    assert code == 0 and out and not err, err
    for line in out.splitlines():
        words = " ".join(w for w in line.split() if "/" not in w or w.endswith("/s"))  # paths may hold digits
        assert not PYTHON_REPR.search(words), line


def test_piped_output_is_never_wrapped_mid_phrase(capsys):
    code, out, _ = _run(["run", "--hw", "groq_like_x4", *MLP, "--data-parallel", "2", "--no-sim", "--split", "off"],
                        capsys)
    header = out.splitlines()[0]
    assert code == 0 and header.startswith("training step of mlp.train on groq_like_x4:")
    assert header.endswith(" s") and "tasks compiled in" in header and len(header) > 80


# ---- help for every flag -------------------------------------------------------------------------------------

def _parsers(parser: argparse.ArgumentParser, path: str = "accelsim"):
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _parsers(sub, f"{path} {name}")


def test_every_flag_and_subcommand_has_its_own_help():
    default_help = {"show this help message and exit", argparse.SUPPRESS}
    missing = []
    for path, parser in _parsers(make_parser()):
        for action in parser._actions:
            if isinstance(action, (argparse._HelpAction, argparse._VersionAction)):
                continue  # argparse's own -h/--help (and a --version) read the same everywhere
            if isinstance(action, argparse._SubParsersAction):
                missing += [f"{path} {c.dest}" for c in action._choices_actions if not (c.help or "").strip()]
                continue
            text = (action.help or "").strip()
            if not text or text in default_help or text.startswith("%("):
                missing.append(f"{path} {'/'.join(action.option_strings) or action.dest}")
    assert not missing, missing


# ---- progress on stderr, only on a terminal -----------------------------------------------------------------

@pytest.fixture
def terminal(monkeypatch):
    """stderr as a forced terminal whose bytes the test reads."""
    buf = io.StringIO()
    monkeypatch.setattr(progress, "stderr_console", lambda: Console(file=buf, force_terminal=True, width=100))
    return buf


def test_phases_draw_a_spinner_line_on_a_terminal_and_nest(terminal):
    with progress.phase("building the model"):
        with progress.phase("autodiff"):  # one live display; the inner phase adds a line to it
            pass
        with progress.counter("compiling candidates", 4) as update:
            update(1, 4)
            update(3, 4)
    text = terminal.getvalue()
    assert "building the model" in text and "autodiff" in text and "compiling candidates 0/4" in text
    assert "\x1b[" in text  # drawn with terminal controls, then erased (transient)


def test_phases_write_nothing_where_stderr_is_no_terminal(monkeypatch):
    buf = io.StringIO()
    monkeypatch.setattr(progress, "stderr_console", lambda: Console(file=buf, force_terminal=False))
    with progress.phase("compiling"):
        with progress.counter("candidates", 3) as update:
            assert update is None
    assert buf.getvalue() == "" and not progress.enabled()


def test_a_command_shows_its_phases_on_a_terminal_and_keeps_stdout_clean(terminal, tmp_path, capsys):
    code, out, _ = _run(["compile", *MLP, "--split", "off", "-o", tmp_path / "s.json"], capsys)
    text = terminal.getvalue()
    assert code == 0 and out.startswith("wrote ") and "\x1b[" not in out
    for phase in ("building the model (mlp)", "autodiff", "compiling the schedule"):
        assert phase in text, phase


# ---- check: a summary line, every row with --verbose, exit 1 when a tensor is out -----------------------------

def test_check_prints_a_summary_line_and_the_rows_only_with_verbose(saved_schedule, capsys):
    code, out, _ = _run(["check", saved_schedule, "--backend", "numpy"], capsys)
    summary = re.search(r"(\d+) of (\d+) tensors within tolerance; worst (.+?): relative error", out)
    assert code == 0 and summary and summary[1] == summary[2] and "check passed" in out
    assert "check: every tensor" not in out and "fc1.b.new" not in out.replace(f"worst {summary[3]}", "")
    code, verbose, _ = _run(["check", saved_schedule, "--backend", "numpy", "--verbose"], capsys)
    assert code == 0 and "check: every tensor" in verbose and "fc1.b.new" in verbose and summary[0] in verbose


def test_check_out_of_tolerance_shows_the_bad_rows_and_exits_1(saved_schedule, monkeypatch, capsys):
    import dataclasses

    import accelsim.api

    real = accelsim.api.check

    def logits_off(*args, **kwargs):  # the logits come back 10x over their tolerance: finite, out of it
        report = real(*args, **kwargs)
        entries = tuple(dataclasses.replace(e, max_rel_err=10 * e.tolerance) if e.name == "logits" else e
                        for e in report.entries)
        return dataclasses.replace(report, entries=entries)

    monkeypatch.setattr(accelsim.api, "check", logits_off)
    code, out, _ = _run(["check", saved_schedule, "--backend", "numpy"], capsys)
    summary = re.search(r"(\d+) of (\d+) tensors within tolerance; worst logits: relative error", out)
    assert code == 1 and summary and int(summary[1]) == int(summary[2]) - 1 and "check FAILED" in out
    assert "check: tensors out of tolerance" in out and "failed: logits" in out


# ---- the run summary's metrics, whatever figures the RunSummary has ------------------------------------------

SCALAR_HW = """name: scalar_only
clock_hz: 1 GHz
chips:
  - units:
      - {name: alu, categories: [elementwise, tensor, reduction, data_movement], per_element: {cycles_per_element: 1},
         reads: [sram], writes: [sram]}
    memories:
      - {name: sram, kind: sram, capacity_bytes: 4194304, bandwidth_bytes_per_cycle: 64}
"""
"""A machine without an arithmetic peak: no array, no vector unit."""


@pytest.mark.parametrize("command", ["run", "simulate"])
def test_run_and_simulate_print_the_summary_of_a_machine_without_arithmetic_peak(command, tmp_path, capsys):
    hw = tmp_path / "scalar.yaml"
    hw.write_text(SCALAR_HW)
    if command == "run":
        argv = ["run", "--hw", hw, *MLP, "--no-sim", "--split", "off"]
    else:
        assert main(["compile", "--hw", str(hw), *MLP, "--split", "off", "-o", str(tmp_path / "s.json")]) == 0
        capsys.readouterr()
        argv = ["simulate", tmp_path / "s.json", "--hw", hw, "--out", tmp_path]
    code, out, _ = _run(argv, capsys)
    assert code == 0 and "makespan " in out and "compute " not in out and "MACs used" not in out
    assert "latency" in out and "per input (mean over inputs of an input's first task's start" in out


def test_run_prints_every_figure_run_summary_has_formatted_and_peak_memory_from_it(monkeypatch, capsys):
    import accelsim.cli.sched_cmds as sched_cmds

    class Newer(RunSummary):
        """A RunSummary that gained figures cli/summary.py has no words for."""

        __slots__ = ()

        def to_dict(self):
            return {**RunSummary.to_dict(self), "link_utilization": 0.30000000000000004, "spill_bytes": 1536,
                    "per_link": {"link0": {"busy_fraction": 0.5, "moved_bytes": 2048}},
                    "novel_definition": "a long definition the terminal leaves to the JSON"}

    real = sched_cmds.run_summary

    def newer(schedule, hw, graph=None):
        s = real(schedule, hw, graph)
        units = tuple(dataclasses.replace(u, rates=Rates(0.25, 1.5, 6.0)) if u.name == "mxm" else u for u in s.units)
        changed = {"mac_utilization": 0.0404, "achieved_tops": 29.4712345, "peak_tops": 741.9, "units": units,
                   "chips": (ChipSummary(0, Rates(0.5, 1.0, 2.0)), ChipSummary(1, Rates(0.125, 1.0, 2.0))),
                   "memories": tuple(dataclasses.replace(m, peak_bytes=3 * 2**20) for m in s.memories)}
        return Newer(**{f.name: changed.get(f.name, getattr(s, f.name)) for f in dataclasses.fields(s)})

    monkeypatch.setattr(sched_cmds, "run_summary", newer)
    code, out, _ = _run(["run", *MLP, "--no-sim", "--split", "off"], capsys)
    assert code == 0
    assert "compute     29.47 Top/s achieved of 741.9 Top/s peak (4.0% of peak MACs)" in out
    assert re.search(r"mxm +│ +\S+ │ +25\.0% │ +1\.5 Top/s │ +6 Top/s", out)
    assert re.search(r"chip1 +│ +12\.5%", out) and "3 MiB" in out and "1.777 MiB" not in out
    assert "link utilization 30.0%" in out and "spill bytes 1.5 KiB" in out
    assert "link0: busy fraction 50.0%, moved bytes 2 KiB" in out and "long definition" not in out
