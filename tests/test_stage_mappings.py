"""Mappings given per layer (StepOptions.mapping, --mapping) at stage granularity: the step's measurement runs each
layer with the mapping the user gave it, as a task-level compile does, and the StageStep records the mappings it
measured; layer templates (compiler/hierarchy/template_mappings.py) carry each entry to the node that stands for
its node and refuse copies of a repeated layer given different mappings."""
from __future__ import annotations

import pytest

import accelsim as A
from accelsim.cli import main
from accelsim.compiler.hierarchy.layer_templates import FIRST, MIDDLE, recipe, roles_of
from accelsim.compiler.hierarchy.template_mappings import layer_nodes, mappings_by_place, template_entries
from accelsim.mapping.errors import MappingSpecError
from accelsim.schedule.levels import chip_list
from accelsim.schedule.mapping_file import mapping_entries, read_mapping_file

SEARCH = {"chips.0.units.tensor_core.mapping": "search", "chips.0.units.tensor_core.dataflows": ["ws", "os", "is"],
          "chips.0.gpu_gemm": None, "chips.0.gpu_overheads": None}
"""a100_x8's Tensor Cores searching their mappings. A GPU's GEMM library tiles a GEMM its own way whatever the
mapping (cost/gpu_gemm.py), and its kernel launches floor a small step's kernels: both off, so that a mapping
sets its layer's time."""
GPT2_2 = {"layers": 2, "batch": 1, "seq": 64, "d_model": 64, "heads": 2, "vocab": 64}
"""gpt2-2's structure (embeddings, two blocks, tied head) at small widths."""
STEP = {"pipeline_stages": 2, "microbatches": 4, "data_parallel": 1, "tensor_parallel": 1, "effort": "fast",
        "split": False}
SLOW = {"tensor_core": {"dataflow": "os", "stream": {"K": 1}}}
"""One reduction element per fold: every fold fills and drains the array for a single MAC per PE."""


@pytest.fixture(scope="module")
def hw():
    return A.load_hw("a100_x8", SEARCH)


@pytest.fixture(scope="module")
def gpt2():
    return A.training_graph(A.models.build("gpt2", **GPT2_2), optimizer="adam")


def _mlp_matmuls(graph: A.Graph, layers: range) -> list[str]:
    """The names of the matmuls reading layer i's MLP weights (forward, and the input gradient), each i in `layers`."""
    weights = {f"h{i}.{w}.w" for i in layers for w in ("fc", "mlp_proj")}
    return [n.name for n in graph.nodes if n.op == "matmul" and any(graph.nodes[x].name in weights for x in n.inputs)]


def test_a_slower_mapping_slows_the_stage_level_step_as_much_as_the_task_level_one(hw, gpt2):
    mapping = {"mappings": {name: SLOW for name in _mlp_matmuls(gpt2, range(2))}}
    task = [A.compile(gpt2, hw, granularity="task", mapping=m, validate=False, **STEP).makespan_cycles
            for m in (None, mapping)]
    stage_steps = [A.compile(gpt2, hw, granularity="stage", mapping=m, **STEP) for m in (None, mapping)]
    stage = [s.makespan_cycles for s in stage_steps]
    task_ratio, stage_ratio = task[1] / task[0], stage[1] / stage[0]
    assert task_ratio > 1.1 and stage_ratio > 1.1  # the same direction, and well above either level's noise
    assert stage_ratio / task_ratio == pytest.approx(1, abs=0.03)  # by about the same ratio
    plain, mapped = stage_steps
    assert mapped.options.mapping is None  # as a Schedule: the mappings measured are recorded, not the request
    chosen = {m.layer: m for m in mapped.mappings}
    assert all(chosen[name].stream == (("K", 1),) for name in mapping["mappings"])
    assert {m.layer: m for m in plain.mappings}.keys() == chosen.keys()
    assert mapped.to_dict()["mappings"] == [m.model_dump(mode="json") for m in mapped.mappings]


@pytest.mark.parametrize("granularity", ["task", "stage"])
def test_a_mapping_naming_a_layer_the_model_lacks_is_refused_at_either_granularity(hw, gpt2, granularity):
    with pytest.raises(MappingSpecError, match=r"mapping entry 0 \(layer 'matmul9999', unit 'tensor_core'\): "
                                               r"graph '.*' has no layer 'matmul9999'"):
        A.compile(gpt2, hw, granularity=granularity, mapping={"mappings": {"matmul9999": SLOW}}, **STEP)


def test_the_cli_compiles_a_stage_step_with_a_mapping_file_and_writes_what_it_measured(tmp_path, capsys):
    """`run --granularity stage --mapping` was refused; the step's mappings now round-trip through --mapping-out."""
    given = tmp_path / "given.yaml"
    given.write_text("mappings:\n  matmul3:\n    mxu: {dataflow: os}\n")
    flags = ["run", "--hw", "tpu_v1_like", "--hw-set", "chips.0.units.mxu.mapping=search", "--hw-set",
             "chips.0.units.mxu.dataflows=[ws,os,is]", "--hw-set", "chips.0.units.mxu.array.rows=16", "--hw-set",
             "chips.0.units.mxu.array.cols=16", "--model", "mlp", "--batch", "4", "--set", "sizes=16,8,4",
             "--granularity", "stage", "--no-sim"]
    out = tmp_path / "out.yaml"
    assert main([*flags, "--mapping", str(given), "--mapping-out", str(out)]) == 0
    written = {e.layer: e for e in read_mapping_file(out)}
    assert written["matmul3"].dataflow == "os" and written["matmul3"].complete
    assert main([*flags, "--mapping", str(tmp_path / "typo.yaml")]) != 0  # a missing file: refused, not ignored
    given.write_text("mappings:\n  matmul1010:\n    mxu: {dataflow: os}\n")
    assert main([*flags, "--mapping", str(given)]) != 0
    assert "has no layer 'matmul1010'" in capsys.readouterr().err


# layer templates: an entry by its node's place in its layer (template_mappings.py), built graphs only

TEMPLATED = {"layers": 5, "batch": 1, "seq": 8, "d_model": 16, "heads": 2, "vocab": 32}


@pytest.fixture(scope="module")
def templated():
    r = recipe("gpt2", TEMPLATED, {"optimizer": "adam"}, None)
    return r, r.build(r.layers), r.build(3)


def _entries(names: dict[str, dict]) -> tuple:
    return mapping_entries({"mappings": names}, "mapping")


def test_copies_of_a_repeated_layer_given_one_mapping_are_measured_with_it_on_every_template_copy(hw, templated):
    r, step, small = templated
    names, _ = layer_nodes(step)
    mlp = _mlp_matmuls(step, range(1, r.layers - 1))  # the middle blocks' two MLP matmuls, each
    first = _mlp_matmuls(step, range(1))
    given = {name: SLOW for name in mlp} | {first[0]: {"tensor_core": {"dataflow": "ws"}}}
    by_place = mappings_by_place(step, roles_of(r, names, r.layers), _entries(given), chip_list(hw))
    small_roles = roles_of(r, layer_nodes(small)[0], 3)
    assert small_roles.count(FIRST) == 1 and small_roles.count(MIDDLE) == 1
    carried = {e.layer: e for e in template_entries(small, small_roles, by_place)}
    want = _mlp_matmuls(small, range(1, 2))
    assert sorted(carried) == sorted([*want, _mlp_matmuls(small, range(1))[0]])
    assert all(carried[name].stream == (("K", 1),) for name in want)
    assert carried[_mlp_matmuls(small, range(1))[0]].dataflow == "ws"


def test_copies_of_a_repeated_layer_given_different_mappings_are_refused_naming_both(hw, templated):
    r, step, _ = templated
    names, _ = layer_nodes(step)
    h1, h2 = _mlp_matmuls(step, range(1, 2))[0], _mlp_matmuls(step, range(2, 3))[0]
    for given, other in [({h1: SLOW}, "none (searched)"),
                         ({h1: SLOW, h2: {"tensor_core": {"dataflow": "ws"}}}, "'dataflow': 'ws'")]:
        with pytest.raises(MappingSpecError) as e:
            mappings_by_place(step, roles_of(r, names, r.layers), _entries(given), chip_list(hw))
        msg = str(e.value)
        assert f"{h1!r} (layer h1) and {h2!r} (layer h2) are copies" in msg and other in msg
        assert "--granularity task" in msg
