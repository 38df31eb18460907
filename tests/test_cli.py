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
