"""One StepOptions record for every place a step is described: compile's options and keyword arguments, the
schedule's record, the CLI's flags and a sweep's options, each spelled from the same fields."""
import argparse
import json

import pytest

import accelsim as A
from accelsim.cli.step_flags import FLAGS, add_step_flags, flag_name, step_options
from accelsim.compiler import compile
from accelsim.dse.spec import RunOptions
from accelsim.models.sizes import SMALL
from accelsim.schedule.options import StepOptions


def _mlp_step() -> A.Graph:
    return A.training_graph(A.models.build("mlp", **SMALL["mlp"]), optimizer="sgd", lr=0.01)


def test_every_step_option_has_exactly_one_cli_flag_and_sweep_option():
    """A new field without a flag, or a flag without a field, fails here (the one table, cli/step_flags.py)."""
    assert list(FLAGS) == list(StepOptions.model_fields)
    assert set(StepOptions.model_fields) <= set(RunOptions.model_fields)


def test_flags_parse_into_the_options_the_library_takes():
    parser = argparse.ArgumentParser()
    add_step_flags(parser, tuple(FLAGS))
    args = parser.parse_args(["--microbatches", "4", "--data-parallel", "2", "--max-in-flight", "2", "--split", "off",
                              "--zero", "1", "--remat", "every:2", "--exact", "3"])
    assert step_options(args) == StepOptions(microbatches=4, data_parallel=2, max_in_flight=2, split=False, zero=1,
                                             remat="every:2", exact=3.0)
    assert step_options(parser.parse_args([])) == StepOptions()
    assert all(flag_name(name) in parser.format_help() for name in FLAGS)


def test_compile_takes_options_or_their_fields_as_keywords_with_the_same_result():
    g, hw = _mlp_step(), A.load_hw("groq_like")
    by_record = compile(g, hw, StepOptions(microbatches=2, split=False))
    by_keywords = compile(g, hw, microbatches=2, split=False)
    assert by_record.model_dump_json() == by_keywords.model_dump_json()
    changed = compile(g, hw, StepOptions(microbatches=2), split=False)  # keywords change the record
    assert changed.model_dump_json() == by_record.model_dump_json()


@pytest.mark.parametrize("kwargs,expected", [
    ({"micro_batches": 2}, "unknown step option(s) 'micro_batches'"),
    ({"microbatches": 0}, "microbatches must be >= 1"),
    ({"zero": 4}, "zero must be one of"),
    ({"split": "maybe"}, "split must be True, False or None"),
    ({"remat": "often"}, "rematerialize"),
    ({"exact": float("nan")}, "exact must be"),
])
def test_bad_options_are_refused_in_one_paragraph_naming_the_option(kwargs, expected):
    with pytest.raises(A.AccelsimError, match=expected.replace("(", r"\(").replace(")", r"\)")) as e:
        compile(_mlp_step(), "groq_like", **kwargs)
    assert "\n" not in str(e.value) and "Traceback" not in str(e.value)


def test_options_must_be_a_step_options_record():
    with pytest.raises(A.AccelsimError, match="options must be an accelsim StepOptions, got dict"):
        compile(_mlp_step(), "groq_like", {"microbatches": 2})


def test_compile_rematerializes_a_training_step_when_the_options_say_so():
    g, hw = _mlp_step(), A.load_hw("groq_like")
    sched = compile(g, hw, remat="every:1")
    assert sched.options.remat == "every:1"
    assert [p.name for p in sched.source.passes] == ["rematerialize"]
    again = compile(A.rematerialize(g, "every:1"), hw, remat="every:1")  # applied once, not twice
    assert again.model_dump_json() == sched.model_dump_json()
    assert A.simulate(sched).makespan_cycles == sched.makespan_cycles  # the schedule rebuilds its own graph


def test_a_schedule_records_the_options_and_leaves_later_fields_out_at_their_defaults():
    sched = compile(_mlp_step(), "groq_like", microbatches=2, split=False)
    recorded = json.loads(sched.model_dump_json())["options"]
    assert recorded == {"microbatches": 2, "data_parallel": 1, "pipeline_stages": 1, "max_in_flight":
                        sched.options.max_in_flight, "split": False}
    assert StepOptions.model_validate(recorded) == sched.options


def test_a_sweep_varies_zero_remat_and_tensor_parallel_end_to_end():
    """Options a sweep could not vary before StepOptions was one record (refused as unknown options)."""
    spec = {"name": "step_options", "hw": "groq_like_x4", "model": "transformer_block",
            "model_options": dict(SMALL["transformer_block"]),
            "options": {"data_parallel": 2, "split": "off", "optimizer": "adam"},
            "parameters": {"options.zero": [0, 1], "options.remat": ["none", "every:1"],
                           "options.tensor_parallel": [1, 2]},
            "metrics": ["makespan_cycles", "peak_memory_bytes", "tasks"]}
    df = A.sweep(spec)
    assert len(df) == 8 and (df["error"] == "").all(), df["error"].tolist()
    assert df["feasible"].all()
    by = {(r["options.zero"], r["options.remat"], r["options.tensor_parallel"]): r for _, r in df.iterrows()}
    # ranks split the layer's work: more tasks (each rank's, plus all-reduces) and another step time
    assert by[(0, "none", 2)]["tasks"] > by[(0, "none", 1)]["tasks"]
    # recomputation adds forward work to the backward pass
    assert by[(0, "every:1", 1)]["tasks"] > by[(0, "none", 1)]["tasks"]
    # ZeRO-1 shards Adam's state over the two replicas: less memory at its peak on a chip
    assert by[(1, "none", 1)]["peak_memory_bytes"] < by[(0, "none", 1)]["peak_memory_bytes"]
