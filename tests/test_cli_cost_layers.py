"""`accelsim cost --model`: every node is shown with the layer a user knows it by, not only its node id."""
import json

from accelsim import models
from accelsim.cli import main
from accelsim.training import training_graph
from accelsim.layer_names import layer_names


def test_cost_table_and_json_name_each_node_by_its_layer(tmp_path, capsys):
    path = tmp_path / "cost.json"
    argv = ["cost", "--hw", "groq_like", "--model", "mlp", "--set", "batch=2", "--set", "sizes=8,4,2", "--json", str(path)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "layer" in out.splitlines()[2] and "fc1" in out and "fc2" in out
    nodes = json.loads(path.read_text())["nodes"]
    step = training_graph(models.build("mlp", batch=2, sizes=(8, 4, 2)), optimizer="sgd", lr=0.01)
    names = layer_names(step)
    assert [n["layer"] for n in nodes] == [names[n["node"]] for n in nodes]
    assert {n["layer"] for n in nodes if n["op"] == "matmul"} == {"fc1", "fc2"}


def test_one_gemm_prints_its_energy_under_a_label_without_a_unit_it_does_not_use(tmp_path, capsys):
    path = tmp_path / "gemm.json"
    assert main(["cost", "--hw", "tpu_v1_like", "--gemm", "64,64,64", "--json", str(path)]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("energy"))
    assert line.split()[0] == "energy" and line.endswith("J")  # e.g. "energy  29.5 nJ", not "energy_pj  29.5 nJ"
    assert json.loads(path.read_text())["energy_pj"] > 0  # the JSON keeps its key and raw pJ
