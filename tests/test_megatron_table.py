"""experiments/megatron_table.py's rows are the paper's configurations: each divides into whole replicas,
micro-batches and virtual stages, and its preset is the model of its row."""
import importlib.util
import sys
from pathlib import Path

import pytest

import accelsim as A
from accelsim.models.transformer import GPT2_SIZES, gpt2_param_count

PATH = Path(__file__).resolve().parent.parent / "experiments" / "megatron_table.py"


@pytest.fixture(scope="module")
def table():
    spec = importlib.util.spec_from_file_location("megatron_table", PATH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


def test_every_row_divides_into_whole_replicas_microbatches_and_virtual_stages(table):
    for row in table.ROWS:
        assert row.t * row.p * row.d == row.gpus, row.name
        assert row.microbatches * row.micro_batch * row.d == row.global_batch, row.name
        if row.layers_per_virtual_stage is not None:
            assert row.v * row.p * row.layers_per_virtual_stage == row.layers, row.name
            assert row.v > 1, row.name


def test_each_table_row_builds_the_model_its_name_gives():
    """Table 1's parameter counts (billions, one decimal) from the zoo preset at vocabulary 51,200, seq 2048."""
    for name, size in (("1.7B", "megatron-1.7b"), ("18.4B", "megatron-18.4b"), ("145.6B", "megatron-145.6b")):
        billions = gpt2_param_count(size, seq=2048, vocab=51200) / 1e9
        assert f"{billions:.1f}B" == name
    assert GPT2_SIZES["megatron-1t"]["layers"] == 128


def test_the_default_rows_are_table_rows(table):
    assert set(table.DEFAULT_ROWS) <= {r.name for r in table.ROWS}


def test_the_tensor_parallel_rows_run_whole_from_layer_templates_and_the_fused_row_from_its_graph(table):
    """Rows with t > 1 take the layer-template path (their graph passes do not apply, so nothing is lost by
    never building them whole); the 1.7B row (t = 1) is fused and needs its whole graph."""
    for row in table.ROWS:
        assert table.templated(row, row.layers) == (row.t > 1), row.name
        assert not table.templated(row, row.layers - 1), row.name


def test_a_templated_row_has_the_recipe_of_its_own_model(table):
    """The recipe a templated row compiles names the row's preset, tensor parallelism, micro-batch and all its
    layers, rematerialized per layer as Megatron's full recomputation, with Adam."""
    assert table.REMAT == "full:1"
    row = next(r for r in table.ROWS if r.name == "GPT-3 175B")
    opts = {k: v for k, v in table.model_options(row, row.layers).items() if k != "limits"}
    found = table.recipe("gpt2", opts, {"optimizer": "adam"}, table.REMAT)
    assert found.layers == 96 and found.remat == "full:1" and dict(found.optimizer) == {"optimizer": "adam"}
    assert dict(found.model_options) == {"size": "gpt3-175b", "batch": 1, "vocab": 51_200, "seq": 2048,
                                         "tensor_parallel": 8}


def test_the_serial_gradient_allreduce_is_a_ring_over_the_replicas_nics(table):
    """The DP-tail column: one stage's gradients all-reduced over d replicas, one per node (t = 8 fills a node),
    as a ring over their HDR NICs: 2 (d-1)/d of the bytes at the scale-out rate, plus its steps' latencies; no
    replicas, no tail."""
    from types import SimpleNamespace

    hw = A.load_hw("a100_x64")
    nbytes = 1 << 30
    stage = SimpleNamespace(chips=tuple(range(8)), gradient_bytes=nbytes)
    step = SimpleNamespace(work=SimpleNamespace(stages=(stage,)))
    row = table.Row("x", "megatron-1.7b", 8, 1, 1, 8, 64, None, 100)
    assert row.d == 8
    cycles = table.serial_gradient_allreduce_cycles(step, hw, row)
    rate = hw.interconnect.scale_out.bytes_per_cycle(hw.clock_hz)
    assert 2 * 7 / 8 * nbytes / rate <= cycles <= 2 * 7 / 8 * nbytes / rate * 1.01
    one = table.Row("x", "megatron-1.7b", 8, 1, 1, 8, 8, None, 100)
    assert table.serial_gradient_allreduce_cycles(step, hw, one) == 0


@pytest.mark.parametrize("given, expected", [((), "after-backward"), (("overlap",), "overlap")])
def test_every_row_reduces_gradients_after_the_backward_pass_as_the_papers_code_did(table, monkeypatch, given,
                                                                                    expected):
    """The paper's Megatron-LM all-reduces gradients after forward_backward_func (REDUCTION); the table compiles
    every row so unless told otherwise (compile_row stopped at once: the options are what is checked)."""
    seen = []

    def refuse(row, layers, hw, options):
        seen.append(options["gradient_reduction"])
        raise A.AccelsimError("stopped here")

    monkeypatch.setattr(table, "compile_row", refuse)
    line = table.run(table.ROWS[0], 8, False, table.REMAT, *given)
    assert "stopped here" in line and seen and set(seen) == {expected}
