"""The Python API given wrong types and values: the obvious forms work (a bundled hardware name, a dict), and
everything else raises AccelsimError naming the argument; never an AttributeError, TypeError or a pydantic
ValidationError."""
from __future__ import annotations

import math
from pathlib import Path

import pytest
import yaml

import accelsim as A

pytestmark = pytest.mark.timeout(300)  # a hang guard, not a speed limit: see tests/conftest.py

REPO = Path(__file__).resolve().parents[2]
GROQ_DICT = yaml.safe_load((REPO / "hwconfigs" / "groq_like.yaml").read_text())


@pytest.fixture(scope="module")
def fwd():
    return A.models.build("mlp", batch=2, sizes=(16, 8, 4))


@pytest.fixture(scope="module")
def train(fwd):
    return A.training_graph(fwd, optimizer="sgd", lr=0.01)


@pytest.fixture(scope="module")
def groq():
    return A.load_hw("groq_like")


@pytest.fixture(scope="module")
def schedule(train, groq):
    return A.compile(train, groq)


# -- the obvious forms work ---------------------------------------------------------------------------------
def test_compile_accepts_a_bundled_hw_name(train, groq):
    sched = A.compile(train, "groq_like")
    A.validate_schedule(sched, train, groq)
    assert sched.hw_name == "groq_like"


def test_compile_accepts_a_hw_path(train, groq):
    sched = A.compile(train, str(REPO / "hwconfigs" / "groq_like.yaml"))
    A.validate_schedule(sched, train, groq)


def test_compile_accepts_a_hw_dict_or_refuses_it_cleanly(train, hostile):
    hostile.ok_or_refuses(lambda: A.compile(train, dict(GROQ_DICT)), "hw")


def test_load_hw_accepts_a_dict(groq):
    hw = A.load_hw(dict(GROQ_DICT))
    assert hw.name == "groq_like" and hw.clock_hz == groq.clock_hz


def test_load_hw_accepts_a_path_object(groq):
    assert A.load_hw(REPO / "hwconfigs" / "groq_like.yaml").name == "groq_like"


def test_load_hw_of_a_hwspec_returns_it_or_refuses_cleanly(groq, hostile):
    hostile.ok_or_refuses(lambda: A.load_hw(groq), "hw")


def test_simulate_with_bundled_name_or_no_hw_works_or_refuses_cleanly(schedule, hostile):
    hostile.ok_or_refuses(lambda: A.simulate(schedule, "groq_like"), "hw")
    hostile.ok_or_refuses(lambda: A.simulate(schedule), "hw")


# -- wrong values and types are the project's error ---------------------------------------------------------
MB = ("microbatches",)
DP = ("data_parallel",)
PS = ("pipeline_stages",)

COMPILE_OPTIONS = {
    "microbatches_2.5": (dict(microbatches=2.5), MB),
    "microbatches_2.0": (dict(microbatches=2.0), MB),
    "microbatches_string": (dict(microbatches="2"), MB),
    "microbatches_true": (dict(microbatches=True), MB),
    "microbatches_none": (dict(microbatches=None), MB),
    "microbatches_zero": (dict(microbatches=0), MB),
    "microbatches_negative": (dict(microbatches=-1), MB),
    "microbatches_nan": (dict(microbatches=math.nan), MB),
    "microbatches_inf": (dict(microbatches=math.inf), MB),
    "data_parallel_zero": (dict(data_parallel=0), DP),
    "data_parallel_2.0": (dict(data_parallel=2.0), DP),
    "data_parallel_list": (dict(data_parallel=[2]), DP),
    "pipeline_stages_zero": (dict(pipeline_stages=0), PS),
    "pipeline_stages_more_than_chips": (dict(pipeline_stages=5), PS),
    "pipeline_stages_string": (dict(pipeline_stages="two"), PS),
    "max_in_flight_zero": (dict(max_in_flight=0), ("max_in_flight",)),
    "max_in_flight_fraction": (dict(max_in_flight=1.5), ("max_in_flight",)),
}


@pytest.mark.parametrize("case", sorted(COMPILE_OPTIONS))
def test_compile_refuses_bad_option(case, train, groq, hostile):
    kwargs, words = COMPILE_OPTIONS[case]
    hostile.refuses(lambda: A.compile(train, groq, **kwargs), *words)


@pytest.mark.parametrize("graph, words", [(None, "graph"), (42, "graph"), ("mlp", "graph")],
                         ids=["none", "int", "model_name"])
def test_compile_refuses_what_is_not_a_graph(graph, words, groq, hostile):
    hostile.refuses(lambda: A.compile(graph, groq), words)


@pytest.mark.parametrize("hw, words", [(None, ("hw", "hardware")), (42, ("hw", "hardware")),
                                       ("nope_hw", "nope_hw"), ("", ("hw", "hardware", "''")),
                                       ([1, 2], ("hw", "hardware"))],
                         ids=["none", "int", "unknown_name", "empty_string", "list"])
def test_compile_refuses_what_is_not_hardware(hw, words, train, hostile):
    hostile.refuses(lambda: A.compile(train, hw), words)


def test_compile_refuses_an_unphysical_hw_dict(train, hostile):
    bad = {**GROQ_DICT, "clock_hz": math.inf}
    hostile.refuses(lambda: A.compile(train, bad), "clock_hz")


LOAD_HW = {
    "none": (None, ("hw", "hardware", "none")),
    "int": (42, ("hw", "hardware", "42")),
    "list": (["groq_like"], ("hw", "hardware", "list")),
    "empty_string": ("", ("hw", "hardware", "''")),
    "empty_dict": ({}, ("name", "clock_hz")),
    "dict_missing_chips": ({"name": "x", "clock_hz": "1 GHz"}, ("chips",)),
    "dict_inf_clock": ({**GROQ_DICT, "clock_hz": math.inf}, ("clock_hz",)),
    "dict_nan_clock": ({**GROQ_DICT, "clock_hz": math.nan}, ("clock_hz",)),
    "dict_unit_named_link": ({**GROQ_DICT, "chips": [{**GROQ_DICT["chips"][0], "units": [
        {**GROQ_DICT["chips"][0]["units"][0], "name": "link:0->1"}, *GROQ_DICT["chips"][0]["units"][1:]]}]},
        ("link:0->1",)),
    "dict_unit_count_10e7": ({**GROQ_DICT, "chips": [{**GROQ_DICT["chips"][0], "units": [
        {**GROQ_DICT["chips"][0]["units"][0], "count": 10**7}, *GROQ_DICT["chips"][0]["units"][1:]]}]},
        ("count",)),
    "dict_non_string_keys": ({1: 2}, ("1", "name")),
    "unknown_name": ("no_such_machine", ("no_such_machine",)),
    "bytes": (b"groq_like", ("hw", "hardware", "bytes")),
}


@pytest.mark.parametrize("case", sorted(LOAD_HW))
def test_load_hw_refuses_what_is_not_a_description(case, hostile):
    arg, words = LOAD_HW[case]
    if case == "bytes":  # bytes of a name are arguably a name: accepted, or refused cleanly
        hostile.ok_or_refuses(lambda: A.load_hw(arg), words)
    else:
        hostile.refuses(lambda: A.load_hw(arg), words)


def test_load_hw_refuses_a_directory(hostile):
    hostile.refuses(lambda: A.load_hw(hostile.tmp), str(hostile.tmp))


def test_simulate_refuses_other_hardware(schedule, hostile):
    """Issue 10: `A.simulate(schedule, other_hw)` refuses the mismatch as the CLI does."""
    hostile.refuses(lambda: A.simulate(schedule, A.load_hw("tpu_v1_like")), "tpu_v1_like")


def test_simulate_refuses_other_hardware_of_the_same_chip(schedule, hostile):
    hostile.refuses(lambda: A.simulate(schedule, A.load_hw("groq_like_x4")), "groq_like_x4")


def test_simulate_refuses_a_schedule_compiled_for_a_modified_hw(schedule, hostile):
    other = A.load_hw({**GROQ_DICT, "clock_hz": "1 GHz"})  # same name, other machine
    hostile.refuses(lambda: A.simulate(schedule, other), ("hash", "hardware", "compiled for"))


@pytest.mark.parametrize("what", [None, 42, "no_such_file.json", {"tasks": []}], ids=["none", "int", "path", "dict"])
def test_simulate_refuses_what_is_not_a_schedule(what, groq, hostile):
    hostile.refuses(lambda: A.simulate(what, groq), ("schedule", "no_such_file.json"))


def test_simulate_refuses_unknown_mode(schedule, groq, hostile):
    hostile.refuses(lambda: A.simulate(schedule, groq, mode="warp"), "mode")


def test_validate_schedule_refuses_other_hw(schedule, train, hostile):
    hostile.refuses(lambda: A.validate_schedule(schedule, train, A.load_hw("tpu_v1_like")), "tpu_v1_like")


def test_validate_schedule_refuses_other_graph(schedule, groq, hostile):
    other = A.training_graph(A.models.build("mlp", batch=2, sizes=(16, 8, 5)))
    hostile.refuses(lambda: A.validate_schedule(schedule, other, groq), "graph")


def test_validate_schedule_refuses_what_is_not_a_schedule(train, groq, hostile):
    hostile.refuses(lambda: A.validate_schedule(None, train, groq), "schedule")
    hostile.refuses(lambda: A.validate_schedule("x.json", train, groq), "schedule")


TRAINING = {
    "optimizer_unknown": (dict(optimizer="lion"), ("optimizer",)),
    "optimizer_none": (dict(optimizer=None), ("optimizer",)),
    "lr_nan": (dict(lr=math.nan), (("lr", "learning rate"),)),
    "lr_inf": (dict(lr=math.inf), (("lr", "learning rate"),)),
    "lr_negative": (dict(lr=-0.1), (("lr", "learning rate"),)),
    "lr_zero": (dict(lr=0.0), (("lr", "learning rate"),)),
    "lr_string": (dict(lr="0.1"), (("lr", "learning rate"),)),
    "momentum_nan": (dict(optimizer="momentum", momentum=math.nan), ("momentum",)),
    "beta1_inf": (dict(optimizer="adam", beta1=math.inf), ("beta1",)),
    "eps_nan": (dict(optimizer="adam", eps=math.nan), ("eps",)),
    "step_zero": (dict(optimizer="adam", step=0), ("step",)),
}


@pytest.mark.parametrize("case", sorted(TRAINING))
def test_training_graph_refuses_bad_setting(case, fwd, hostile):
    kwargs, words = TRAINING[case]
    hostile.refuses(lambda: A.training_graph(fwd, **kwargs), *words)


def test_training_graph_refuses_what_is_not_a_graph(hostile):
    hostile.refuses(lambda: A.training_graph(None), "graph")
    hostile.refuses(lambda: A.training_graph("mlp"), "graph")


def test_training_graph_of_a_training_graph_works_or_refuses_cleanly(train, hostile):
    hostile.ok_or_refuses(lambda: A.training_graph(train), "graph")


MODELS = {
    "batch_fraction": ("mlp", dict(batch=2.5), ("batch",)),
    "batch_true": ("mlp", dict(batch=True), ("batch",)),
    "batch_nan": ("mlp", dict(batch=math.nan), ("batch",)),
    "sizes_one_layer": ("mlp", dict(sizes=(16,)), ("sizes",)),
    "sizes_negative": ("mlp", dict(sizes=(16, -8, 4)), ("sizes",)),
    "sizes_string": ("mlp", dict(sizes="sixteen"), ("sizes",)),
    "dtype_float16": ("mlp", dict(dtype="float16"), ("dtype",)),
    "unknown_option": ("mlp", dict(colour="red"), ("colour",)),
    "unknown_model": ("nope", {}, ("nope",)),
    "model_name_none": (None, {}, ("model",)),
}


@pytest.mark.parametrize("case", sorted(MODELS))
def test_models_build_refuses_bad_option(case, hostile):
    name, kwargs, words = MODELS[case]
    hostile.refuses(lambda: A.models.build(name, **kwargs), *words)


def test_check_refuses_unknown_backend(schedule, train, groq, hostile):
    hostile.refuses(lambda: A.check(schedule, backend="tpu", graph=train, hw=groq), "backend")


@pytest.mark.parametrize("path", [None, 42], ids=["none", "int"])
def test_load_schedule_refuses_what_is_not_a_path(path, hostile):
    hostile.refuses(lambda: A.load_schedule(path), "schedule")


def test_save_schedule_refuses_unwritable_path_and_non_schedules(schedule, hostile):
    hostile.refuses(lambda: A.save_schedule(schedule, "/proc/nope/s.json"), "/proc/nope")
    hostile.refuses(lambda: A.save_schedule("not a schedule", hostile.tmp / "s.json"), "schedule")


def test_evaluate_refuses_what_is_not_a_graph(hostile):
    hostile.refuses(lambda: A.evaluate(None), "graph")
