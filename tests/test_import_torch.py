"""Importing PyTorch models (accelsim.frontends): forward outputs and parameter gradients against PyTorch's own,
graph files (round trip and hostile files), model files recorded in schedules, the import command."""
from __future__ import annotations

import argparse
import json
import subprocess
import sys

import numpy as np
import pytest

import accelsim as A
from accelsim.compare import max_rel_err
from accelsim.errors import FrontendError
from accelsim.schedule.plan import graph_hash

torch = pytest.importorskip("torch")
import torch_models as tm  # noqa: E402  (needs torch)
from accelsim.frontends import from_torch, load_graph, load_model, save_graph  # noqa: E402
from accelsim.frontends.torch_values import load_into_module, module_feeds  # noqa: E402

pytestmark = pytest.mark.torch
TOL = 1e-9
LOSSES = {"mse": lambda y, g: torch.nn.functional.mse_loss(y, _leaf(g, "target")),
          "cross_entropy": lambda y, g: torch.nn.functional.cross_entropy(y, _leaf(g, "labels"))}


def _leaf(graph, name):
    return torch.from_numpy(graph.leaf_value(graph.by_name(name).id))


def _randomize_buffers(module):
    """Eval-mode batch norm reads running statistics: make them something other than 0 and 1."""
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for name, b in module.named_buffers():
            if name.endswith("running_mean"):
                b.copy_(torch.randn(b.shape, generator=gen, dtype=b.dtype) * 0.1)
            elif name.endswith("running_var"):
                b.copy_(torch.rand(b.shape, generator=gen, dtype=b.dtype) + 0.5)


def _compare_with_torch(module, x, loss, direction="feed"):
    """Import `module`, run its training graph and torch on the same parameters and input; compare the output,
    the loss and every parameter's gradient. direction "feed": the module's values fed to accelsim; "load": the
    graph's drawn values loaded into the module (and the graph's drawn input used)."""
    graph = from_torch(module, (x,), loss=loss)
    train = A.training_graph(graph)
    xname = graph.inputs[0].name
    if direction == "feed":
        feeds = {**module_feeds(module, graph), xname: x.numpy()}
    else:
        load_into_module(graph, module)
        feeds, x = {}, _leaf(graph, xname)
    out = A.evaluate(train, feeds=feeds)
    module.zero_grad()
    y = module(x)
    torch_loss = LOSSES[loss](y, graph)
    torch_loss.backward()
    assert max_rel_err(out["y"], y.detach().numpy()) < TOL
    assert max_rel_err(out["loss"], torch_loss.detach().numpy()) < TOL
    params = dict(module.named_parameters())
    assert {p.name for p in graph.params if p.trainable} == set(params)  # the module's names, every one
    for name, p in params.items():
        assert max_rel_err(out[f"{name}.grad"], p.grad.numpy()) < 1e-8, f"d loss / d {name}"
    return graph


def test_resnet18_training_mode_matches_torch_outputs_and_gradients():
    torch.manual_seed(0)
    net = tm.resnet18(num_classes=10).double()
    graph = _compare_with_torch(net, torch.randn(2, 3, 32, 32, dtype=torch.float64), "cross_entropy")
    assert sum(n.op == "batch_norm" for n in graph.nodes) == 20  # training mode: batch statistics


def test_resnet50_eval_mode_matches_torch_outputs_and_gradients():
    """ResNet-50's full depth (16 bottlenecks, 53 convolutions) with the bottlenecks' inner width shrunk 4x
    (torchvision's width_per_group=16) to keep the test fast; eval mode: running statistics as buffers."""
    torch.manual_seed(0)
    net = tm.resnet50(num_classes=10, width_per_group=16).double().eval()
    _randomize_buffers(net)
    graph = _compare_with_torch(net, torch.randn(2, 3, 32, 32, dtype=torch.float64), "cross_entropy")
    assert sum(n.op == "batch_norm_inference" for n in graph.nodes) == 53
    assert sum(n.op == "param" and not n.trainable for n in graph.nodes) == 2 * 53  # running mean and var


def test_bert_style_encoder_matches_torch_outputs_and_gradients():
    torch.manual_seed(0)
    enc = tm.Encoder().double()
    graph = _compare_with_torch(enc, torch.randint(0, 50, (2, 8)), "cross_entropy")
    ops = {n.op for n in graph.nodes}
    assert {"embedding", "softmax", "layer_norm", "gelu", "matmul"} <= ops


def test_encoder_with_exact_gelu_matches_torch_outputs_and_gradients():
    """nn.GELU()'s default (erf form, BERT's and ViT's) imports through the registry's erf op."""
    torch.manual_seed(0)
    enc = tm.Encoder(gelu="none", layers=1).double()
    graph = _compare_with_torch(enc, torch.randint(0, 50, (2, 8)), "cross_entropy")
    ops = {n.op for n in graph.nodes}
    assert "erf" in ops and "gelu" not in ops


def test_mlp_with_graph_values_loaded_into_the_module_matches_torch():
    torch.manual_seed(0)
    mlp = tm.MLP().double().eval()  # eval: its dropout is the identity
    graph = _compare_with_torch(mlp, torch.rand(4, 1, 28, 28, dtype=torch.float64), "cross_entropy", "load")
    assert sum(n.op == "matmul" for n in graph.nodes) == 2 and "transpose" not in {n.op for n in graph.nodes}


def test_seed_super_resolution_net_matches_torch():
    torch.manual_seed(0)
    graph = _compare_with_torch(tm.Net(3).double(), torch.rand(2, 1, 12, 12, dtype=torch.float64), "mse", "load")
    assert [n.op for n in graph.nodes if n.op in ("conv2d", "pixel_shuffle")] == ["conv2d"] * 4 + ["pixel_shuffle"]
    assert graph.nodes[graph.outputs["y"]].shape == (2, 1, 30, 12)  # the seed's conv4 has stride (1, 3)


def test_resnet_copies_have_torchvision_parameter_counts():
    counts = [sum(p.numel() for p in f().parameters()) for f in (tm.resnet18, tm.resnet50)]
    assert counts == [11_689_512, 25_557_032]


@pytest.fixture(scope="module")
def net_file(tmp_path_factory):
    """The seed's network imported at a small size and saved as a graph file."""
    torch.manual_seed(0)
    graph = from_torch(tm.Net(3).double(), (torch.rand(1, 1, 8, 8, dtype=torch.float64),), name="seed_net")
    path = tmp_path_factory.mktemp("graphs") / "net.json"
    save_graph(graph, path)
    return graph, path


def test_graph_file_round_trips_to_the_same_hash_and_bytes(net_file, tmp_path):
    graph, path = net_file
    loaded = load_graph(path)
    assert graph_hash(loaded) == graph_hash(graph)
    assert graph_hash(A.training_graph(loaded)) == graph_hash(A.training_graph(graph))
    save_graph(loaded, tmp_path / "again.json")
    assert (tmp_path / "again.json").read_bytes() == path.read_bytes()


def test_training_graph_with_adam_state_round_trips(tmp_path):
    train = A.training_graph(A.models.build("mlp", batch=2, sizes=(6, 4, 3), dtype="float64"), optimizer="adam")
    save_graph(train, tmp_path / "step.json")
    loaded = load_graph(tmp_path / "step.json")
    assert graph_hash(loaded) == graph_hash(train) and loaded.optimizer == train.optimizer
    assert [n.phase for n in loaded.nodes] == [n.phase for n in train.nodes]


def test_imported_model_compiles_simulates_and_checks_and_its_saved_schedule_rechecks_from_the_file(
        net_file, tmp_path):
    _, path = net_file
    step = A.training_graph(load_model(path))
    sched = A.compile(step, A.load_hw("groq_like"))
    assert A.simulate(sched).makespan_cycles == sched.makespan_cycles > 0
    assert A.check(sched).passed
    A.save_schedule(sched, tmp_path / "sched.json")
    saved = json.loads((tmp_path / "sched.json").read_text())["source"]
    assert saved["model"] == "model_file" and saved["options"]["path"] == str(path.resolve())
    assert A.check(A.load_schedule(tmp_path / "sched.json")).passed  # the graph rebuilt from the model file


def test_a_schedule_refuses_a_changed_or_missing_model_file(tmp_path):
    graph = from_torch(tm.MLP((6, 5, 3)).double().eval(), (torch.rand(2, 6, dtype=torch.float64),))
    save_graph(graph, tmp_path / "mlp.json")
    sched = A.compile(A.training_graph(load_model(tmp_path / "mlp.json")), A.load_hw("groq_like"))
    A.save_schedule(sched, tmp_path / "sched.json")
    text = (tmp_path / "mlp.json").read_text()
    (tmp_path / "mlp.json").write_text(text.replace('"seed":0', '"seed":1'))
    with pytest.raises(A.ScheduleError, match=r"mlp\.json has changed since the schedule was compiled"):
        A.simulate(A.load_schedule(tmp_path / "sched.json"))
    (tmp_path / "mlp.json").unlink()
    with pytest.raises(A.ScheduleError, match=r"mlp\.json, which is gone"):
        A.check(A.load_schedule(tmp_path / "sched.json"))


def test_a_schedule_file_with_a_malformed_model_file_source_is_refused(net_file, tmp_path):
    _, path = net_file
    sched = A.compile(A.training_graph(load_model(path)), A.load_hw("groq_like"))
    A.save_schedule(sched, tmp_path / "sched.json")
    data = json.loads((tmp_path / "sched.json").read_text())
    data["source"]["options"]["sha256"] = "not-a-hash"
    (tmp_path / "sched.json").write_text(json.dumps(data))
    with pytest.raises(A.ScheduleError, match="sha256 must be 64 lowercase hex digits"):
        A.load_schedule(tmp_path / "sched.json")


def test_unsupported_ops_are_all_named_in_one_error():
    with pytest.raises(FrontendError) as e:
        from_torch(tm.Unsupported().double(), (torch.rand(4, 8, dtype=torch.float64),))
    msg = str(e.value)
    assert "\n" not in msg and "3 ATen op(s) cannot be imported" in msg
    assert "aten.cumsum.default (no accelsim decomposition) x2 (first: node 'cumsum')" in msg
    assert "aten.sort.default (no accelsim decomposition) x1" in msg
    assert "aten.atan.default (no accelsim decomposition) x1" in msg


def test_loss_heads():
    mlp, x = tm.MLP((6, 5, 3)).double().eval(), torch.rand(2, 6, dtype=torch.float64)
    none = from_torch(mlp, (x,), loss="none")
    assert none.loss is None and list(none.outputs) == ["y"]
    with pytest.raises(A.GraphError, match="has no loss"):
        A.training_graph(none)
    scalar = from_torch(torch.nn.Sequential(mlp, tm.Mean()), (x,), loss="output")
    assert scalar.nodes[scalar.loss].op == "mean"
    with pytest.raises(FrontendError, match="loss='output' needs the module to return a scalar"):
        from_torch(mlp, (x,), loss="output")
    with pytest.raises(FrontendError, match="loss must be one of"):
        from_torch(mlp, (x,), loss="hinge")


def test_pt2_file_imports_through_the_cli_command_and_load_model(tmp_path, capsys):
    from accelsim.cli import import_cmd

    net = tm.MLP((6, 5, 3)).double().eval()
    torch.export.save(torch.export.export(net, (torch.rand(2, 6, dtype=torch.float64),)), tmp_path / "mlp.pt2")
    parser = argparse.ArgumentParser()
    import_cmd.register(parser.add_subparsers())
    args = parser.parse_args(["import", str(tmp_path / "mlp.pt2"), "-o", str(tmp_path / "mlp.json"),
                              "--loss", "cross_entropy"])
    assert args.fn(args) == 0
    assert "wrote" in capsys.readouterr().out
    from_json, from_pt2 = load_model(tmp_path / "mlp.json"), load_model(tmp_path / "mlp.pt2", loss="cross_entropy")
    assert graph_hash(from_json) == graph_hash(from_pt2)
    assert from_pt2.source.options_dict()["loss"] == "cross_entropy"
    with pytest.raises(FrontendError, match="unknown model file suffix '.txt'"):
        load_model(tmp_path / "mlp.txt")


def test_cli_refuses_an_output_that_is_not_json(tmp_path):
    from accelsim.cli import import_cmd

    parser = argparse.ArgumentParser()
    import_cmd.register(parser.add_subparsers())
    args = parser.parse_args(["import", "m.pt2", "-o", str(tmp_path / "m.yaml")])
    with pytest.raises(A.AccelsimError, match="a graph file is JSON"):
        args.fn(args)


def test_import_accelsim_does_not_import_torch():
    code = "import sys, accelsim, accelsim.frontends, accelsim.cli.import_cmd; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_from_torch_without_torch_says_which_extra_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` now raises ImportError
    with pytest.raises(FrontendError, match=r"pip install 'accelsim\[torch\]'"):
        from_torch(object(), ())


# ---- hostile graph files: each gets a one-paragraph FrontendError naming the file and what was expected --------

def _node(data, name):
    return next(n for n in data["nodes"] if n["name"] == name)


def _set(data, name, key, value):
    _node(data, name)[key] = value


def _set_attr(data, name, key, value):
    _node(data, name)["attrs"] = [[k, value if k == key else v] for k, v in _node(data, name)["attrs"]]


HOSTILE = {
    "unknown op": (lambda d: _set(d, "relu12", "op", "frobnicate"), "unknown op 'frobnicate'"),
    "wrong shape": (lambda d: _set(d, "relu12", "shape", [1, 64, 8, 9]), "building it gives"),
    "cycle": (lambda d: _set(d, "conv2d9", "inputs", [8, 20]), "are not earlier nodes"),
    "self loop": (lambda d: _set(d, "relu12", "inputs", [12]), "are not earlier nodes"),
    "missing node key": (lambda d: _node(d, "relu12").pop("phase"), "missing key(s) phase"),
    "missing top key": (lambda d: d.pop("outputs"), "missing key(s) outputs"),
    "unknown key": (lambda d: d.update(extra=1), "unknown key(s) extra"),
    "wrong type": (lambda d: _set(d, "relu12", "inputs", "11"), "inputs must be a list"),
    "bool as int": (lambda d: _set(d, "relu12", "rank", True), "rank must be an integer"),
    "id out of place": (lambda d: _set(d, "relu12", "id", 3), "must equal its position 12"),
    "huge dimension": (lambda d: _set(d, "x", "shape", [2**62, 1]), "must be at most 16 integers"),
    "huge tensor": (lambda d: _set(d, "x", "shape", [2**20, 2**20]), "above the limit"),
    "negative dim": (lambda d: _set(d, "x", "shape", [1, -1, 8, 8]), "must be at most 16 integers"),
    "bad attr type": (lambda d: _set_attr(d, "conv2d9", "stride", "1"), "attribute 'stride': expected a pair"),
    "bad init arg": (lambda d: _node(d, "x")["attrs"].append(["std", "big"]),
                     "attribute 'std': expected a finite number"),
    "duplicate attr": (lambda d: _node(d, "conv2d9")["attrs"].append(["groups", 1]), "'groups' appears twice"),
    "bad dtype": (lambda d: _set(d, "x", "dtype", "float16"), "expected a dtype in"),
    "leaf with inputs": (lambda d: _set(d, "target", "inputs", [0]), "a leaf node has no inputs"),
    "output out of range": (lambda d: d.update(outputs=[["y", 999], ["loss", d["loss"]]]), "not a node id"),
    "non-scalar loss": (lambda d: d.update(loss=24, outputs=[["y", 24], ["loss", 24]]), "loss must be a scalar"),
    "version": (lambda d: d.update(version=2), "expected format 'accelsim.graph', version 1"),
    "duplicate leaf name": (lambda d: _set(d, "target", "name", "x"), "name 'x' is already used"),
    "bad optimizer": (lambda d: d.update(optimizer={"optimizer": "sgd", "lr": -1.0}), "learning rate lr=-1.0"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_graph_file_is_refused_in_one_paragraph(net_file, tmp_path, case):
    _, path = net_file
    data = json.loads(path.read_text())
    mutate, expected = HOSTILE[case]
    mutate(data)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    with pytest.raises(FrontendError) as e:
        load_graph(bad)
    msg = str(e.value)
    assert msg.startswith(str(bad)) and expected in msg and "\n" not in msg, msg


RAW = {
    "not json": (b"{nodes: [", "not valid JSON"),
    "NaN": (None, "NaN is not a number a graph file may hold"),
    "not utf-8": (b"\xff\xfe{}", "not a UTF-8 text file"),
    "top-level list": (b"[1, 2]", "the graph file must be a JSON object"),
    "duplicate key": (b'{"version": 1, "version": 1}', "'version' appears twice"),
    "too big": (b" " * (8 * 2**20 + 1), "larger than the 8,388,608 bytes"),
    "deep nesting": (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
}


@pytest.mark.parametrize("case", sorted(RAW))
def test_hostile_graph_file_bytes_are_refused_in_one_paragraph(net_file, tmp_path, case):
    raw, expected = RAW[case]
    if raw is None:
        raw = net_file[1].read_bytes().replace(b'["std",', b'["std",NaN],["x",', 1)
        assert b"NaN" in raw
    bad = tmp_path / "bad.json"
    bad.write_bytes(raw)
    with pytest.raises(FrontendError) as e:
        load_model(bad)
    msg = str(e.value)
    assert msg.startswith(str(bad)) and expected in msg and "\n" not in msg, msg


def test_a_missing_graph_file_is_named(tmp_path):
    with pytest.raises(FrontendError, match="no such model file"):
        load_model(tmp_path / "absent.json")


def test_saving_a_graph_with_a_nan_constant_is_refused(tmp_path):
    g = A.models.build("regression")
    g.output("nan", g.const(np.nan) * g.var(0))
    with pytest.raises(FrontendError, match="NaN is not a value a graph file holds"):
        save_graph(g, tmp_path / "g.json")
