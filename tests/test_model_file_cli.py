"""Model files from the command line: `accelsim import` a torch.export program, then run, compile and check
the graph file, and run an ONNX model directly with --model; zoo-only options on a model file are refused
in one paragraph."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from accelsim.cli import main

torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def model_files(tmp_path_factory) -> Path:
    """A small MLP saved as a .pt2 program and as an ONNX model (fixed batch of 8)."""
    d = tmp_path_factory.mktemp("models")
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)).eval()
    x = torch.randn(8, 1, 4, 4)
    torch.export.save(torch.export.export(m, (x,)), d / "mlp.pt2")
    torch.onnx.export(m, (x,), str(d / "mlp.onnx"), dynamo=True, verbose=False)
    return d


def test_import_then_run_compile_and_check_the_graph_file(model_files, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["import", str(model_files / "mlp.pt2"), "-o", "mlp.json"]) == 0
    out = capsys.readouterr().out
    assert "wrote mlp.json" in out and "accelsim run --model mlp.json" in out
    assert main(["run", "--model", "mlp.json", "--hw", "groq_like", "--no-sim", "--json", "run.json"]) == 0
    summary = json.loads(Path("run.json").read_text())
    assert summary["makespan_cycles"] > 0 and summary["samples_per_step"] == 8
    capsys.readouterr()
    assert main(["compile", "--model", "mlp.json", "--hw", "groq_like"]) == 0
    saved = Path("schedules/mlp_train_groq_like.json")  # the model file's stem names the default path
    assert saved.is_file()
    capsys.readouterr()
    assert main(["check", str(saved)]) == 0  # the schedule rebuilds its graph from mlp.json
    assert "tensors within tolerance" in capsys.readouterr().out


def test_an_onnx_model_runs_and_checks_directly(model_files, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["run", "--model", str(model_files / "mlp.onnx"), "--hw", "groq_like_x4", "--data-parallel", "2",
                 "--check"]) == 0
    out = capsys.readouterr().out
    assert "check passed" in out and "plots/mlp_groq_like_x4" in out


@pytest.mark.parametrize("extra, named", [(["--batch", "3"], "--batch"), (["--set", "layers=2"], "--set")])
def test_zoo_options_on_a_model_file_are_refused(model_files, extra, named, capsys):
    assert main(["run", "--model", str(model_files / "mlp.pt2"), "--no-sim", *extra]) == 1
    err = capsys.readouterr().err
    assert "is a model file" in err and named in err and "Traceback" not in err and len(err.splitlines()) == 1


def test_a_missing_or_tampered_model_file_is_one_paragraph(tmp_path, capsys):
    assert main(["run", "--model", str(tmp_path / "gone.onnx"), "--no-sim"]) == 1
    assert "no such model file" in capsys.readouterr().err
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "accelsim-graph", "nodes": [{"op": "rm -rf"}]}')
    assert main(["run", "--model", str(bad), "--no-sim"]) == 1
    err = capsys.readouterr().err
    assert "bad.json" in err and "Traceback" not in err


def test_a_schedule_whose_model_file_changed_is_refused(model_files, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["import", str(model_files / "mlp.pt2"), "-o", "m.json"]) == 0
    assert main(["compile", "--model", "m.json", "--hw", "groq_like", "-o", "s.json"]) == 0
    Path("m.json").write_text(Path("m.json").read_text() + "\n")  # same graph, other bytes
    capsys.readouterr()
    assert main(["check", "s.json"]) == 1
    assert "has changed since the schedule was compiled" in capsys.readouterr().err
